"""The training recipe (`TrainConfig`, with an on-policy stage's data: `OnPolicy`), as data:
what the data builders (`flatscore.train.data`, `flatscore.train.onpolicy`) and the trainer
(`flatscore.train.train`) read, kept apart from all three so that none imports another
back."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from flatscore.errors import InputError, validating
from flatscore.study import InjectRates


class OnPolicy(BaseModel):
    """An on-policy recovery stage's data (`flatscore.train.onpolicy`): the reference (the
    base + the adapter whose weights hash to `source_adapter_sha256`) runs the split at this
    sampling; each of its failed states, labelled with the oracle's next turn, is one
    conversation, mixed with the recipe's planted data (`earlier_share` of the whole)."""

    model_config = ConfigDict(extra="forbid")

    source_adapter_sha256: str
    split: Literal["train"] = "train"  # the test split is what the rounds are judged on
    trials: int = Field(4, ge=1)  # episodes per task; trial t runs with seed `seed + t`
    tasks_per_domain: int | None = Field(None, ge=1)  # the first N tasks (None: all)
    seed: int = 1000
    temperature: float = Field(0.5, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(256, ge=1)
    max_steps: int = Field(40, ge=1)
    max_errors: int = Field(10, ge=0)
    earlier_share: float = Field(0.5, ge=0.0, lt=1.0)
    # a state off the gold path (a wrong write succeeded): the first gold action not yet
    # made, if it still succeeds there ("continue"), or no example ("drop")
    off_path: Literal["continue", "drop"] = "continue"
    # damage planted in the rollouts' calls (`flatscore.agents.inject`) by a second arm,
    # `ref-planted`, beside `ref`: after a planted failure, what the agent does is its own
    # (a loop above all), and each of its failed states is labelled as any other
    inject: InjectRates | None = None


class TrainConfig(BaseModel):
    """The recipe. Every field changes the result; `threads` and checkpoint timing do not
    change it in principle (float sums may differ across thread counts)."""

    model_config = ConfigDict(extra="forbid")

    base: str = "embedded-base"
    variants: int = Field(12, ge=1)
    mistake_share: float = Field(0.5, ge=0.0, le=1.0)
    detour_share: float = Field(0.5, ge=0.0, le=1.0)
    data_seed: int = 0
    seed: int = 0
    steps: int = Field(1000, ge=1)
    lr: float = Field(3e-4, gt=0)
    warmup: int = Field(30, ge=0)
    min_lr_ratio: float = Field(0.1, ge=0.0, le=1.0)
    weight_decay: float = 0.0
    rank: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    first_layer: int = Field(15, ge=0)
    max_tokens: int = Field(4096, ge=16)
    domains: tuple[str, ...] = ("retail", "telecom")
    # The recovery stage (docs/embedded.md "Training"): conversations with up to
    # `mistakes_most` planted mistakes, each repeated with `repeat_share`, including the
    # kinds the reference made on its own (`natural_mistakes`), trained on top of the
    # adapter whose weights hash to `init_adapter_sha256` (None: from the base model).
    mistakes_most: int = Field(1, ge=1, le=5)
    repeat_share: float = Field(0.0, ge=0.0, le=1.0)
    natural_mistakes: bool = False
    init_adapter_sha256: str | None = None
    # An on-policy recovery stage (docs/embedded.md, "On-policy rounds"): its data are the
    # reference's own failed states (None: the planted data above only).
    on_policy: OnPolicy | None = None


def load_recipe(path: Path | None) -> TrainConfig:
    """The recipe in `path` (JSON of TrainConfig fields), or the first stage's defaults."""
    if path is None:
        return TrainConfig()
    try:
        recipe = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the recipe ({exc.strerror})", file=str(path)) from None
    with validating(file=str(path)):
        return TrainConfig.model_validate_json(recipe)
