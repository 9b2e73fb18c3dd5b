"""The progress lines of long commands (known answers: what `train-embedded` and `arms make`
printed before their steps became data)."""

from __future__ import annotations

from flatscore.cli.progress_text import checkpoint_step, training_step
from flatscore.models.quant.toolchain import MakeStep
from flatscore.train.train import StepDone


def test_a_training_step_in_words() -> None:
    step = StepDone(step=20, steps=400, loss_ema=0.123456, seconds=3.26)
    assert training_step(step) == "step 20/400 loss(ema) 0.1235 3.3s/step"


def test_each_step_of_making_a_checkpoint_in_words() -> None:
    tokenizing = MakeStep(step="tokenizing", recipe="llmc-w4a16")
    assert checkpoint_step(tokenizing) == (
        "tokenizing calibration transcripts (train split, oracle episodes)…"
    )
    running = MakeStep(step="running", recipe="llmc-w4a16", python="/q/.venv-quant/bin/python")
    assert checkpoint_step(running) == (
        "running llmc-w4a16 with llm-compressor (/q/.venv-quant/bin/python)…"
    )
    other = MakeStep(
        step="other_libraries",
        recipe="llmc-w4a16",
        libraries={"llmcompressor": "0.15.0", "torch": "2.13.0+cpu"},
        pinned={"llmcompressor": "0.14.0.1", "torch": "2.13.0"},
    )
    assert checkpoint_step(other) == (
        "warning: the quantization environment has {'llmcompressor': '0.15.0', 'torch': "
        "'2.13.0+cpu'}, pinned {'llmcompressor': '0.14.0.1', 'torch': '2.13.0'}"
    )
