"""The card's training sections, one per training stage: a recovery stage
(`init_adapter_sha256` in its recipe) starts from an earlier stage's adapter, so the card
needs both training directories, checked against the pin, to say what the adapter is and
how to rebuild it from scratch.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flatscore.analysis.markdown_table import table_lines
from flatscore.errors import InputError, validating
from flatscore.models.adapter import ADAPTER_FILE, adapter_sha256
from flatscore.train.composition import DomainComposition, composition
from flatscore.train.recipe import TrainConfig
from flatscore.train.train import read_losses


@dataclass(frozen=True)
class Stage:
    """One training directory (`config.json`, `dataset.json`, `loss.jsonl`, `adapter/`)."""

    path: Path
    config: TrainConfig
    data: list[dict[str, Any]]
    losses: list[dict[str, Any]]
    adapter_sha256: str | None
    """sha256 of `adapter/adapter_model.safetensors`; None before the run finished."""

    @property
    def digest(self) -> str:
        return dataset_digest(self.path)


def dataset_digest(train_dir: Path) -> str:
    """sha256 of the generated training data: equal digests = the same conversations."""
    return hashlib.sha256((train_dir / "dataset.json").read_bytes()).hexdigest()[:16]


def load_stage(train_dir: Path) -> Stage:
    """A training directory's files (missing or invalid ones: one line, exit code 2)."""
    config_file = train_dir / "config.json"
    for name in ("config.json", "dataset.json"):
        if not (train_dir / name).is_file():
            raise InputError(f"is not a training directory (no {name})", file=str(train_dir))
    with validating(file=str(config_file)):
        config = TrainConfig.model_validate_json(config_file.read_bytes())
    weights = train_dir / "adapter" / ADAPTER_FILE
    try:
        data = json.loads((train_dir / "dataset.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError("is not valid JSON", file=str(train_dir / "dataset.json")) from None
    return Stage(
        path=train_dir,
        config=config,
        data=data,
        losses=read_losses(train_dir),
        adapter_sha256=adapter_sha256(weights.parent) if weights.is_file() else None,
    )


def stages_of(train_dir: Path, init_train: Path | None) -> list[Stage]:
    """[the stage `train_dir` started from, if any] + [train_dir's stage]: the pinned start
    checked against the earlier stage's adapter."""
    last = load_stage(train_dir)
    pin = last.config.init_adapter_sha256
    config_file = str(train_dir / "config.json")
    if pin is None:
        if init_train is not None:
            raise InputError(
                "starts from the base model (no init_adapter_sha256): drop --init-train",
                file=config_file,
            )
        return [last]
    if init_train is None:
        raise InputError(
            f"starts from the adapter with sha256 {pin[:16]}…: pass that stage's training "
            "directory with --init-train DIR",
            file=config_file,
            field="init_adapter_sha256",
        )
    first = load_stage(init_train)
    weights = str(init_train / "adapter" / ADAPTER_FILE)
    if first.adapter_sha256 is None:
        raise InputError(
            "is missing: the stage's adapter is what the next one starts from", file=weights
        )
    if first.adapter_sha256 != pin:
        raise InputError(
            f"has sha256 {first.adapter_sha256[:16]}…, not the {pin[:16]}… that "
            f"{config_file} pins (init_adapter_sha256)",
            file=weights,
        )
    if first.config.init_adapter_sha256 is not None:
        raise InputError(
            "starts from another adapter itself: the card describes at most two stages",
            file=str(init_train / "config.json"),
        )
    return [first, last]


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


def composition_tables(parts: dict[str, DomainComposition], most: int) -> list[str]:
    """Conversations per domain by how many mistakes they hold, and mistakes by channel."""
    counts = range(1, max([most, *(k for d in parts.values() for k in d.by_mistakes)]) + 1)
    head = ["domain", "conversations", "clean", *[f"{k} mistake{'s' * (k > 1)}" for k in counts]]
    head += ["mistakes made twice", "identification detour"]
    rows = [
        [
            name,
            d.conversations,
            d.by_mistakes.get(0, 0),
            *(d.by_mistakes.get(k, 0) for k in counts),
            f"{d.made_twice} of {d.mistakes}",
            d.detour,
        ]
        for name, d in parts.items()
    ]
    out = table_lines(head, rows, "lr")
    channels = [[name, c, n] for name, d in parts.items() for c, n in sorted(d.channels.items())]
    out += ["", *table_lines(["domain", "planted channel", "mistakes"], channels, "llr")]
    uncounted = sum(d.uncounted for d in parts.values())
    if uncounted:
        out += [
            "",
            f"({uncounted} conversations hold fewer failing turns than planted mistakes, "
            "cut at max_tokens: their repeats are not counted.)",
        ]
    return out


def data_section(stage: Stage, title: str) -> list[str]:
    c, data = stage.config, stage.data
    first_seed = c.data_seed * 1000
    parts = composition(data)
    planted = sorted({ch for d in parts.values() for ch in d.channels})
    mistakes = (
        f"{c.mistake_share:.0%} of them with one planted mistake"
        if c.mistakes_most == 1
        else f"{c.mistake_share:.0%} of them with 1–{c.mistakes_most} planted mistakes "
        "(at different gold steps)"
    )
    repeats = (
        f"; each mistake made twice with probability {c.repeat_share:g} (the correction "
        "follows a second, identical failure)"
        if c.repeat_share
        else ""
    )
    natural = (
        ", including the kinds the reference made on its own (`natural_mistakes`: an extra "
        "argument valued from the conversation, a value of the user's typed as the name)"
        if c.natural_mistakes
        else ""
    )
    return [
        "",
        f"## Training data{title}",
        f"- Oracle episodes on the **train split** of ({', '.join(c.domains)}), run with the "
        f"real runner and the scripted user, {c.variants} user-phrasing variants per task "
        f"(scripted-user seeds {first_seed}–{first_seed + c.variants - 1}), {mistakes}"
        f"{repeats}, each followed by its recovery (the corrected call, or a clarifying "
        "question and then the corrected call). Channels planted: "
        f"{', '.join(planted) or 'none'}{natural}; each candidate checked to fail in its "
        "channel. The planted mistakes are training data only: the evaluation's `ref` arm "
        "plants nothing.",
        f"- {c.detour_share:.0%} of the episodes drawn for the identification detour (the "
        "agent asks for the identification the user does not have first; the user says so "
        "or offers the other one; it changes retail episodes only): "
        f"{sum(bool(d.get('detour')) for d in data)} conversations in all. Not a mistake: "
        "the agent cannot know which one the user remembers.",
        "- Loss on the agent's own tokens only (its turns, minus the fixed greeting and minus "
        "the failing calls).",
        f"- Training data sha256 `{stage.digest}`: {len(data)} conversations, "
        f"{sum(len(d['ids']) for d in data)} tokens, {sum(sum(d['mask']) for d in data)} "
        "trained tokens. Repeats are counted from the records' tokens (failing turns carry "
        "no loss):",
        "",
        *composition_tables(parts, c.mistakes_most),
    ]


def training_section(stage: Stage, title: str, start: str) -> list[str]:
    c, losses = stage.config, stage.losses
    seconds = sum(r.get("seconds", 0.0) for r in losses)
    return [
        "",
        f"## Training{title}",
        f"- From {start}: {c.steps} steps, one conversation per step, AdamW lr {c.lr:g} "
        f"(warm-up {c.warmup}, cosine to {c.min_lr_ratio:g}×), seed {c.seed}; fp32 on CPU.",
        f"- Steps logged: {len(losses)}; summed step time {seconds / 3600:.2f} h "
        "(as measured in the run, including any CPU contention).",
        "",
        "Loss (token-weighted mean cross-entropy on trained tokens):",
        "",
        *table_lines(
            ["steps", "loss"], [[f"{a}–{b}", f"{m:.4f}"] for a, b, m in loss_table(losses)], "l"
        ),
    ]


def _recipe(stage: Stage) -> str:
    """The recipe as the fields that differ from `TrainConfig()` (the default recipe)."""
    return json.dumps(stage.config.model_dump(mode="json", exclude_defaults=True))


def reproduce_section(stages: list[Stage]) -> list[str]:
    """The commands that rebuild the adapter from an empty folder."""
    out = ["", "## Reproduce from scratch", "", "```"]
    for i, stage in enumerate(stages, 1):
        recipe = _recipe(stage)
        folder = f"STAGE{i}"
        command = "flatscore train-embedded"
        if recipe != "{}":
            out.append(f"cat > recipe{i}.json <<'EOF'\n{recipe}\nEOF")
            command += f" --recipe recipe{i}.json"
        if i > 1:
            command += f" --init STAGE{i - 1}/adapter"
        out.append(f"{command} --out {folder}    # resumable with --resume")
    out += [
        "```",
        "",
        "Each stage writes `config.json`, `dataset.json` (the data digest above), `loss.jsonl` "
        "and `adapter/`"
        + (
            "; the second stage refuses an `--init` adapter whose sha256 is not the one "
            "its recipe pins."
            if len(stages) > 1
            else "."
        ),
    ]
    return out
