"""`flatscore arms make`'s progress lines (known answers: what the checkpoint maker printed
before its steps became data)."""

from __future__ import annotations

from flatscore.cli.commands_arms import step_line
from flatscore.models.quant.toolchain import MakeStep


def test_each_step_of_making_a_checkpoint_in_words() -> None:
    tokenizing = MakeStep(step="tokenizing", recipe="llmc-w4a16")
    assert step_line(tokenizing) == (
        "tokenizing calibration transcripts (train split, oracle episodes)…"
    )
    running = MakeStep(step="running", recipe="llmc-w4a16", python="/q/.venv-quant/bin/python")
    assert step_line(running) == (
        "running llmc-w4a16 with llm-compressor (/q/.venv-quant/bin/python)…"
    )
    other = MakeStep(
        step="other_libraries",
        recipe="llmc-w4a16",
        libraries={"llmcompressor": "0.15.0", "torch": "2.13.0+cpu"},
        pinned={"llmcompressor": "0.14.0.1", "torch": "2.13.0"},
    )
    assert step_line(other) == (
        "warning: the quantization environment has {'llmcompressor': '0.15.0', 'torch': "
        "'2.13.0+cpu'}, pinned {'llmcompressor': '0.14.0.1', 'torch': '2.13.0'}"
    )
