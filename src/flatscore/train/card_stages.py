"""The card's training sections, one per training stage. A later stage
(`init_adapter_sha256` in its recipe) starts from an earlier stage's adapter, so the card
needs every training directory of the chain, each checked against the pin of the next, to
say what the adapter is and how to rebuild it from scratch. A stage is trained on planted
data (`dataset.json`, where the folder holds it) or is an on-policy round (`onpolicy.json`:
what its rollouts gave).
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
from flatscore.report.markdown_table import table_lines
from flatscore.train.composition import DomainComposition, composition
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


def _planted_data(c: TrainConfig, planted: str, lead: str = "Oracle episodes") -> str:
    """What the recipe's planted data are: oracle episodes with mistakes and recoveries."""
    first_seed = c.data_seed * 1000
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
    return (
        f"{lead} on the **train split** of ({', '.join(c.domains)}), run with the "
        f"real runner and the scripted user, {c.variants} user-phrasing variants per task "
        f"(scripted-user seeds {first_seed}–{first_seed + c.variants - 1}), {mistakes}"
        f"{repeats}, each followed by its recovery (the corrected call, or a clarifying "
        f"question and then the corrected call). Channels planted: {planted}{natural}; each "
        "candidate checked to fail in its channel. The planted mistakes are training data "
        "only: the evaluation's `ref` arm plants nothing."
    )


DETOUR = (
    "of the episodes drawn for the identification detour (the agent asks for the "
    "identification the user does not have first; the user says so or offers the other one; "
    "it changes retail episodes only)"
)
LOSS_LINE = (
    "- Loss on the agent's own tokens only (its turns, minus the fixed greeting and minus "
    "the failing calls)."
)
NO_DATASET = (
    "- The generated data (`dataset.json`) is not in this folder, so its digest and "
    "composition are not stated: `flatscore train-embedded` with this stage's recipe "
    "rebuilds it (seeded) and writes it."
)


def data_section(stage: Stage, title: str, earlier: Sequence[Stage] = ()) -> list[str]:
    """What the stage trained on: its planted data, or an on-policy round's states
    (`earlier`: the stages before it in the chain)."""
    if stage.rollouts is not None:
        return ["", f"## Training data{title}", *round_data_lines(stage, earlier)]
    c, data = stage.config, stage.data
    if data is None:
        return [
            "",
            f"## Training data{title}",
            "- " + _planted_data(c, "drawn among the analysis' channels each task allows"),
            f"- {c.detour_share:.0%} {DETOUR}. Not a mistake: the agent cannot know which one "
            "the user remembers.",
            LOSS_LINE,
            NO_DATASET,
        ]
    parts = composition(data)
    planted = sorted({ch for d in parts.values() for ch in d.channels})
    return [
        "",
        f"## Training data{title}",
        "- " + _planted_data(c, ", ".join(planted) or "none"),
        f"- {c.detour_share:.0%} {DETOUR}: "
        f"{sum(bool(d.get('detour')) for d in data)} conversations in all. Not a mistake: "
        "the agent cannot know which one the user remembers.",
        LOSS_LINE,
        f"- Training data sha256 `{stage.digest}`: {len(data)} conversations, "
        f"{sum(len(d['ids']) for d in data)} tokens, {sum(sum(d['mask']) for d in data)} "
        "trained tokens. Repeats are counted from the records' tokens (failing turns carry "
        "no loss):",
        "",
        *composition_tables(parts, c.mistakes_most),
    ]


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


def round_data_lines(stage: Stage, earlier: Sequence[Stage] = ()) -> list[str]:
    """An on-policy round's data: the rollouts that made them (the recipe's `on_policy`),
    what they gave (`onpolicy.json`), and the planted share mixed in (named by the earlier
    stage of the chain that trained on the same planted data, if any)."""
    c, r = stage.config, stage.rollouts
    p = c.on_policy
    assert p is not None and r is not None  # a round has both (load_stage)
    seeds = f"seed {p.seed}" if p.trials == 1 else f"seeds {p.seed}–{p.seed + p.trials - 1}"
    rollouts = (
        f"- Rollouts: the base with the adapter of sha256 `{p.source_adapter_sha256}` "
        f"(`on_policy.source_adapter_sha256`) played the **{p.split} split** of "
        f"({', '.join(c.domains)}) as a study, with the scripted user: "
        f"{p.trials} trial{'s' * (p.trials > 1)} per task ({seeds}), temperature "
        f"{p.temperature:g}, top-p {p.top_p:g}, at most {p.max_tokens} tokens per turn, "
        f"max_steps {p.max_steps}, budget max_errors {p.max_errors}"
        + (f", the first {p.tasks_per_domain} tasks per domain" if p.tasks_per_domain else "")
        + "."
    )
    if p.inject is not None:
        rates = ", ".join(f"{k} p = {v:g}" for k, v in p.inject.model_dump().items() if v)
        rollouts += (
            " Beside `ref`, the arm `ref-planted` played the same weights with damage planted "
            f"into its calls ({rates}): what the agent did after a planted failure is its own."
        )
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(r.labels.items()))
    same = next(
        (
            i
            for i, s in enumerate(earlier, 1)
            if s.rollouts is None and same_planted_data(s.config, c)
        ),
        None,
    )
    planted = (
        f"the conversations of stage {same}'s data (the same recipe fields)."
        if same is not None
        else _planted_data(
            c, "drawn among the analysis' channels each task allows", "oracle episodes"
        )
    )
    marked = ""
    if r.planted_states is not None:
        marked = f"; {r.planted_states} hold a planted call"
        if r.before_plant_left_out:
            marked += (
                f", {r.before_plant_left_out} of the planted arm's states before its first "
                "planted call left out (with the same seeds they are `ref`'s)"
            )
    out = [
        rollouts,
        f"- {r.episodes} episodes, {r.episodes_with_failure} with a failed call: "
        f"{r.states} failed states ({r.repeat_states} repeat the previous failed call, "
        f"{r.reissue_states} re-issue a call that had succeeded, {r.off_path} off the gold "
        f"path, {r.unlabelled} without a label and not kept{marked}).",
        "- Each state labelled with the oracle's next turn from it (off the gold path: "
        f"`{p.off_path}`): {kinds}; {r.cut_at_max_tokens} cut at max_tokens. Only the "
        "label carries loss: the agent's own turns, its failed calls above all, stay in the "
        "context untrained.",
        f"- {r.onpolicy_records} on-policy conversations and {r.earlier_records} drawn from "
        f"the recipe's planted data ({p.earlier_share:.0%} of the whole; a seeded sample of "
        f"its {r.earlier_available} conversations): " + planted,
    ]
    data = stage.data
    if data is None:
        out.append(NO_DATASET)
    else:
        out.append(
            f"- Training data sha256 `{stage.digest}`: {len(data)} conversations, "
            f"{sum(len(d['ids']) for d in data)} tokens, {sum(sum(d['mask']) for d in data)} "
            "trained tokens."
        )
    if (stage.path / "rollouts").is_dir():
        out.append(
            "- The rollouts' run files: `rollouts/` in the stage's folder"
            + (
                " (their study: `rollouts-study.json`)."
                if (stage.path / "rollouts-study.json").is_file()
                else "."
            )
        )
    return out


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


def reproduce_section(stages: list[Stage], install: str = "") -> list[str]:
    """The commands that rebuild the adapter from an empty folder (`install`: the line
    that installs the base first, if it is not in the base install)."""
    out = ["", "## Reproduce from scratch", "", "```"]
    if install:
        out.append(install)
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
    if len(stages) == 1:
        pins = "."
    elif len(stages) == 2:
        pins = (
            "; the second stage refuses an `--init` adapter whose sha256 is not the one "
            "its recipe pins."
        )
    else:
        pins = (
            "; every stage after the first refuses an `--init` adapter whose sha256 is not "
            "the one its recipe pins."
        )
    out += [
        "```",
        "",
        "Each stage writes `config.json`, `dataset.json` (the data digest above), `loss.jsonl` "
        "and `adapter/`" + pins,
    ]
    if any(s.rollouts is not None for s in stages):
        out += [
            "",
            "An on-policy round also writes `rollouts/` (the rollouts' run files and their "
            "study) and `onpolicy.json` (what they gave). Its rollouts play the `--init` "
            "adapter (`--source DIR` for another one; its sha256 is pinned too) and are "
            "sampled: with a round's committed rollouts unpacked into `<out>/rollouts/runs` "
            "(`flatscore archive unpack`), their study as `<out>/rollouts/study.json` and the "
            "recipe as `<out>/config.json`, `--resume` builds the same data without playing "
            "an episode again.",
        ]
    return out
