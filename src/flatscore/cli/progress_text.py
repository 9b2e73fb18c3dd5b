"""The progress lines of long commands, from the steps their work reports as data: a
training step (`train-embedded --no-progress`) and a step of making a checkpoint (`arms
make`). Apart from the commands so that a test reads them without registering a command."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flatscore.models.quant.toolchain import MakeStep
    from flatscore.train.train import StepDone


def training_step(step: StepDone) -> str:
    """A training step as `train-embedded --no-progress` prints it."""
    return f"step {step.step}/{step.steps} loss(ema) {step.loss_ema:.4f} {step.seconds:.1f}s/step"


def checkpoint_step(step: MakeStep) -> str:
    """A step of making a checkpoint as the line `arms make` prints."""
    if step.step == "tokenizing":
        return "tokenizing calibration transcripts (train split, oracle episodes)…"
    if step.step == "running":
        return f"running {step.recipe} with llm-compressor ({step.python})…"
    return f"warning: the quantization environment has {step.libraries}, pinned {step.pinned}"
