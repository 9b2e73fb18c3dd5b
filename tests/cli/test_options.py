"""`opt.model_from`: a command's pass-through options become the model by name, so a renamed
field or flag would silently fall back to a default; these tests catch that."""

from __future__ import annotations

import inspect

import pytest
from pydantic import BaseModel, Field, ValidationError

from flatscore.analysis.settings import AnalysisSettings
from flatscore.cli import options as opt
from flatscore.errors import InputError


class _Settings(BaseModel):
    threads: int = Field(1, ge=1)
    progress: bool = True
    log_every: int = 10


def test_model_from_takes_the_fields_by_name_and_leaves_the_rest() -> None:
    values = {"threads": 4, "progress": False, "out": "elsewhere", "steps": 3}
    assert opt.model_from(_Settings, values) == _Settings(threads=4, progress=False)
    assert opt.model_from(_Settings, {}) == _Settings()


def test_model_from_validates() -> None:
    with pytest.raises(ValidationError, match="threads"):
        opt.model_from(_Settings, {"threads": 0})


def test_train_embedded_passes_every_run_option_it_declares() -> None:
    """The flags of `train-embedded` that reach RunOptions: every field but log_every."""
    from flatscore.cli.commands_train import train_embedded_command
    from flatscore.train.train import RunOptions

    params = set(inspect.signature(train_embedded_command).parameters)
    assert params & set(RunOptions.model_fields) == {
        "init",
        "source",
        "concurrency",
        "threads",
        "checkpoint_minutes",
        "progress",
    }


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        ({"tost_margin": 0}, "--tost-margin"),
        ({"count": "some"}, "--count"),
        ({"bootstrap": 5_000_000_000}, "--bootstrap"),
        ({"budgets": "3-1"}, "--budgets"),
        ({"trials": "0-2"}, "--trial-range"),
    ],
)
def test_settings_from_flags_name_the_flag(flags: dict[str, object], flag: str) -> None:
    with pytest.raises(InputError) as info:
        opt.settings_from_flags(AnalysisSettings, **flags)
    assert info.value.field == flag
