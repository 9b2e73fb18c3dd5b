"""Time `flatscore demo` and break the time down per arm and domain (docs/benchmarks.md).

    .venv/bin/python benchmarks/demo_timing.py [--out /tmp/demo-timing] [demo options...]

Runs the real command in a subprocess (fresh output folder), then reads the run files:
wall time, episodes, mean episode seconds and decoded tokens per (arm, domain), successes.
Pass `--summarize DIR` to only summarise an existing demo folder.
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

from flatscore.store.jsonl import read_episodes


def summarize(folder: Path) -> None:
    episodes = [e for p in sorted((folder / "runs").glob("*.jsonl")) for e in read_episodes(p)]
    cells: dict[tuple[str, str], list] = defaultdict(list)  # type: ignore[type-arg]
    for e in episodes:
        cells[(e.arm, e.domain)].append(e)
    print(f"{'arm':<10} {'domain':<8} {'n':>3} {'mean s':>7} {'tokens out':>10} {'ok':>3}")
    for (arm, domain), eps in sorted(cells.items()):
        mean = statistics.mean(e.timing.duration_s or 0.0 for e in eps)
        tokens = sum(e.usage.completion_tokens for e in eps)
        ok = sum(e.succeeded for e in eps)
        print(f"{arm:<10} {domain:<8} {len(eps):>3} {mean:>7.1f} {tokens:>10} {ok:>3}")
    starts = sorted(e.timing.started_at or "" for e in episodes)
    ends = sorted(e.timing.ended_at or "" for e in episodes)
    print(f"{len(episodes)} episodes, first start {starts[0]}, last end {ends[-1]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("/tmp/demo-timing"))
    parser.add_argument("--summarize", type=Path)
    args, demo_args = parser.parse_known_args()
    if args.summarize:
        summarize(args.summarize)
        return
    shutil.rmtree(args.out, ignore_errors=True)
    started = time.perf_counter()
    cmd = [sys.executable, "-c", "from flatscore.cli import main; main()", "demo"]
    subprocess.run([*cmd, "--out", str(args.out), "--no-progress", *demo_args], check=True)
    print(f"flatscore demo: {time.perf_counter() - started:.0f} s wall")
    summarize(args.out)


if __name__ == "__main__":
    main()
