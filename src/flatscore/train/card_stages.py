"""The card's training stages, as data (their text: `flatscore.cli.embedded_card_stages`).
A later stage (`init_adapter_sha256` in its recipe) starts from an earlier stage's adapter,
so the card needs every training directory of the chain, each checked against the pin of the
next, to say what the adapter is and how to rebuild it from scratch. A stage is trained on
planted data (`dataset.json`, where the folder holds it) or is an on-policy round
(`onpolicy.json`: what its rollouts gave).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from flatscore.errors import InputError, validating
from flatscore.models.adapter import ADAPTER_FILE, adapter_sha256
from flatscore.train.recipe import TrainConfig
from flatscore.train.train import read_losses

ROUND_SUMMARY = "onpolicy.json"


class RoundSummary(BaseModel):
    """An on-policy round's `onpolicy.json`: what its rollouts gave (`flatscore.train.
    onpolicy`); the counts of planted damage only where the rollouts planted it."""

    model_config = ConfigDict(extra="ignore")

    episodes: int
    episodes_with_failure: int
    states: int
    repeat_states: int
    reissue_states: int
    off_path: int
    unlabelled: int
    planted_states: int | None = None
    before_plant_left_out: int | None = None
    labels: dict[str, int]
    cut_at_max_tokens: int
    onpolicy_records: int
    earlier_records: int
    earlier_available: int


@dataclass(frozen=True)
class Stage:
    """One training directory: `config.json`, `loss.jsonl`, the adapter (in `adapter/`, or
    beside the other files as the committed study folders hold it), `dataset.json` where the
    folder holds it, and an on-policy round's `onpolicy.json`."""

    path: Path
    config: TrainConfig
    data: list[dict[str, Any]] | None
    """The generated training data; None where the folder does not hold `dataset.json`."""
    losses: list[dict[str, Any]]
    adapter_sha256: str | None
    """sha256 of the adapter's `adapter_model.safetensors`; None before the run finished."""
    rollouts: RoundSummary | None = None
    """An on-policy round's `onpolicy.json`; None for a stage on planted data."""

    @property
    def digest(self) -> str | None:
        return dataset_digest(self.path) if self.data is not None else None

    @property
    def weights(self) -> Path:
        """Where the stage's adapter weights are (or, before the run finished, will be)."""
        return adapter_weights(self.path)

    @property
    def keeps_rollouts(self) -> bool:
        """The folder holds the rollouts' run files (`rollouts/`)."""
        return (self.path / "rollouts").is_dir()

    @property
    def keeps_rollouts_study(self) -> bool:
        """The folder holds the rollouts' study (`rollouts-study.json`)."""
        return (self.path / "rollouts-study.json").is_file()


def adapter_weights(train_dir: Path) -> Path:
    """`adapter/adapter_model.safetensors` (a training run's folder), or the weights beside
    the other files (a committed stage)."""
    beside = train_dir / ADAPTER_FILE
    nested = train_dir / "adapter" / ADAPTER_FILE
    if nested.is_file() or (train_dir / "adapter").is_dir():
        return nested
    return beside if beside.is_file() or (train_dir / "adapter_config.json").is_file() else nested


def dataset_digest(train_dir: Path) -> str:
    """sha256 of the generated training data: equal digests = the same conversations."""
    return hashlib.sha256((train_dir / "dataset.json").read_bytes()).hexdigest()[:16]


def load_stage(train_dir: Path) -> Stage:
    """A training directory's files (missing or invalid ones: one line, exit code 2)."""
    config_file = train_dir / "config.json"
    if not config_file.is_file():
        raise InputError("is missing: not a training directory", file=str(config_file))
    with validating(file=str(config_file)):
        config = TrainConfig.model_validate_json(config_file.read_bytes())
    data = None
    if (train_dir / "dataset.json").is_file():
        try:
            data = json.loads((train_dir / "dataset.json").read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise InputError("is not valid JSON", file=str(train_dir / "dataset.json")) from None
    rollouts = None
    if config.on_policy is not None:
        summary = train_dir / ROUND_SUMMARY
        if not summary.is_file():
            raise InputError(
                "is missing: an on-policy round's card states what its rollouts gave",
                file=str(summary),
            )
        with validating(file=str(summary)):
            rollouts = RoundSummary.model_validate_json(summary.read_bytes())
    if data is None and not (train_dir / "loss.jsonl").is_file():
        raise InputError(
            "is missing: a stage folder without its dataset.json needs its loss log",
            file=str(train_dir / "loss.jsonl"),
        )
    weights = adapter_weights(train_dir)
    return Stage(
        path=train_dir,
        config=config,
        data=data,
        losses=read_losses(train_dir),
        adapter_sha256=adapter_sha256(weights.parent) if weights.is_file() else None,
        rollouts=rollouts,
    )


def stages_of(train_dir: Path, init_train: Path | Sequence[Path] | None) -> list[Stage]:
    """The chain that ends at `train_dir`'s stage: `init_train` are the stages it started
    from, the first stage first (one directory, or none for a stage from the base model).
    Each stage's pinned start is checked against the adapter of the one before it."""
    earlier = [init_train] if isinstance(init_train, Path) else list(init_train or [])
    stages = [load_stage(p) for p in [*earlier, train_dir]]
    for i in range(len(stages) - 1, -1, -1):
        _check_start(stages, i)
    base = stages[-1].config.base
    for stage in stages[:-1]:
        if stage.config.base != base:
            raise InputError(
                f"trains {stage.config.base!r}, not the {base!r} of {train_dir}",
                file=str(stage.path / "config.json"),
                field="base",
            )
    return stages


def _check_start(stages: list[Stage], i: int) -> None:
    """Stage `i` starts where its recipe says: the base model for the first stage, the
    previous stage's adapter (by sha256) for every later one."""
    stage = stages[i]
    pin = stage.config.init_adapter_sha256
    config_file = str(stage.path / "config.json")
    if i == 0:
        if pin is None:
            return
        if len(stages) == 1:
            raise InputError(
                f"starts from the adapter with sha256 {pin[:16]}…: pass that stage's training "
                "directory with --init-train DIR",
                file=config_file,
                field="init_adapter_sha256",
            )
        raise InputError(
            f"starts from another adapter itself (sha256 {pin[:16]}…): pass its training "
            "directory too, with --init-train DIR, the first stage first",
            file=config_file,
            field="init_adapter_sha256",
        )
    if pin is None:
        before = "drop --init-train" if i == len(stages) - 1 else "drop the --init-train before it"
        raise InputError(
            f"starts from the base model (no init_adapter_sha256): {before}", file=config_file
        )
    previous = stages[i - 1]
    weights = str(previous.weights)
    if previous.adapter_sha256 is None:
        raise InputError(
            "is missing: the stage's adapter is what the next one starts from", file=weights
        )
    if previous.adapter_sha256 != pin:
        raise InputError(
            f"has sha256 {previous.adapter_sha256[:16]}…, not the {pin[:16]}… that "
            f"{config_file} pins (init_adapter_sha256)",
            file=weights,
        )


def loss_table(losses: list[dict[str, Any]], buckets: int = 10) -> list[tuple[int, int, float]]:
    """(first step, last step, token-weighted mean loss) over `buckets` equal step ranges."""
    if not losses:
        return []
    size = max(1, -(-len(losses) // buckets))
    rows = []
    for i in range(0, len(losses), size):
        chunk = losses[i : i + size]
        tokens = sum(r["tokens"] for r in chunk)
        mean = sum(r["loss"] * r["tokens"] for r in chunk) / tokens if tokens else 0.0
        rows.append((chunk[0]["step"], chunk[-1]["step"], mean))
    return rows


PLANTED_FIELDS = (
    "domains",
    "variants",
    "mistake_share",
    "detour_share",
    "data_seed",
    "mistakes_most",
    "repeat_share",
    "natural_mistakes",
)
"""The recipe fields that make its planted data: equal fields, the same conversations."""


def same_planted_data(a: TrainConfig, b: TrainConfig) -> bool:
    return all(getattr(a, f) == getattr(b, f) for f in PLANTED_FIELDS)


@dataclass(frozen=True)
class DataSize:
    """A stage's generated data in numbers."""

    conversations: int
    tokens: int
    trained: int
    """Tokens that carry loss (the mask)."""
    detours: int
    """Conversations drawn for the identification detour."""


def data_size(data: Sequence[dict[str, Any]]) -> DataSize:
    return DataSize(
        conversations=len(data),
        tokens=sum(len(d["ids"]) for d in data),
        trained=sum(sum(d["mask"]) for d in data),
        detours=sum(bool(d.get("detour")) for d in data),
    )
