"""The card's training sections in words, one per training stage (the stages as data:
`flatscore.train.card_stages`): what each stage trained on (planted data, or an on-policy
round's states), how it trained, and the commands that rebuild the chain from scratch."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from flatscore.report.markdown_table import table_lines
from flatscore.train.card_stages import Stage, data_size, loss_table, same_planted_data
from flatscore.train.composition import DomainComposition, composition
from flatscore.train.recipe import TrainConfig


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
        f"- {c.detour_share:.0%} {DETOUR}: {data_size(data).detours} conversations in all. "
        "Not a mistake: the agent cannot know which one the user remembers.",
        LOSS_LINE,
        _size_line(stage, data) + " Repeats are counted from the records' tokens (failing "
        "turns carry no loss):",
        "",
        *composition_tables(parts, c.mistakes_most),
    ]


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
    out.append(NO_DATASET if stage.data is None else _size_line(stage, stage.data))
    if stage.keeps_rollouts:
        out.append(
            "- The rollouts' run files: `rollouts/` in the stage's folder"
            + (" (their study: `rollouts-study.json`)." if stage.keeps_rollouts_study else ".")
        )
    return out


def _size_line(stage: Stage, data: Sequence[dict[str, Any]]) -> str:
    size = data_size(data)
    return (
        f"- Training data sha256 `{stage.digest}`: {size.conversations} conversations, "
        f"{size.tokens} tokens, {size.trained} trained tokens."
    )


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
