"""Does the allocator give the engine's freed KV back? A probe of the demo's KV churn
without a model (docs/benchmarks.md, "flatscore demo: memory").

    .venv/bin/python benchmarks/kv_allocator.py            # every variant, one subprocess each
    .venv/bin/python benchmarks/kv_allocator.py --one      # this process's settings only

Four threads (the demo's four arms), each running what its batch engine does to memory:
sequences of SmolLM2-135M's KV shape (30 layers, 3 KV heads × 64, fp32) reading a shared
485-position system turn in place (`SeqKV.on`, so every step joins it to the sequence's own
positions per layer: the `torch.cat` transients), allocated exactly to their final length
(`SeqKV.want`), admitted while the arm's KV budget (the demo's 320 MiB) allows, finished
into a `KVStore` that gives way to the sequences in flight. Lengths are drawn from a fixed
seed, so every variant churns the same buffers. Each variant runs in its own process
(allocator settings are read at start) and reports the peak RSS above the process's start,
the live KV's peak and the CPU seconds. Variants: glibc's defaults, `MALLOC_ARENA_MAX=2`,
a fixed `M_MMAP_THRESHOLD` (1 MiB: large KV buffers are mmapped and unmapped when freed),
and `malloc_trim(0)` every `--trim-s` seconds in each thread (`flatscore.models.batching`).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import threading
import time

import psutil
import torch

from flatscore.models.batching import KVStore, SeqKV, release_freed_memory

LAYERS, HEADS, DIM = 30, 3, 64
POSITION = LAYERS * 2 * HEADS * DIM * 4  # bytes
SHARED = 485  # telecom's system turn, positions
BUDGET = (320 * 2**20) // POSITION  # the demo's DEMO_KV_MEMORY_MB per arm
CHUNK = 64  # positions written per step (fewer steps than one-token decoding; same buffers)

VARIANTS: dict[str, dict[str, str]] = {
    "glibc defaults": {},
    "MALLOC_ARENA_MAX=2": {"MALLOC_ARENA_MAX": "2"},
    "M_MMAP_THRESHOLD 1 MiB": {"MALLOC_MMAP_THRESHOLD_": str(2**20)},
    "malloc_trim every 2 s": {"PROBE_TRIM_S": "2"},
}


def write(kv: SeqKV, n: int) -> None:
    """One step's write of n positions to every layer (the joined views are dropped, as
    attention drops them)."""
    k = torch.randn(1, HEADS, n, DIM)
    for layer in range(LAYERS):
        kv.write(layer, k, k)
    kv.advance(n)


def engine(seed: int, sequences: int, trim_s: float, live: list[int]) -> None:
    """One arm's KV churn: `sequences` sequences through a budgeted engine of 16 slots."""
    rng = random.Random(seed)
    base = SeqKV(LAYERS)
    base.want = SHARED
    write(base, SHARED)
    store = KVStore(LAYERS, BUDGET)
    store.put(list(range(SHARED)), base, shared=True)
    todo = [rng.randint(200, 2_500) for _ in range(sequences)]
    active: list[tuple[SeqKV, int]] = []
    last_trim = time.monotonic()
    n = 0
    while todo or active:
        reserved = sum(target for _, target in active)
        while todo and len(active) < 16 and (not active or reserved + todo[0] <= BUDGET):
            target = todo.pop(0)
            kv = SeqKV.on(base)
            kv.want = SHARED + target
            active.append((kv, target))
            reserved += target
        store.fit(max(0, BUDGET - reserved))
        for kv, _ in active:
            write(kv, CHUNK)
        live[seed] = sum(kv.capacity for kv, _ in active) + store.tokens
        still = []
        for kv, target in active:
            if kv.length - SHARED + CHUNK > target:
                n += 1
                store.put([seed, n, *range(kv.length - 2)], kv)
            else:
                still.append((kv, target))
        active = still
        if trim_s and time.monotonic() - last_trim >= trim_s:
            release_freed_memory()
            last_trim = time.monotonic()


def one(sequences: int) -> None:
    """Run the four engines in this process; print one line of results."""
    torch.set_num_threads(1)
    process = psutil.Process()
    start = process.memory_info().rss
    live = [0] * 4
    peak = {"rss": 0, "live": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak["rss"] = max(peak["rss"], process.memory_info().rss - start)
            peak["live"] = max(peak["live"], sum(live) * POSITION)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    trim_s = float(os.environ.get("PROBE_TRIM_S", "0"))
    before = resource.getrusage(resource.RUSAGE_SELF)
    threads = [threading.Thread(target=engine, args=(i, sequences, trim_s, live)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = resource.getrusage(resource.RUSAGE_SELF)
    done.set()
    sampler.join()
    held = process.memory_info().rss - start
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    mib = 2**20
    print(
        f"peak RSS +{peak['rss'] / mib:,.0f} MiB · live KV peak {peak['live'] / mib:,.0f} MiB"
        f" · held at the end +{held / mib:,.0f} MiB · {cpu:.1f} CPU-s"
        f" ({after.ru_minflt - before.ru_minflt:,} minor faults)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--one", action="store_true", help="this process's settings only")
    parser.add_argument("--sequences", type=int, default=24, help="per engine (arm)")
    args = parser.parse_args()
    if args.one:
        one(args.sequences)
        return
    for name, env in VARIANTS.items():
        print(f"{name:<24} ", end="", flush=True)
        subprocess.run(
            [sys.executable, __file__, "--one", "--sequences", str(args.sequences)],
            env={**os.environ, **env},
            check=True,
        )


if __name__ == "__main__":
    main()
