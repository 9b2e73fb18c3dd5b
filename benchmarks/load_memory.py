"""Resident memory of loading the demo's arms, before and after giving freed heap back
(docs/benchmarks.md, "flatscore demo: memory").

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/load_memory.py [--arms ref,int8,int4,int4-awq]

Loads each arm as the demo does (`LocalBackend.from_spec`, fp32) and prints the process's
resident memory after it, with the arm's parameter bytes; the loader itself trims
(`release_freed_memory`) unless `--no-trim`, which shows what loading leaves behind. A
final trim shows what was still held.
"""

from __future__ import annotations

import argparse

import psutil

from flatscore.run.demo import DEMO_ARMS


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--arms", default=",".join(DEMO_ARMS))
    parser.add_argument("--no-trim", action="store_true", help="the loader does not trim")
    args = parser.parse_args()
    from flatscore.models import local
    from flatscore.models.batching import release_freed_memory

    if args.no_trim:
        local.release_freed_memory = lambda: False  # type: ignore[assignment]
    process = psutil.Process()
    mib = 2**20
    print(f"start: RSS {process.memory_info().rss / mib:,.0f} MiB")
    weights = 0
    kept = []
    for arm in args.arms.split(","):
        backend = local.LocalBackend.from_spec("embedded", arm)
        kept.append(backend)
        weights += sum(p.numel() * p.element_size() for p in backend.model.parameters())
        print(
            f"{arm:<9} loaded: RSS {process.memory_info().rss / mib:,.0f} MiB"
            f" (parameters so far {weights / mib:,.0f} MiB)",
            flush=True,
        )
    release_freed_memory()
    print(f"after malloc_trim(0): RSS {process.memory_info().rss / mib:,.0f} MiB")


if __name__ == "__main__":
    main()
