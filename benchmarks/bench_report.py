"""Report size and render time against study size (run on demand, not in the test suite).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_report.py [trials ...]

Episodes come from a real run without a model (examples/smoke.yaml's agents): the oracle as
the reference arm and the oracle with slips (invented names, role confusion, bad arguments,
unknown ids) as the damaged one, on retail and telecom, 10 test tasks each, `trials` trials
(2 domains × 2 arms × 10 tasks × trials episodes). Prints, per size: episodes, analysis time,
report time, report.html size and bytes per episode. The transcript data grows linearly
with the episodes; the plots and tables are a fixed cost per cell.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

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


def main(sizes: list[int]) -> None:
    print("trials  episodes  analyze_s  report_s  html_MB  bytes/episode")
    for trials in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            episodes = run_episodes(trials, Path(tmp) / "study")
            t0 = time.perf_counter()
            result = analyze(episodes, AnalysisOptions(bootstrap=1000))
            t1 = time.perf_counter()
            paths = write_report(result, episodes, Path(tmp) / "report")
            t2 = time.perf_counter()
            size = paths.html.stat().st_size
        print(
            f"{trials:6d}  {len(episodes):8d}  {t1 - t0:9.2f}  {t2 - t1:8.2f}  "
            f"{size / 1e6:7.2f}  {size / len(episodes):13.0f}"
        )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [4, 20, 80])
