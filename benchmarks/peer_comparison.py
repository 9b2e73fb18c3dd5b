"""flatscore's verdicts beside its peers', per study, domain and arm.

On study v1's archive (studies/embedded-study/runs: 114 tasks × 4 trials) and study v2's
(studies/embedded-study-v2/runs, trials 1–2: the 114 × 2 its page reads), each arm against
`ref` (docs/comparison.md):

- flatscore: `flatscore gate` (each arm alone against ref: margin 7.5 points, K = 9 and 2,
  channels) and the study's own analysis verdict (all arms at once, the committed
  analysis.json's settings, Holm across the study's comparisons);
- the peers, run by `benchmarks/peers/peer_verdicts.py` in a scratch environment that holds
  them (never flatscore's): evalsig 0.1.2's paired test, gate and sequential gate,
  lm-evaluation-harness's unpaired z-test, llm-compressor's 95 % recovery rule.

Success is τ²'s at its default budget (reward 1 within 10 errors: S(K = 9)), one score per
episode; infrastructure errors are left out, as flatscore leaves them out. The peers'
environment (without it the benchmark stops at once, saying how to make it):

    python -m venv /tmp/peers
    /tmp/peers/bin/pip install -r benchmarks/peers/requirements.txt
    /tmp/peers/bin/pip install --no-deps lm-eval==0.4.13
    python -m benchmarks peer-comparison --peers-python /tmp/peers/bin/python --json peers.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, Table
from flatscore.analysis.analyze import analyze
from flatscore.analysis.gate import GateOptions
from flatscore.episode import Episode
from flatscore.formats.pipeline import gate_labelled
from flatscore.report.analysis_text import worded
from flatscore.report.gate_text import worded_gate
from flatscore.report.rebuild import options_from_settings, settings_from_file
from flatscore.store import archive
from flatscore.store.jsonl import read_episodes

PEERS = ROOT / "benchmarks" / "peers"
"""The peers' side: `peer_verdicts.py` (run by the peers' python) and its requirements."""
REFERENCE = "ref"
SETUP = (
    "python -m venv /tmp/peers && /tmp/peers/bin/pip install -r "
    "benchmarks/peers/requirements.txt && /tmp/peers/bin/pip install --no-deps lm-eval==0.4.13"
)


@dataclass(frozen=True)
class Study:
    name: str
    docs: Path
    max_trial: int | None  # keep trials below this (None: all)


STUDIES = [
    Study("v1", ROOT / "studies" / "embedded-study", None),
    Study("v2", ROOT / "studies" / "embedded-study-v2", 2),
]


def load(study: Study, scratch: Path) -> dict[str, list[Episode]]:
    """The study's episodes per arm (its trials only), from its committed archive."""
    runs = scratch / study.name
    archive.unpack(study.docs / "runs", runs)
    arms: dict[str, list[Episode]] = {}
    for path in sorted(runs.glob("*.jsonl")):
        episodes = [
            ep
            for ep in read_episodes(path)
            if study.max_trial is None or ep.trial < study.max_trial
        ]
        arms[episodes[0].arm] = episodes
    return arms


def items(episodes: list[Episode], domain: str) -> list[list[Any]]:
    """[task, trial, success] per episode of the domain (no infrastructure errors)."""
    return [
        [ep.task_id, ep.trial, int(ep.succeeded)]
        for ep in episodes
        if ep.domain == domain and not ep.is_infrastructure_error
    ]


def flatscore_side(study: Study, arms: dict[str, list[Episode]]) -> dict[tuple[str, str], Any]:
    """Per (domain, arm): the gate's cell and the study analysis' comparison."""
    options = options_from_settings(settings_from_file(study.docs / "analysis.json"))
    result = worded(analyze([ep for eps in arms.values() for ep in eps], options))
    out: dict[tuple[str, str], Any] = defaultdict(dict)
    for cell in result.cells:
        for comp in cell.comparisons:
            out[(cell.domain, comp.arm)]["analysis"] = comp
    for arm, episodes in arms.items():
        if arm == REFERENCE:
            continue
        print(f"{study.name}: gating {arm}", file=sys.stderr)
        ref, cand = [(None, e) for e in arms[REFERENCE]], [(None, e) for e in episodes]
        verdict = worded_gate(gate_labelled(ref, cand, GateOptions()))
        for gate_cell in verdict.cells:
            out[(gate_cell.domain, arm)]["gate"] = gate_cell
    return out


def _pts(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f}"


def row(study: str, domain: str, arm: str, ours: dict[str, Any], peer: dict[str, Any]) -> list[str]:
    comp, cell = ours["analysis"], ours["gate"]
    z, rec = peer["lm_eval_z"], peer["llm_compressor"]
    es, eg, sq = peer["evalsig_compare"], peer["evalsig_gate"], peer["evalsig_sequential"]
    drop = -comp.gap_default.gap if comp.gap_default.gap is not None else None
    es_text = f"{_pts(es['delta'])} [{_pts(es['ci'][0])}, {_pts(es['ci'][1])}]" + (
        " **significant**" if es["significant"] else ""
    )
    if sq["stopped"]:
        seq_text = f"{'drop' if sq['delta'] < 0 else 'gain'} at {sq['n']}/{sq['of']}"
    else:
        seq_text = f"undecided ({sq['of']} pairs)"
    return [
        study,
        domain,
        arm,
        f"{100 * z['acc_ref']:.1f} → {100 * z['acc_cand']:.1f} ({_pts(drop)})",
        f"**{cell.verdict}**",
        comp.verdict or "n/a",
        es_text,
        f"{eg['verdict']} / {eg['two_sided']} (MDE {100 * eg['mde']:.1f})",
        seq_text,
        f"p = {z['p']:.3g}" + (" **differs**" if z["p"] < 0.05 else ""),
        f"{rec['recovery']:.2f} {'pass' if rec['passed'] else '**fail**'}",
    ]


HEADER = [
    "study",
    "domain",
    "arm",
    "success ref → arm (points)",
    "flatscore gate",
    "flatscore analysis",
    "evalsig paired Δ [95% CI]",
    "evalsig gate: one-sided (its Action) / two-sided",
    "evalsig sequential",
    "lm-eval z-test",
    "llm-compressor recovery",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--peers-python",
        metavar="PYTHON",
        help="python of the peers' scratch environment (evalsig, lm-eval's metrics)",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write every number here")


def check_peers(python: str | None) -> str:
    """The peers' python, or a clean stop saying how to make it (before any work)."""
    if python is None:
        raise SystemExit(
            f"peer-comparison needs the peers' environment: {SETUP}, then "
            "--peers-python /tmp/peers/bin/python"
        )
    try:
        found = subprocess.run(
            [python, "-c", "import evalsig, lm_eval.api.metrics"],
            capture_output=True,
            check=False,
        )
    except OSError as exc:
        raise SystemExit(
            f"--peers-python {python}: {exc.strerror}; make it with: {SETUP}"
        ) from None
    if found.returncode != 0:
        raise SystemExit(
            f"--peers-python {python} lacks the peers (evalsig, lm-eval); install them: {SETUP}"
        )
    return python


def run(args: argparse.Namespace) -> list[Table]:
    python = check_peers(args.peers_python)
    comparisons: list[dict[str, Any]] = []
    ours: dict[tuple[str, str, str], Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for study in STUDIES:
            arms = load(study, Path(scratch))
            side = flatscore_side(study, arms)
            for (domain, arm), found in side.items():
                ours[(study.name, domain, arm)] = found
                comparisons.append(
                    {
                        "key": [study.name, domain, arm],
                        "reference": items(arms[REFERENCE], domain),
                        "candidate": items(arms[arm], domain),
                    }
                )
    done = subprocess.run(
        [python, str(PEERS / "peer_verdicts.py")],
        input=json.dumps({"comparisons": comparisons}),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"peer_verdicts.py failed: {done.stderr[-2000:]}")
    peers = json.loads(done.stdout)
    by_key = {tuple(r["key"]): r for r in peers["results"]}
    arm_order = list(dict.fromkeys(a for _, _, a in ours))
    order = sorted(ours, key=lambda k: (k[0], k[1], arm_order.index(k[2])))
    rows = [row(*key, ours[key], by_key[key]) for key in order]
    if args.json is not None:
        dump = [
            {
                "study": s,
                "domain": d,
                "arm": a,
                "flatscore_gate": ours[(s, d, a)]["gate"].model_dump(mode="json"),
                "flatscore_analysis": {
                    "verdict": ours[(s, d, a)]["analysis"].verdict,
                    "reason": ours[(s, d, a)]["analysis"].verdict_reason,
                },
                **{k: v for k, v in by_key[(s, d, a)].items() if k != "key"},
            }
            for s, d, a in order
        ]
        args.json.write_text(json.dumps(dump, indent=2) + "\n", encoding="utf-8")
    return [Table(HEADER, rows, notes=[f"(peers: {peers['versions']})"])]
