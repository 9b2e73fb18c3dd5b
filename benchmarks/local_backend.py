"""Local backend speed: decode by batch size, episodes per hour by concurrency.

Side by side in one process (continuous batching):

1. Decode: B sequences (distinct held-out agent prompts) decode `--decode-steps` tokens
   together in the batch engine, for each B in `--batches`; plus the unbatched baseline
   of a plain transformers forward with a DynamicCache (what the backend did before).
2. Episodes: the same real episodes (demo study: the embedded agent in one arm, scripted
   user, `--tasks` test tasks per domain stratified over templates, greedy, max_tokens
   192) through the study's local executor at each concurrency in `--concurrency`; the
   prefix cache is emptied between settings. Episodes/hour, aggregate decode tokens/s, and
   whether every setting produced the same episodes (batch invariance).
3. Where the time goes at each concurrency (`PassLog`): the engine's forward passes timed
   one by one (sequences and new tokens in each, prompt tokens against decoded ones), the
   time the engine spends outside them (waiting for the next turn: the scripted user, the
   tools, rendering; its own scheduling), and the process' CPU seconds against the wall
   (how much of the machine's cores it used).
4. Decode cost by batch size inside the episodes (`by_batch`): the decode-only passes
   (every sequence in flight fed its one new token) grouped by how many sequences they
   held: seconds per pass and per token (CPU seconds too: one torch thread, busy).
5. What bounds the batch at each concurrency (`occupancy`): each episode's engine passes,
   counted at the first concurrency (1 in flight: its episodes run one after another), and
   the passes the other concurrencies would need if every pass advanced every episode in
   flight, with the executor's order (first in, first out) and with the batch always full.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import tempfile
import time
from typing import Any

import torch

import flatscore.models.batching as batching
from benchmarks.harness import Table, ratio
from flatscore.models.batching import SeqKV, packed_forward
from flatscore.models.chat_format import render
from flatscore.models.local import LocalBackend
from flatscore.models.quant.calibration import bundled
from flatscore.models.shared import get_backend
from flatscore.run.demo import demo_study, stratified_task_ids
from flatscore.run.driver import plan_study
from flatscore.run.executors.local import LocalExecutor


def prompts(backend: LocalBackend, n: int) -> list[list[int]]:
    """n distinct agent prompts from the held-out transcripts (each agent turn's context)."""
    out: list[list[int]] = []
    for conv in bundled("heldout") + bundled("calibration"):
        for i, m in enumerate(conv.messages):
            if m.role == "assistant":
                out.append(backend.encode(render(conv.messages[:i], conv.tools).text))
    out.sort(key=len)
    step = max(1, len(out) // n)
    return out[::step][:n]


def legacy_decode(backend: LocalBackend, ids: list[int], steps: int) -> float:
    """tokens/s of the pre-batching path: plain forward, DynamicCache, batch 1."""
    from transformers import DynamicCache

    model = backend.model
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        out = model(input_ids=torch.tensor([ids]), cache=cache, use_cache=True, logits_to_keep=1)
        token = int(out.logits[0, -1].argmax())
        t0 = time.perf_counter()
        for _ in range(steps):
            out = model(input_ids=torch.tensor([[token]]), cache=cache, use_cache=True)
            token = int(out.logits[0, -1].argmax())
        return steps / (time.perf_counter() - t0)


def engine_decode(backend: LocalBackend, batch: list[list[int]], steps: int) -> float:
    """Aggregate tokens/s of len(batch) sequences decoding together in one packed forward."""
    model = backend.model
    layers = int(model.config.num_hidden_layers)
    with torch.inference_mode():
        kvs = [SeqKV(layers) for _ in batch]
        for kv, ids in zip(kvs, batch, strict=True):  # prefill one by one (not timed)
            packed_forward(model, [kv], [ids])
        feeds = [[ids[-1]] for ids in batch]
        t0 = time.perf_counter()
        for _ in range(steps):
            logits = packed_forward(model, kvs, feeds)
            feeds = [[int(row.argmax())] for row in logits]
        return len(batch) * steps / (time.perf_counter() - t0)


class PassLog:
    """Times every forward pass of the batch engine (the engine calls `packed_forward` by
    its module's name; this wraps it for the benchmark's run and restores it after)."""

    def __init__(self) -> None:
        self.passes: list[tuple[float, int, int, int]] = []  # seconds, sequences, fed, decode
        self.ends: list[float] = []  # when each pass ended (perf_counter)

    def __enter__(self) -> PassLog:
        self._inner = batching.packed_forward

        def timed(model: Any, kvs: Any, feeds: list[list[int]], *a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            out = self._inner(model, kvs, feeds, *a, **k)
            fed = sum(len(f) for f in feeds)
            ones = sum(len(f) == 1 for f in feeds)
            end = time.perf_counter()
            self.passes.append((end - t0, len(feeds), fed, ones))
            self.ends.append(end)
            return out

        batching.packed_forward = timed
        return self

    def __exit__(self, *exc: object) -> None:
        batching.packed_forward = self._inner

    def row(self, concurrency: int, wall: float, cpu: float, decoded: int) -> list[object]:
        busy = sum(p[0] for p in self.passes)
        fed = sum(p[2] for p in self.passes)
        decode_only = [p for p in self.passes if p[3] == p[1]]  # every sequence fed 1 token
        with_prompt = [p for p in self.passes if p[3] != p[1]]
        seqs = sum(p[1] for p in self.passes) / max(1, len(self.passes))
        return [
            concurrency,
            f"{len(self.passes):,}",
            f"{seqs:.1f}",
            f"{fed - decoded:,}",
            f"{sum(p[0] for p in with_prompt):,.1f}",
            f"{sum(p[0] for p in decode_only):,.1f}",
            f"{busy / wall:.0%}",
            f"{wall - busy:,.1f}",
            f"{cpu / wall:.2f}",
            f"{busy / max(1, fed) * 1000:.1f}",
        ]


async def run_episodes(jobs: list[Any], concurrency: int) -> list[tuple[float, Any]]:
    """Each episode with when it finished (perf_counter), in the order they finished."""
    return [(time.perf_counter(), e) async for e in LocalExecutor(concurrency).map(jobs)]


def passes_per_episode(log: PassLog, finished: list[float]) -> list[int]:
    """Engine passes of each episode of a run at 1 in flight (episodes one after another:
    an episode's passes are those that ended after the previous episode finished)."""
    counts, start = [], 0.0
    for end in finished:
        counts.append(sum(start < t <= end for t in log.ends))
        start = end
    return counts


def fifo_passes(lengths: list[int], slots: int) -> tuple[int, float]:
    """Passes (and mean sequences a pass) to run episodes needing `lengths` passes each with
    `slots` in flight, started in order as slots free up, every pass advancing every
    episode in flight (no episode ever waiting on its user or tools)."""
    queue, passes, rows = list(lengths), 0, 0
    active: list[int] = []
    while queue or active:
        while queue and len(active) < slots:
            active.append(queue.pop(0))
        passes += 1
        rows += len(active)
        active = [n - 1 for n in active if n > 1]
    return passes, rows / max(1, passes)


def first_difference(a: list[Any], b: list[Any]) -> str:
    """Where two runs of the same jobs first differ: the episode and its message."""
    other = {e.episode_id: e for e in b}
    for e in sorted(a, key=lambda e: e.episode_id):
        mine = said(e)
        theirs = said(other[e.episode_id])
        if mine != theirs:
            at = next(
                (i for i, (x, y) in enumerate(zip(mine, theirs, strict=False)) if x != y),
                min(len(mine), len(theirs)),
            )
            return f"{e.episode_id}, message {at} of {len(mine)} / {len(theirs)}"
    return "none"


def episode_key(e: Any) -> tuple[str, str]:
    """An episode's id and what was said (timings left out)."""
    return e.episode_id, "\n".join(said(e))


def said(e: Any) -> list[str]:
    """Each message of an episode as said: its timings (`latency_s`, `usage`, `timing`, which
    differ from run to run) left out."""
    return [m.model_dump_json(exclude={"latency_s", "usage", "timing"}) for m in e.messages]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arm", default="ref")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=8, help="test tasks per domain")
    parser.add_argument("--domains", nargs="+", default=["retail", "telecom"])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--decode-steps", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-decode", action="store_true")


def run(args: argparse.Namespace) -> list[Table]:
    torch.set_num_threads(args.threads)

    out_dir = tempfile.mkdtemp(prefix="flatscore-bench-")
    study = demo_study(out_dir, tasks_per_domain=args.tasks, arms=(args.arm,))
    keep = set(stratified_task_ids(args.domains, "test", args.tasks))
    study = study.model_copy(
        update={"domains": args.domains, "task_ids": [t for t in study.task_ids or [] if t in keep]}
    )
    jobs = plan_study(study).jobs
    spec = jobs[0].agent.backend
    assert spec is not None
    backend = get_backend(spec)
    assert isinstance(backend, LocalBackend)
    print(
        f"threads={args.threads} torch={torch.__version__} arm={args.arm} "
        f"load1 at start={os.getloadavg()[0]:.2f}"
    )

    tables = []
    if not args.skip_decode:
        batch = prompts(backend, max(args.batches))
        lengths = sorted(len(p) for p in batch)
        best: dict[str, float] = {}
        for _ in range(args.rounds):  # alternate settings: load changes hit them all alike
            rate = legacy_decode(backend, batch[len(batch) // 2], args.decode_steps)
            best["base"] = max(best.get("base", 0.0), rate)
            for b in args.batches:
                rate = engine_decode(backend, batch[:b], args.decode_steps)
                best[str(b)] = max(best.get(str(b), 0.0), rate)
        base = best["base"]
        decode_rows: list[list[object]] = [
            ["unbatched (plain forward + DynamicCache)", f"{base:.1f}", "1.00×"]
        ]
        decode_rows += [
            [f"engine, {b} sequences", f"{best[str(b)]:.1f}", ratio(best[str(b)], base)]
            for b in args.batches
        ]
        title = (
            f"decode: {args.decode_steps} steps per sequence, prompts of "
            f"{lengths[0]}..{lengths[-1]} tokens, best of {args.rounds} alternating rounds"
        )
        header = ["decode", "aggregate tok/s", "vs unbatched"]
        tables.append(Table(header, decode_rows, "lr", title=title))
        print(tables[-1].markdown(), flush=True)

    results: dict[int, list[Any]] = {}
    base_rate = None
    rows: list[list[object]] = []
    profile: list[list[object]] = []
    logs: dict[int, PassLog] = {}
    episode_passes: list[int] | None = None
    for c in args.concurrency:
        backend.clear_cache()
        backend.engine.peak_active = 0
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        with PassLog() as log:
            finished = asyncio.run(run_episodes(jobs, c))
        wall = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        episodes = [e for _, e in finished]
        logs[c] = log
        if episode_passes is None:
            episode_passes = passes_per_episode(log, [t for t, _ in finished])
        results[c] = episodes
        rate = len(episodes) * 3600 / wall
        base_rate = base_rate or rate
        tokens = sum(e.usage.completion_tokens for e in episodes)
        rows.append(
            [
                f"{c} (peak batch {backend.engine.peak_active})",
                f"{wall:,.1f}",
                f"{rate:,.0f}",
                ratio(rate, base_rate),
                f"{tokens:,}",
                f"{tokens / wall:.1f}",
            ]
        )
        profile.append(log.row(c, wall, cpu, tokens))
        print(*rows[-1], f"load1 {os.getloadavg()[0]:.2f}", flush=True)
        print(*profile[-1], flush=True)
    keys = {c: sorted(episode_key(e) for e in eps) for c, eps in results.items()}
    first = next(iter(keys.values()))
    same = all(k == first for k in keys.values())
    differs = "" if same else f" (first difference: {first_difference(*results.values())})"
    notes = [
        f"Same episodes (messages) at every concurrency: {'yes' if same else 'NO'}{differs}; "
        f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB; "
        f"the prefix cache held {backend.engine.store.tokens:,} positions at the end."
    ]
    header = [
        "in flight",
        "wall s",
        "episodes/h",
        f"vs {args.concurrency[0]} in flight",
        "decoded tokens",
        "aggregate decode tok/s",
    ]
    title = (
        f"episodes: {len(jobs)} ({args.tasks} test tasks per domain of "
        f"{', '.join(args.domains)}), arm {args.arm}"
    )
    tables.append(Table(header, rows, "r", title=title, notes=notes))
    header = [
        "in flight",
        "passes",
        "sequences a pass",
        "prompt tokens fed",
        "s in passes with prompt tokens",
        "s in decode-only passes",
        "engine busy",
        "s outside passes",
        "CPU s / wall s",
        "ms per fed token",
    ]
    tables.append(Table(header, profile, "r", title="where the time goes"))
    tables.append(by_batch(logs))
    if episode_passes is not None and args.concurrency[0] == 1:
        tables.append(occupancy(episode_passes, logs))
    return tables


def by_batch(logs: dict[int, PassLog]) -> Table:
    """Decode-only passes of the episodes by sequences in the pass, over every concurrency."""
    groups: dict[int, list[float]] = {}
    for log in logs.values():
        for seconds, seqs, _, ones in log.passes:
            if ones == seqs:
                groups.setdefault(seqs, []).append(seconds)
    rows: list[list[object]] = []
    for b in sorted(groups):
        mean = sum(groups[b]) / len(groups[b])
        rows.append([b, f"{len(groups[b]):,}", f"{mean * 1000:.0f}", f"{mean / b:.3f}"])
    header = ["sequences in the pass", "decode-only passes", "ms per pass", "s per token"]
    title = "decode inside the episodes, by batch size (every concurrency's passes together)"
    return Table(header, rows, "r", title=title)


def occupancy(lengths: list[int], logs: dict[int, PassLog]) -> Table:
    """Passes measured at each concurrency against those the episodes' own lengths allow."""
    rows: list[list[object]] = []
    for c, log in logs.items():
        passes = len(log.passes)
        seqs = sum(p[1] for p in log.passes) / max(1, passes)
        fifo, fifo_seqs = fifo_passes(lengths, c)
        full = max(max(lengths), -(-sum(lengths) // c))
        rows.append([c, f"{passes:,} ({seqs:.1f})", f"{fifo:,} ({fifo_seqs:.1f})", f"{full:,}"])
    header = [
        "in flight",
        "passes measured (sequences a pass)",
        "passes, first in first out (sequences a pass)",
        "passes, batch always full",
    ]
    ordered = sorted(lengths)
    title = (
        f"what bounds the batch: the {len(lengths)} episodes' engine passes at 1 in flight, "
        f"{ordered[0]}..{ordered[-1]} (median {ordered[len(ordered) // 2]}), "
        f"{sum(lengths):,} in all"
    )
    return Table(header, rows, "r", title=title)
