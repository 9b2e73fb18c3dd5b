"""Resident memory of loading the demo's arms.

Before and after giving freed heap back. Loads each arm as the demo does
(`LocalBackend.from_spec`, fp32) and prints the process's resident memory after it, with the
arm's parameter bytes; the loader itself trims (`release_freed_memory`) unless `--no-trim`,
which shows what loading leaves behind. A final trim shows what was still held.
"""

from __future__ import annotations

import argparse

import psutil

from benchmarks.harness import Table
from flatscore.run.demo import DEMO_ARMS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arms", default=",".join(DEMO_ARMS))
    parser.add_argument("--no-trim", action="store_true", help="the loader does not trim")


def run(args: argparse.Namespace) -> list[Table]:
    from flatscore.models import local
    from flatscore.models.batching import release_freed_memory

    if args.no_trim:
        local.release_freed_memory = lambda: False
    process = psutil.Process()
    mib = 2**20
    rows: list[list[object]] = [["imports", f"{process.memory_info().rss / mib:,.0f}", "-"]]
    weights = 0
    kept = []
    for arm in args.arms.split(","):
        backend = local.LocalBackend.from_spec("embedded", arm)
        kept.append(backend)
        weights += sum(p.numel() * p.element_size() for p in backend.model.parameters())
        rows.append(
            [f"{arm} loaded", f"{process.memory_info().rss / mib:,.0f}", f"{weights / mib:,.0f}"]
        )
        print(*rows[-1], flush=True)
    release_freed_memory()
    rows.append(["after malloc_trim(0)", f"{process.memory_info().rss / mib:,.0f}", "-"])
    trim = "the loader does not trim" if args.no_trim else "the loader trims after each arm"
    header = ["after", "RSS MiB", "parameters so far, MiB"]
    return [Table(header, rows, "lr", title=f"fp32, {trim}")]
