"""Report size and render time against study size (run on demand, not in the test suite).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_report.py [tasks ...]

Episodes come from the report tests' fixture study (2 domains × 2 arms × tasks × 4 trials,
~14 messages each). Prints, per size: episodes, analysis time, report time, report.html
size and bytes per episode. The transcript data grows linearly with the episodes; the plots
and tables are a fixed cost per cell.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "report"))

from report_episodes import study

from flatscore.analysis.analyze import AnalysisOptions, analyze
from flatscore.report import write_report


def main(sizes: list[int]) -> None:
    print("tasks  episodes  analyze_s  report_s  html_MB  bytes/episode")
    for tasks in sizes:
        episodes = study(tasks=tasks, trials=4)
        t0 = time.perf_counter()
        result = analyze(episodes, AnalysisOptions(bootstrap=1000))
        t1 = time.perf_counter()
        with tempfile.TemporaryDirectory() as out:
            paths = write_report(result, episodes, out)
            t2 = time.perf_counter()
            size = paths.html.stat().st_size
        print(
            f"{tasks:5d}  {len(episodes):8d}  {t1 - t0:9.2f}  {t2 - t1:8.2f}  "
            f"{size / 1e6:7.2f}  {size / len(episodes):13.0f}"
        )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [10, 50, 200])
