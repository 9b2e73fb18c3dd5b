"""The peers' verdicts on paired success data: run in a scratch environment that holds the
peers, never flatscore (`python -m benchmarks peer-comparison` calls it; docs/comparison.md).

    python -m venv /tmp/peers
    /tmp/peers/bin/pip install -r benchmarks/peers/requirements.txt
    /tmp/peers/bin/pip install --no-deps lm-eval==0.4.13   # its metrics only; no torch

Reads JSON on stdin: {"comparisons": [{"key": ..., "reference": [[task, trial, success],
...], "candidate": [...]}]}; writes one JSON object per comparison, keyed alike, on stdout.

- evalsig 0.1.2 (PyPI): `compare` (paired on item = task#trial, clustered by task: its
  cluster bootstrap, two-sided, alpha 0.05, 10,000 resamples, seed 0), `gate` with its GitHub
  Action's defaults (`min_delta` 0.005, one-sided "candidate better", alpha 0.05, power
  0.8; clustered by task as `compare`; and, as its CLI's `--two-sided`, two-sided), and
  `sequential_gate` (Howard et al.'s asymptotic
  confidence sequence, two-sided, min_n 30) on the paired differences in the order a study
  runs them (trial by trial, task by task).
- lm-evaluation-harness as it is today: `scripts/model_comparator.py`'s `calculate_z_value`
  (Z = (acc1 − acc2) / sqrt(se1² + se2²), p = 2·sf(|Z|), each model's episodes on their
  own: unpaired), with each accuracy's standard error from lm-eval's own
  `lm_eval.api.metrics.mean_stderr` (sample SD / sqrt(n)). The comparator lives in the
  repository's scripts/, not in the wheel, so its two lines are restated here.
- llm-compressor's recovery rule (`tests/lmeval/test_lmeval.py`, `_validate_recovery`):
  recovery = round(candidate / base, 2), passing at ≥ 0.95.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import sys
from typing import Any

import evalsig
import numpy as np
import scipy.stats
from evalsig import ItemResult, RunFrame

try:  # lm-eval's own standard error (its metrics module needs sacrebleu, not torch)
    from lm_eval.api.metrics import mean_stderr

    LM_EVAL = "lm_eval.api.metrics.mean_stderr"
except ImportError:  # pragma: no cover - the same formula

    def mean_stderr(arr: list[float]) -> float:
        mu = sum(arr) / len(arr)
        return math.sqrt(sum((x - mu) ** 2 for x in arr) / (len(arr) - 1)) / math.sqrt(len(arr))

    LM_EVAL = "restated (lm-eval not importable)"

RECOVERY_THRESHOLD = 0.95
EVALSIG_ACTION_MIN_DELTA = 0.005


def frame(rows: list[list[Any]], name: str) -> RunFrame:
    items = [
        ItemResult(item_id=f"{task}#{trial}", score=float(s), cluster_id=str(task))
        for task, trial, s in rows
    ]
    return RunFrame(run_id=name, model_id=name, task_id="agent", metric_name="success", items=items)


def z_test(ref: list[float], cand: list[float]) -> dict[str, float]:
    """lm-eval's `calculate_z_value(res1, res2)` with res1 the reference."""
    acc1, acc2 = float(np.mean(ref)), float(np.mean(cand))
    se1, se2 = float(mean_stderr(ref)), float(mean_stderr(cand))
    z = (acc1 - acc2) / np.sqrt(se1**2 + se2**2) if se1 or se2 else 0.0
    p = float(2 * scipy.stats.norm.sf(abs(z)))
    return {"acc_ref": acc1, "acc_cand": acc2, "z": float(z), "p": p}


def verdicts(c: dict[str, Any]) -> dict[str, Any]:
    a, b = frame(c["reference"], "reference"), frame(c["candidate"], "candidate")
    comp = evalsig.compare(a, b, cluster="task", alpha=0.05, n_resamples=10_000, rng=0)
    report = evalsig.gate(
        a, b, min_delta=EVALSIG_ACTION_MIN_DELTA, cluster="task", n_resamples=10_000, rng=0
    )
    two_sided = evalsig.gate(  # its CLI's --two-sided: a significant drop can reject
        a,
        b,
        min_delta=EVALSIG_ACTION_MIN_DELTA,
        cluster="task",
        one_sided=False,
        n_resamples=10_000,
        rng=0,
    )
    ref = {(t, k): s for t, k, s in c["reference"]}
    paired = sorted(((k, t), s - ref[(t, k)]) for t, k, s in c["candidate"] if (t, k) in ref)
    seq = evalsig.sequential_gate((d for _, d in paired), alternative="two-sided", min_n=30)
    ref_scores = [float(s) for _, _, s in c["reference"]]
    cand_scores = [float(s) for _, _, s in c["candidate"]]
    z = z_test(ref_scores, cand_scores)
    recovery = round(z["acc_cand"] / z["acc_ref"], 2) if z["acc_ref"] else None
    return {
        "key": c["key"],
        "evalsig_compare": {
            "delta": comp.delta,
            "ci": list(comp.ci),
            "p": comp.p_value,
            "significant": comp.significant,
            "method": comp.method,
            "pairs": comp.n_pairs,
            "clusters": comp.n_clusters,
        },
        "evalsig_gate": {
            "verdict": report.verdict.value,
            "exit_code": report.exit_code,
            "mde": report.comparison.mde,
            "suggestion": report.suggestion,
            "two_sided": two_sided.verdict.value,
        },
        "evalsig_sequential": {
            "stopped": seq.stopped,
            "n": seq.n_pairs,
            "of": len(paired),
            "delta": seq.delta,
            "ci": list(seq.ci),
        },
        "lm_eval_z": {**z, "stderr": LM_EVAL},
        "llm_compressor": {
            "recovery": recovery,
            "passed": recovery is not None and recovery >= RECOVERY_THRESHOLD,
        },
    }


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def main() -> None:
    data = json.load(sys.stdin)
    out = {
        "versions": {  # evalsig 0.1.2's own __version__ still says 0.1.0: ask the installer
            "evalsig": importlib.metadata.version("evalsig"),
            "lm_eval": _version("lm_eval"),
            "lm_eval_stderr": LM_EVAL,
        },
        "results": [verdicts(c) for c in data["comparisons"]],
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
