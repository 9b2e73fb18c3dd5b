"""compressed-tensors checkpoints run in-process: the emulated activation quantization (known
answers, refusals) and, in the slow tier, a real llm-compressor checkpoint of the embedded
model loaded back and run as a study arm."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from flatscore.errors import InputError
from flatscore.models.compressed import (
    activation_quantizer,
    int_per_token_symmetric,
    quantization_config,
)
from flatscore.models.quant.floats import fp8_e4m3_per_token
from flatscore.models.quant.toolchain import quant_python

FP8_TOKEN = {"type": "float", "num_bits": 8, "dynamic": True, "strategy": "token"}
INT8_TOKEN = {"type": "int", "num_bits": 8, "dynamic": True, "strategy": "token", "symmetric": True}


def test_int8_per_token_known_answer() -> None:
    x = torch.tensor([[1.0, -2.0, 0.5], [0.0, 0.0, 0.0]])
    scale = 2.0 / 127
    expected = torch.tensor(
        [[round(1.0 / scale) * scale, -2.0, round(0.5 / scale) * scale], [0, 0, 0]]
    )
    assert torch.allclose(int_per_token_symmetric(x), expected)
    # each row on its own: a row's result does not depend on the batch
    assert torch.equal(int_per_token_symmetric(x[:1]), int_per_token_symmetric(x)[:1])


def test_the_scheme_picks_the_activation_quantizer() -> None:
    assert activation_quantizer(None) is None
    assert activation_quantizer(FP8_TOKEN) is fp8_e4m3_per_token
    x = torch.randn(4, 16)
    assert torch.equal(activation_quantizer(INT8_TOKEN)(x), int_per_token_symmetric(x))


@pytest.mark.parametrize(
    "args",
    [
        {**FP8_TOKEN, "dynamic": False},  # static scales from calibration
        {**INT8_TOKEN, "strategy": "tensor"},
        {**INT8_TOKEN, "symmetric": False},
        {**FP8_TOKEN, "num_bits": 4},
    ],
)
def test_what_is_not_emulated_is_refused(args: dict[str, object]) -> None:
    with pytest.raises(InputError, match="not emulated"):
        activation_quantizer(args)


def test_a_folder_without_compressed_tensors_config_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(InputError, match="not a compressed-tensors checkpoint"):
        quantization_config(tmp_path)


NO_ENV = quant_python() is None or importlib.util.find_spec("compressed_tensors") is None
needs_env = pytest.mark.skipif(
    NO_ENV,
    reason="needs the quantization environment (`make quant-env`) and the `compressed` extra",
)


@pytest.mark.slow
@needs_env
def test_the_fp8_checkpoint_loads_back_with_the_hand_written_fp8_weights() -> None:
    """llm-compressor's FP8 dynamic checkpoint of the embedded model, decompressed, holds the
    weights flatscore's own fp8 arm computes (the same grid and scale rule), and its linears
    quantize their inputs per token."""
    from flatscore.models.compressed import CompressedBackend, load_compressed
    from flatscore.models.embedded import load_model
    from flatscore.models.quant.arms import QuantizeInput, apply_arm, quantizable_linears
    from flatscore.models.quant.recipes import get_recipe
    from flatscore.models.quant.toolchain import make_checkpoint

    checkpoint = make_checkpoint(get_recipe("llmc-w8a8-fp8"))
    assert checkpoint.path is not None and checkpoint.libraries["llmcompressor"] == "0.14.0.1"
    tool = load_compressed(Path(checkpoint.path), "fp8")
    hand = load_model("embedded")
    apply_arm(hand.model, "fp8")
    tool_linears, hand_linears = quantizable_linears(tool.model), quantizable_linears(hand.model)
    assert tool_linears.keys() == hand_linears.keys() and len(tool_linears) == 210
    equal = sum(int((tool_linears[n].weight == hand_linears[n].weight).sum()) for n in tool_linears)
    total = sum(m.weight.numel() for m in tool_linears.values())
    assert equal / total > 0.999
    assert all(
        any(isinstance(h, QuantizeInput) for h in m._forward_pre_hooks.values())
        for m in tool_linears.values()
    )
    backend = CompressedBackend.from_checkpoint(checkpoint, "llmc-w8a8-fp8")
    serving = backend.serving()
    assert serving.checkpoint == checkpoint and serving.weight_format == "llmc-w8a8-fp8"
    assert serving.weight_bytes is not None and serving.resident_weight_bytes is not None
    assert serving.weight_bytes < 0.5 * serving.resident_weight_bytes  # fp8 on disk, fp32 here
    backend.close()


@pytest.mark.slow
@needs_env
def test_a_study_runs_a_checkpoint_arm_and_records_the_checkpoint(tmp_path: Path) -> None:
    """`flatscore run` on a study whose arm is an llm-compressor checkpoint: its episodes say
    which checkpoint played them (recipe, hashes, library versions); the reference's none."""
    import yaml

    from cli_runner import flatscore
    from flatscore.models.quant.recipes import get_recipe
    from flatscore.models.quant.toolchain import make_checkpoint

    study = {
        "name": "llmc-smoke",
        "output": "out",
        "models": [
            {
                "name": "smollm2-135m",
                "kind": "embedded",
                "sampling": {"temperature": 0, "max_tokens": 24},
                "arms": {"ref": {}, "llmc-w8a8-fp8": {}},
            }
        ],
        "domains": ["retail"],
        "split": "test",
        "tasks_per_domain": 1,
        "max_steps": 4,
        "user": {"kind": "scripted"},
    }
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study))
    done = flatscore("run", tmp_path / "study.yaml", timeout=1200)
    assert done.returncode == 0, done.stderr[-2000:]
    episodes = [
        json.loads(line)
        for f in sorted((tmp_path / "out" / "runs").glob("*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    by_arm = {e["arm"]: e for e in episodes}
    assert set(by_arm) == {"ref", "llmc-w8a8-fp8"}
    assert by_arm["ref"]["serving"]["checkpoint"] is None
    recorded = by_arm["llmc-w8a8-fp8"]["serving"]["checkpoint"]
    made = make_checkpoint(get_recipe("llmc-w8a8-fp8"))
    assert recorded["sha256"] == made.sha256 and recorded["recipe"] == "llmc-w8a8-fp8"
    assert recorded["libraries"]["llmcompressor"] == "0.14.0.1"
    assert recorded["stage"] == get_recipe("llmc-w8a8-fp8").stage()
