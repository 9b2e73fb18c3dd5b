"""`flatscore report` against `flatscore analyze` on the same runs, in one process (run on
demand, not in the test suite):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/report_vs_analyze.py [RUN_FOLDER] [--profile]

Default RUN_FOLDER: study v2's runs (`flatscore archive unpack docs/embedded-study-v2/runs
examples/out/embedded-study-v2/runs` first), with the settings of its documented report
(--balanced, 5,000 resamples). Times what each command does after parsing its flags:
reading the episodes, the analysis, then `analyze`'s terminal tables or `report`'s four
files; prints both and their ratio (the target: report ≤ 2 × analyze), and with --profile the
report writer's ten most expensive functions (cumulative).
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from flatscore.analysis.analyze import analyze
from flatscore.analysis.balanced import balanced
from flatscore.analysis.settings import AnalysisSettings
from flatscore.formats import load_runs
from flatscore.report import write_report
from flatscore.report.rebuild import expand_inputs
from flatscore.report.terminal import render

DEFAULT = Path("examples/out/embedded-study-v2/runs")


def main(folder: Path, profile: bool) -> None:
    options = AnalysisSettings(reference="ref", balanced=True, bootstrap=5000, seed=0)
    t0 = time.perf_counter()
    episodes = list(load_runs(expand_inputs([folder])))
    t_read = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = analyze(episodes, options)
    t_analysis = time.perf_counter() - t0
    t0 = time.perf_counter()
    render(result, Console(file=io.StringIO(), width=200))
    t_terminal = time.perf_counter() - t0
    profiler = cProfile.Profile() if profile else None
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        if profiler:
            profiler.enable()
        write_report(result, balanced(episodes), Path(out), title="bench")
        if profiler:
            profiler.disable()
        t_write = time.perf_counter() - t0
    analyze_s = t_read + t_analysis + t_terminal
    report_s = t_read + t_analysis + t_write
    print(f"{len(episodes)} episodes: read {t_read:.1f} s, analysis {t_analysis:.1f} s")
    print(f"analyze: {analyze_s:.1f} s (terminal tables {t_terminal:.2f} s)")
    print(f"report:  {report_s:.1f} s (report files {t_write:.1f} s)")
    print(f"report / analyze = {report_s / analyze_s:.2f}")
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(12)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--profile"]
    main(Path(args[0]) if args else DEFAULT, "--profile" in sys.argv)
