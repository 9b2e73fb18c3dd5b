"""The local backend's compute settings (bf16, fp16) against fp32, in one process.

Ratios, not absolutes: the machine is shared.

1. Decode: 16 sequences (held-out agent prompts) decode `--decode-steps` tokens together in
   the batch engine, in each compute, alternating rounds, best of `--rounds`.
2. Prefill: the longest of those prompts encoded from scratch, in each compute.
3. Episodes: the demo's episodes of one arm (`--tasks` stratified test tasks per domain,
   scripted user, greedy) through the study's local executor at `--concurrency`, in each
   compute. The two computes' episodes differ (other numerics), so besides episodes/hour
   the decode tokens/s of the whole run is given: the fairer ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time

import torch

from benchmarks.harness import Table, ratio
from benchmarks.local_backend import engine_decode, prompts, run_episodes
from flatscore.models.base import COMPUTES
from flatscore.models.batching import SeqKV, packed_forward
from flatscore.models.compute import bf16_is_fast
from flatscore.models.local import LocalBackend
from flatscore.models.shared import get_backend
from flatscore.run.demo import demo_study
from flatscore.run.driver import plan_study


def prefill_seconds(backend: LocalBackend, ids: list[int]) -> float:
    layers = int(backend.model.config.num_hidden_layers)
    with torch.inference_mode():
        t0 = time.perf_counter()
        packed_forward(backend.model, [SeqKV(layers)], [ids])
        return time.perf_counter() - t0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arm", default="int4")
    parser.add_argument("--tasks", type=int, default=4, help="test tasks per domain")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--decode-steps", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-episodes", action="store_true")


def run(args: argparse.Namespace) -> list[Table]:
    torch.set_num_threads(1)
    out = tempfile.mkdtemp(prefix="flatscore-bench-")
    plans = {
        c: plan_study(demo_study(out, tasks_per_domain=args.tasks, arms=(args.arm,), compute=c))
        for c in COMPUTES.names()
    }
    backends: dict[str, LocalBackend] = {}
    for c, plan in plans.items():
        spec = plan.jobs[0].agent.backend
        assert spec is not None and spec.compute == c
        backend = get_backend(spec)
        assert isinstance(backend, LocalBackend)
        backends[c] = backend
    print(
        f"torch={torch.__version__} arm={args.arm} AMX={'yes' if bf16_is_fast() else 'no'} "
        f"load1 at start={os.getloadavg()[0]:.2f}"
    )
    batch = prompts(backends["fp32"], 16)
    decode: dict[str, float] = {}
    prefill: dict[str, float] = {}
    for _ in range(args.rounds):  # alternate: load changes hit both alike
        for c, backend in backends.items():
            rate = engine_decode(backend, batch, args.decode_steps)
            decode[c] = max(decode.get(c, 0.0), rate)
            seconds = prefill_seconds(backend, max(batch, key=len))
            prefill[c] = min(prefill.get(c, float("inf")), seconds)
    longest = len(max(batch, key=len))
    header = [
        "compute",
        f"decode, 16 sequences ({args.decode_steps} steps), tok/s",
        "vs fp32",
        f"prefill, one {longest}-token prompt, s",
        "vs fp32",
    ]
    rows: list[list[object]] = [
        [
            c,
            f"{decode[c]:.1f}",
            ratio(decode[c], decode["fp32"]),
            f"{prefill[c]:.2f}",
            ratio(prefill["fp32"], prefill[c]),
        ]
        for c in COMPUTES.names()
    ]
    amx = "yes" if bf16_is_fast() else "no"
    title = f"arm {args.arm}, one torch thread, best of {args.rounds} rounds, AMX: {amx}"
    tables = [Table(header, rows, "lr", title=title)]
    if args.skip_episodes:
        return tables
    print(f"episodes: {len(plans['fp32'].jobs)} per compute, {args.concurrency} in flight")
    rows = []
    base: tuple[float, float] | None = None
    for c, plan in plans.items():
        backends[c].clear_cache()
        t0 = time.perf_counter()
        episodes = [e for _, e in asyncio.run(run_episodes(plan.jobs, args.concurrency))]
        wall = time.perf_counter() - t0
        rate = len(episodes) * 3600 / wall
        tokens = sum(e.usage.completion_tokens for e in episodes) / wall
        base = base or (rate, tokens)
        ok = sum(e.succeeded for e in episodes)
        rows.append(
            [
                c,
                f"{wall:.1f}",
                f"{rate:.0f}",
                ratio(rate, base[0]),
                f"{tokens:.1f}",
                ratio(tokens, base[1]),
                f"{ok}/{len(episodes)}",
            ]
        )
        print(*rows[-1], f"load1 {os.getloadavg()[0]:.2f}", flush=True)
    first = f"vs {next(iter(plans))}"
    header = ["compute", "wall s", "episodes/h", first, "decode tok/s", first, "succeeded"]
    title = f"the demo's episodes of arm {args.arm}, {args.concurrency} in flight"
    tables.append(Table(header, rows, "lr", title=title))
    return tables
