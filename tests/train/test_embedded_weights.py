"""Merging the adapter: W' = W + B·A·alpha/r on exactly the adapted layers; the env override
chooses or disables the adapter."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from flatscore.errors import InputError
from flatscore.models.adapter import ADAPTER_ENV, adapter_sha256, merge_adapter, shipped_adapter
from tiny_llama_model import tiny_llama


def _adapter(tmp_path: Path) -> Path:
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(
        tiny_llama(),
        LoraConfig(
            r=2, lora_alpha=4, target_modules=["q_proj", "down_proj"], layers_to_transform=[1]
        ),
    )
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn_like(p))
    model.save_pretrained(str(tmp_path / "adapter"))
    return tmp_path / "adapter"


def test_merge_adds_scaled_low_rank_product(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    adapter = _adapter(tmp_path)
    lora = load_file(str(adapter / "adapter_model.safetensors"))
    base = tiny_llama()
    before = {k: v.clone() for k, v in base.state_dict().items()}
    merged = merge_adapter(base, adapter)
    after = merged.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed == {
        "model.layers.1.self_attn.q_proj.weight",
        "model.layers.1.mlp.down_proj.weight",
    }
    for module in ("self_attn.q_proj", "mlp.down_proj"):
        prefix = f"base_model.model.model.layers.1.{module}"
        a, b = lora[f"{prefix}.lora_A.weight"], lora[f"{prefix}.lora_B.weight"]
        key = f"model.layers.1.{module}.weight"
        torch.testing.assert_close(after[key], before[key] + (b @ a) * (4 / 2))


def test_env_override_chooses_or_disables_the_adapter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = _adapter(tmp_path)
    monkeypatch.setenv(ADAPTER_ENV, str(adapter))
    assert shipped_adapter() == adapter
    monkeypatch.setenv(ADAPTER_ENV, "none")
    assert shipped_adapter() is None
    monkeypatch.setenv(ADAPTER_ENV, str(tmp_path / "missing"))
    with pytest.raises(InputError, match=r"adapter_model\.safetensors"):
        shipped_adapter()


def test_description_names_the_adapter_that_was_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flatscore.models.adapter import apply_shipped_adapter

    adapter = _adapter(tmp_path)
    monkeypatch.setenv(ADAPTER_ENV, str(adapter))
    _, name, text = apply_shipped_adapter(tiny_llama(), "tiny", "a Q4_1 base")
    assert name == "tiny+flatscore-lora"
    digest = adapter_sha256(adapter)[:12]
    assert text == (
        f"a Q4_1 base, with the LoRA adapter at {adapter} (sha256 {digest}) merged in fp32"
    )
    monkeypatch.setenv(ADAPTER_ENV, "none")
    assert apply_shipped_adapter(tiny_llama(), "tiny", "a Q4_1 base")[1:] == ("tiny", "a Q4_1 base")


def test_the_shipped_adapter_is_found_and_is_study_v2s(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the override the embedded model merges the adapter shipped in the package
    (the one study v2 was played with): a wrong folder would silently run the base model."""
    from flatscore.run.reproduce import V2_ADAPTER_SHA256

    monkeypatch.delenv(ADAPTER_ENV, raising=False)
    found = shipped_adapter()
    assert found is not None and (found / "adapter_config.json").is_file()
    assert adapter_sha256(found) == V2_ADAPTER_SHA256
