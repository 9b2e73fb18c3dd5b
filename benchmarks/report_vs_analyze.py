"""`flatscore report` against `flatscore analyze` on the same runs, in one process.

Default RUNS: study v2's runs, unpacked from its archive into a temporary folder, with the
settings of its documented report (`--trial-range 1-2 --reference ref --budgets 0-9 --bootstrap
5000 --seed 0`). Times what each command does after parsing its flags: reading the episodes
and the analysis (shared), then `analyze`'s terminal tables or `report`'s four files
(report.html, summary.md, analysis.json, tables.md). The two writers run in alternating
rounds, so a change of load hits both; the table gives each round's times and the ratio
report / analyze (the target: ≤ 2). With --profile, the report writer's most expensive
functions (cumulative) of the last round.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import tempfile
from pathlib import Path

from rich.console import Console

from benchmarks.harness import ROOT, Table, alternate, timed
from flatscore.analysis.analyze import analyze
from flatscore.analysis.settings import AnalysisSettings
from flatscore.analysis.trials import pick_trials
from flatscore.formats import load_runs
from flatscore.formats.pipeline import expand_inputs
from flatscore.report import write_report
from flatscore.report.rebuild import default_title
from flatscore.report.terminal import render
from flatscore.store import archive

STUDY_V2 = ROOT / "studies" / "embedded-study-v2"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs",
        type=Path,
        nargs="?",
        help="a run folder (default: study v2's archive, unpacked, trials 1-2)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (3)")
    parser.add_argument("--profile", action="store_true", help="profile the report writer")


def run(args: argparse.Namespace) -> list[Table]:
    options = AnalysisSettings(
        reference="ref", budgets=list(range(10)), trials=[1, 2], bootstrap=5000, seed=0
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.runs
        if folder is None:
            folder = Path(tmp) / "runs"
            archive.unpack(STUDY_V2 / "runs", folder)
        t_read, episodes = timed(lambda: list(load_runs(expand_inputs([folder]))))
        t_analysis, result = timed(lambda: analyze(episodes, options))
        print(f"{len(episodes)} episodes: read {t_read:.1f} s, analysis {t_analysis:.1f} s")
        profiler = cProfile.Profile() if args.profile else None
        shown = pick_trials(episodes, options.trials)  # the report's: the episodes analysed
        title = default_title(shown)

        def terminal() -> float:
            return timed(lambda: render(result, Console(file=io.StringIO(), width=200)))[0]

        def report() -> float:
            out = Path(tempfile.mkdtemp(dir=tmp))
            if profiler:
                profiler.enable()
            seconds = timed(lambda: write_report(result, shown, out, title=title))[0]
            if profiler:
                profiler.disable()
            return seconds

        times = alternate({"analyze": terminal, "report": report}, args.rounds)
    shared = t_read + t_analysis
    rows: list[list[object]] = []
    for r, (a, w) in enumerate(zip(times["analyze"], times["report"], strict=True), 1):
        rows.append(
            [r, f"{shared:.1f}", f"{a:.2f}", f"{w:.1f}", f"{(shared + w) / (shared + a):.2f}"]
        )
    median = (shared + statistics.median(times["report"])) / (
        shared + statistics.median(times["analyze"])
    )
    print(f"report / analyze = {median:.2f} (median round)")
    if profiler:
        stream = io.StringIO()
        pstats.Stats(profiler, stream=stream).sort_stats("cumulative").print_stats(15)
        print(stream.getvalue())
    header = [
        "round",
        "read + analysis s",
        "analyze: tables s",
        "report: files s",
        "report / analyze",
    ]
    notes = [
        f"{len(episodes)} episodes. report / analyze over the median round: {median:.2f}× "
        "(the reading and the analysis are the same work in both commands)."
    ]
    return [Table(header, rows, "r", notes=notes)]
