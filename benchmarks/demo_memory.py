"""Where the demo's memory goes.

Runs the demo study in this process (a fresh output folder) while a sampler thread reads,
every half second, the process's resident memory and each loaded arm's KV positions: held
by the sequences in flight (allocated capacity and used length), by the prefix store, and
how many requests wait for a slot. Its table: the peaks and the weight bytes per arm, so
the resident peak can be set against its parts; and episodes per CPU-minute (on a shared
host compare CPU, not wall time).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from benchmarks.harness import Table
from flatscore.run.demo import DEMO_ARMS, demo_study
from flatscore.run.driver import run_study


def kv_bytes_per_position(model: Any) -> int:
    config = model.config
    heads = int(getattr(config, "num_key_value_heads", config.num_attention_heads))
    dim = int(getattr(config, "head_dim", config.hidden_size // config.num_attention_heads))
    return int(config.num_hidden_layers) * 2 * heads * dim * 4


def backends() -> dict[str, Any]:
    from flatscore.models.local import LocalBackend
    from flatscore.models.shared import BACKENDS

    return {b.arm: b for b in BACKENDS.made() if isinstance(b, LocalBackend)}


class Sampler(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.peak_rss = 0
        self.peaks: dict[str, dict[str, int]] = {}
        self.at_peak: dict[str, Any] = {}
        self.trace: list[tuple[float, int, int, int]] = []  # s, RSS, KV in flight, store
        self.started = time.perf_counter()

    def run(self) -> None:
        process = psutil.Process()
        while not self.stop.wait(0.5):
            rss = process.memory_info().rss
            snapshot: dict[str, dict[str, int]] = {}
            for arm, backend in backends().items():
                engine = backend.engine
                active = [r.kv for r in list(engine._active) if r.kv is not None]
                row = {
                    "active_capacity": sum(kv.capacity for kv in active),
                    "active_length": sum(kv.length for kv in active),
                    "active": len(active),
                    "store": engine.store.tokens,
                    "store_entries": len(engine.store),
                    "waiting": len(engine._waiting),
                }
                snapshot[arm] = row
                peak = self.peaks.setdefault(arm, dict.fromkeys(row, 0))
                for key, value in row.items():
                    peak[key] = max(peak[key], value)
            self.trace.append(
                (
                    time.perf_counter() - self.started,
                    rss,
                    sum(r["active_capacity"] for r in snapshot.values()),
                    sum(r["store"] for r in snapshot.values()),
                )
            )
            if rss > self.peak_rss:
                self.peak_rss, self.at_peak = rss, snapshot


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("/tmp/demo-memory"))
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--arms", default=",".join(DEMO_ARMS))
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--compute", default="fp32")
    parser.add_argument("--kv-memory-mb", type=float, help="per arm (default: the demo's)")
    parser.add_argument("--trace", type=Path, help="CSV of the samples: RSS over time")
    parser.add_argument(
        "--trim-every-s",
        type=float,
        help="engines trim freed heap at most this often while running (0: only when idle)",
    )


def run(args: argparse.Namespace) -> list[Table]:
    shutil.rmtree(args.out, ignore_errors=True)
    if args.trim_every_s is not None:
        from flatscore.models import batching

        batching.TRIM_EVERY_S = args.trim_every_s or None  # type: ignore[assignment]
    study = demo_study(
        args.out,
        tasks_per_domain=args.tasks,
        arms=tuple(args.arms.split(",")),
        concurrency=args.concurrency,
        compute=args.compute,
    )
    if args.kv_memory_mb is not None:
        study.models[0].kv_memory_mb = args.kv_memory_mb
    sampler = Sampler()
    sampler.start()
    started = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_SELF)
    outcome = run_study(study, progress=False)
    after = resource.getrusage(resource.RUSAGE_SELF)
    wall = time.perf_counter() - started
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    sampler.stop.set()
    sampler.join()
    # On a shared host compare CPU, not wall: episodes per CPU-minute.
    title = (
        f"{outcome.planned} episodes, {wall:.0f} s wall, {cpu:.0f} CPU-s, "
        f"{outcome.planned / cpu * 60:.2f} episodes per CPU-minute; "
        f"peak RSS (sampled) {sampler.peak_rss / 2**30:.2f} GiB"
    )
    print(title)
    if args.trace:
        lines = ["s,rss_mib,kv_active_pos,kv_store_pos"]
        lines += [f"{t:.1f},{rss / 2**20:.0f},{a},{s}" for t, rss, a, s in sampler.trace]
        args.trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows: list[list[object]] = []
    for arm, backend in backends().items():
        per_pos = kv_bytes_per_position(backend.model)
        weights = sum(p.numel() * p.element_size() for p in backend.model.parameters())
        buffers = sum(b.numel() * b.element_size() for b in backend.model.buffers())
        peak = sampler.peaks.get(arm, {})
        at = sampler.at_peak.get(arm, {})
        mib = per_pos / 2**20
        rows.append(
            [
                arm,
                f"{(weights + buffers) / 2**20:.0f}",
                per_pos,
                f"{peak.get('active', 0)}",
                f"{peak.get('active_capacity', 0):,} / {peak.get('active_length', 0):,} "
                f"({peak.get('active_capacity', 0) * mib:.0f} MiB)",
                f"{peak.get('store', 0):,}, {peak.get('store_entries', 0)} entries "
                f"({peak.get('store', 0) * mib:.0f} MiB)",
                peak.get("waiting", 0),
                f"{at.get('active_capacity', 0) * mib:.0f} + {at.get('store', 0) * mib:.0f}",
            ]
        )
    header = [
        "arm",
        "weights MiB",
        "KV B/position",
        "peak sequences in flight",
        "their KV, peak positions (allocated / used)",
        "prefix store, peak positions",
        "peak waiting",
        "KV at the RSS peak, MiB (in flight + store)",
    ]
    return [Table(header, rows, "lr", title=title)]
