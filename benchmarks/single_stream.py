"""One sequence alone: the engine padded to 16 rows vs unpadded.

Padded is batch-invariant, the default; unpadded is `batch_invariant=False`. In one
process, alternating rounds. For each held-out agent prompt (prefill from scratch, timed
apart) the engine decodes `--steps` tokens greedily as the only sequence in flight, through
`LocalBackend.generate` (the path `flatscore serve` and a one-episode run take). Also
reports whether the two settings chose the same tokens.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from benchmarks.harness import Table, ratio
from flatscore.episode import Message
from flatscore.models.base import Sampling
from flatscore.models.local import LocalBackend
from flatscore.models.quant.calibration import bundled


def contexts(n: int) -> list[tuple[list[Message], list[dict[str, Any]]]]:
    """n agent-turn contexts from the held-out transcripts (the last turn of each)."""
    out = []
    for conv in bundled("heldout")[:n]:
        turns = [i for i, m in enumerate(conv.messages) if m.role == "assistant"]
        out.append((conv.messages[: turns[-1]], conv.tools))
    return out


def one_context(
    backend: LocalBackend, ctx: tuple[list[Message], list[dict[str, Any]]], steps: int
) -> tuple[float, float, str]:
    """(prefill seconds, decode tokens/s, text) for one context, each from an empty cache:
    decode speed = the extra tokens over the extra time of a long generation over a
    one-token one."""
    messages, tools = ctx
    backend.clear_cache()
    t0 = time.perf_counter()
    backend.generate(messages, tools, Sampling(max_tokens=1))
    prefill = time.perf_counter() - t0
    backend.clear_cache()
    t0 = time.perf_counter()
    gen = backend.generate(messages, tools, Sampling(max_tokens=steps))
    elapsed = time.perf_counter() - t0
    extra = gen.usage.completion_tokens - 1
    return prefill, extra / max(elapsed - prefill, 1e-9), gen.raw_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--contexts", type=int, default=2)


def run(args: argparse.Namespace) -> list[Table]:
    torch.set_num_threads(1)
    padded = LocalBackend.from_spec("embedded", "ref")
    unpadded = LocalBackend(padded.loaded, batch_invariant=False)
    ctxs = contexts(args.contexts)
    best: dict[str, list[float]] = {"padded": [0.0] * len(ctxs), "unpadded": [0.0] * len(ctxs)}
    prefill: dict[str, list[float]] = {k: [1e9] * len(ctxs) for k in best}
    texts: dict[str, list[str]] = {k: [""] * len(ctxs) for k in best}
    for r in range(args.rounds):
        order = [("padded", padded), ("unpadded", unpadded)]
        for name, backend in order if r % 2 == 0 else order[::-1]:
            for i, ctx in enumerate(ctxs):
                p, rate, text = one_context(backend, ctx, args.steps)
                best[name][i] = max(best[name][i], rate)
                prefill[name][i] = min(prefill[name][i], p)
                texts[name][i] = text
    rows: list[list[object]] = []
    for i in range(len(ctxs)):
        a, b = best["padded"][i], best["unpadded"][i]
        rows.append(
            [
                i,
                f"{a:.1f}",
                f"{b:.1f}",
                ratio(b, a),
                f"{prefill['padded'][i]:.2f} / {prefill['unpadded'][i]:.2f}",
                "yes" if texts["padded"][i] == texts["unpadded"][i] else "no",
            ]
        )
    header = [
        "context",
        "decode, padded to 16 rows, tok/s",
        "unpadded, tok/s",
        "unpadded / padded",
        "prefill s (padded / unpadded)",
        "same text",
    ]
    title = f"{args.steps} tokens per context, best of {args.rounds} alternating rounds"
    return [Table(header, rows, "r", title=title)]
