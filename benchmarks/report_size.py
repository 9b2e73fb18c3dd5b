"""Report size and render time against study size.

Episodes come from a real run without a model (examples/smoke.yaml's agents): the oracle as
the reference arm and the oracle with slips (invented names, role confusion, bad arguments,
unknown ids) as the damaged one, on retail and telecom, 10 test tasks each, `trials` trials
(2 domains × 2 arms × 10 tasks × trials episodes). Prints, per size: episodes, analysis time,
report time, report.html size and bytes per episode. The transcript data grows linearly
with the episodes; the plots and tables are a fixed cost per cell.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks.harness import Table
from flatscore.analysis.analyze import AnalysisOptions, analyze
from flatscore.episode import Episode
from flatscore.report import write_report
from flatscore.run.driver import run_study
from flatscore.run.study import parse_study
from flatscore.store.jsonl import read_episodes


def run_episodes(trials: int, out: Path) -> list[Episode]:
    study = parse_study(
        {
            "name": "bench-report",
            "output": str(out),
            "models": [
                {
                    "name": "oracle",
                    "kind": "agent",
                    "agent": "oracle",
                    "arms": {"ref": {}, "slips": {"options": {"slip_rate": 0.5}}},
                }
            ],
            "domains": ["retail", "telecom"],
            "split": "test",
            "tasks_per_domain": 10,
            "trials": trials,
            "seed": 300,
            "user": {"kind": "scripted"},
            "concurrency": 4,
        }
    )
    outcome = run_study(study, progress=False, report=False)
    return [ep for f in sorted(outcome.output.glob("runs/*.jsonl")) for ep in read_episodes(f)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "trials", type=int, nargs="*", default=[4, 20, 80], help="trials per size (4 20 80)"
    )


def run(args: argparse.Namespace) -> list[Table]:
    rows: list[list[object]] = []
    for trials in args.trials:
        with tempfile.TemporaryDirectory() as tmp:
            episodes = run_episodes(trials, Path(tmp) / "study")
            t0 = time.perf_counter()
            result = analyze(episodes, AnalysisOptions(bootstrap=1000))
            t1 = time.perf_counter()
            paths = write_report(result, episodes, Path(tmp) / "report")
            t2 = time.perf_counter()
            size = paths.html.stat().st_size
        rows.append(
            [
                trials,
                len(episodes),
                f"{t1 - t0:.2f}",
                f"{t2 - t1:.2f}",
                f"{size / 1e6:.2f}",
                f"{size / len(episodes):,.0f}",
            ]
        )
        print(" ".join(str(c) for c in rows[-1]), flush=True)
    header = ["trials", "episodes", "analyze s", "report s", "report.html MB", "bytes/episode"]
    return [Table(header, rows, "r")]
