"""Time `flatscore demo` and break the time down per arm and domain.

Runs the real command in a subprocess (a fresh output folder; options this benchmark does
not know are handed to the demo), then reads the run files: wall time, episodes, mean
episode seconds, decoded tokens and successes per (arm, domain). `--summarize DIR` only
summarises an existing demo folder.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from benchmarks.harness import Table
from flatscore.episode import Episode
from flatscore.store.jsonl import read_episodes

PASS_UNKNOWN = True  # the demo's own options go to `flatscore demo`


def summarize(folder: Path, title: str = "") -> Table:
    episodes = [e for p in sorted((folder / "runs").glob("*.jsonl")) for e in read_episodes(p)]
    cells: dict[tuple[str, str], list[Episode]] = defaultdict(list)
    for e in episodes:
        cells[(e.arm, e.domain)].append(e)
    rows: list[list[object]] = []
    for (arm, domain), eps in sorted(cells.items()):
        mean = statistics.mean(e.timing.duration_s or 0.0 for e in eps)
        tokens = sum(e.usage.completion_tokens for e in eps)
        ok = sum(e.succeeded for e in eps)
        rows.append([arm, domain, len(eps), f"{mean:.1f}", f"{tokens:,}", ok])
    starts = sorted(e.timing.started_at or "" for e in episodes)
    ends = sorted(e.timing.ended_at or "" for e in episodes)
    note = f"{len(episodes)} episodes, first start {starts[0]}, last end {ends[-1]}."
    header = ["arm", "domain", "episodes", "mean episode s", "decoded tokens", "successes"]
    return Table(header, rows, "llr", title=title, notes=[note])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("/tmp/demo-timing"))
    parser.add_argument("--summarize", type=Path, metavar="DIR", help="only summarise DIR")


def run(args: argparse.Namespace) -> list[Table]:
    if args.summarize:
        return [summarize(args.summarize)]
    shutil.rmtree(args.out, ignore_errors=True)
    started = time.perf_counter()
    cmd = [sys.executable, "-c", "from flatscore.cli import main; main()", "demo"]
    subprocess.run([*cmd, "--out", str(args.out), "--no-progress", *args.extra], check=True)
    title = f"`flatscore demo`: {time.perf_counter() - started:.0f} s wall"
    return [summarize(args.out, title)]
