"""`flatscore train-embedded --no-progress`'s step line (known answer: the line training
printed before its steps became data)."""

from __future__ import annotations

from flatscore.cli.commands_train import step_line
from flatscore.train.train import StepDone


def test_a_training_step_in_words() -> None:
    step = StepDone(step=20, steps=400, loss_ema=0.123456, seconds=3.26)
    assert step_line(step) == "step 20/400 loss(ema) 0.1235 3.3s/step"
