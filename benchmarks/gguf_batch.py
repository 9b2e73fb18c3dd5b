"""Episodes per hour, llama.cpp's batch engine vs flatscore's, by episodes in flight.

Side by side in one process: a GGUF arm run by llama.cpp (`gguf` kind, its batch engine)
vs flatscore's batch engine (`local` kind: the same file dequantized), at several episodes
in flight, alternating rounds (ratios, not absolutes: the machine is shared).

Episodes are replayed, not rerun: every agent turn of a recorded episode (a demo run's
`runs/*.jsonl`; without `--runs`, the bundled held-out and calibration transcripts) is
generated again from the recorded conversation before it (the domain's policy as system
turn and its tools, as the runner renders them), greedy, with the recorded reply's length
as `max_tokens` (capped by `--max-tokens`). An episode's turns run one after another (each
reusing the previous turn's KV, as in a live episode); `--concurrency` episodes are in
flight at once. Both backends run one thread.

Reproducibility: every setting's generated texts are compared with the same backend's
texts at the first concurrency (the same turn alone vs inside a full batch).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.harness import Table
from flatscore.episode import Message
from flatscore.models.base import Backend, Sampling
from flatscore.models.embedded import embedded_gguf
from flatscore.models.gguf import GgufBackend
from flatscore.models.local import LocalBackend

Turn = tuple[list[Message], list[dict[str, Any]], int]


def from_runs(paths: list[Path], cap: int) -> list[list[Turn]]:
    """The agent turns of recorded episodes, as the runner showed them to the agent."""
    from flatscore.domains import get_domain
    from flatscore.run.views import agent_view

    episodes: list[list[Turn]] = []
    for path in paths:
        for line in path.read_text("utf-8").splitlines():
            raw = json.loads(line)
            domain = get_domain(raw["domain"])
            tools = domain.agent_tool_schemas()
            messages = [Message.model_validate(m) for m in raw["messages"]]
            turns: list[Turn] = []
            for i, m in enumerate(messages):
                if m.role == "assistant" and m.usage is not None and m.usage.completion_tokens:
                    view = agent_view(messages[:i], domain.policy)
                    turns.append((view, tools, min(cap, m.usage.completion_tokens)))
            if turns:
                episodes.append(turns)
    return episodes


def from_bundled(cap: int) -> list[list[Turn]]:
    from flatscore.models.quant.calibration import bundled

    episodes: list[list[Turn]] = []
    for conv in bundled("heldout") + bundled("calibration"):
        turns: list[Turn] = []
        for i, m in enumerate(conv.messages):
            if m.role == "assistant":
                n = (m.usage.completion_tokens if m.usage is not None else 0) or cap
                turns.append((conv.messages[:i], conv.tools, min(cap, n)))
        episodes.append(turns)
    return episodes


def clear(backend: Backend) -> None:
    assert isinstance(backend, GgufBackend | LocalBackend)
    backend.clear_cache()


async def replay(
    backend: Backend, episodes: list[list[Turn]], in_flight: int
) -> tuple[float, list[list[str]], int]:
    """(wall seconds, each episode's generated texts, completion tokens)."""
    gate = asyncio.Semaphore(in_flight)
    tokens = 0

    async def one(turns: list[Turn]) -> list[str]:
        nonlocal tokens
        texts = []
        async with gate:
            for messages, tools, n in turns:
                gen = await backend.agenerate(messages, tools, Sampling(max_tokens=n))
                texts.append(gen.raw_text)
                tokens += gen.usage.completion_tokens
        return texts

    start = time.perf_counter()
    texts = await asyncio.gather(*(one(t) for t in episodes))
    return time.perf_counter() - start, list(texts), tokens


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=Path, nargs="*", default=[])
    parser.add_argument("--episodes", type=int, default=0, help="use the first N (0: all)")
    parser.add_argument("--turns", type=int, default=0, help="first N turns each (0: all)")
    parser.add_argument("--max-tokens", type=int, default=192)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--gguf", help="the GGUF file (default: the embedded model's)")
    parser.add_argument("--compute", default="fp32", help="the engine's compute setting")


def run(args: argparse.Namespace) -> list[Table]:
    torch.set_num_threads(1)
    gguf = args.gguf or str(embedded_gguf())

    episodes = from_runs(args.runs, args.max_tokens) if args.runs else from_bundled(args.max_tokens)
    if args.episodes:
        episodes = episodes[: args.episodes]
    if args.turns:
        episodes = [e[: args.turns] for e in episodes]
    top = max(args.concurrency)
    backends: dict[str, Backend] = {
        "llama.cpp": GgufBackend.from_spec(
            gguf, "ref", threads=1, max_batch=top, kv_memory_mb=None
        ),
        "engine": LocalBackend.from_spec(gguf, arm="ref", compute=args.compute),
    }
    turns = sum(len(e) for e in episodes)
    print(f"{len(episodes)} episodes, {turns} agent turns; load {os.getloadavg()}")
    walls: dict[tuple[str, int], list[float]] = {}
    texts: dict[tuple[str, int], list[list[str]]] = {}
    decoded: dict[tuple[str, int], int] = {}
    for r in range(args.rounds):
        for c in args.concurrency:
            order = list(backends) if (r + c) % 2 == 0 else list(reversed(backends))
            for name in order:
                backend = backends[name]
                clear(backend)
                wall, out, tokens = asyncio.run(replay(backend, episodes, c))
                walls.setdefault((name, c), []).append(wall)
                texts[(name, c)] = out
                decoded[(name, c)] = tokens
                print(
                    f"round {r} {name:9s} in flight {c:2d}: {wall:8.1f} s, "
                    f"{3600 * len(episodes) / wall:7.1f} episodes/h, {tokens} tokens, "
                    f"load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    rows: list[list[object]] = []
    for c in args.concurrency:
        best = {n: min(walls[(n, c)]) for n in backends}
        rate = {n: 3600 * len(episodes) / best[n] for n in backends}
        ratio = rate["llama.cpp"] / rate["engine"]
        rows.append([c, f"{rate['llama.cpp']:.1f}", f"{rate['engine']:.1f}", f"{ratio:.2f}×"])
    header = ["in flight", "llama.cpp episodes/h", "engine episodes/h", "llama.cpp / engine"]
    base = args.concurrency[0]
    notes = []
    for name in backends:
        for c in args.concurrency[1:]:
            same = sum(
                a == b
                for ea, eb in zip(texts[(name, base)], texts[(name, c)], strict=True)
                for a, b in zip(ea, eb, strict=True)
            )
            notes.append(f"{name}: {same}/{turns} turns at {c} in flight identical to {base}.")
    print(f"load at the end {os.getloadavg()}")
    title = f"{len(episodes)} episodes, {turns} agent turns, best of {args.rounds} rounds"
    return [Table(header, rows, "r", title=title, notes=notes)]
