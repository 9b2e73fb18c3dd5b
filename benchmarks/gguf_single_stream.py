"""One stream, the same GGUF: llama.cpp vs the engine.

llama.cpp (`gguf` kind) vs the transformers path (`local` kind: the file dequantized to
fp32, flatscore's engine), in one process, alternating rounds (ratios, not absolutes: the
machine is shared; docs/arms.md#gguf-arms-run-by-llamacpp). For each held-out agent prompt,
each backend encodes it from scratch (its caches emptied first) and decodes `--steps` tokens
greedily as the only sequence in flight; prefill and decode are timed apart from the turn's
own `TurnTiming`. The engine runs unpadded (`batch_invariant=False`, its single-stream
setting) in fp32 and in the `fp16` compute setting (one-row passes in fp16:
`flatscore.models.compute`), and padded to 16 rows (the default; `--no-padded` leaves it
out). Agreement: whether the two tokenizers give the same prompt ids, and whether llama.cpp
and the engine wrote the same greedy text (and where they first differ).
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import torch

from benchmarks.harness import Table, ratio
from benchmarks.single_stream import contexts
from flatscore.models.base import Backend, Sampling
from flatscore.models.chat_format import render
from flatscore.models.embedded import embedded_gguf
from flatscore.models.gguf import GgufBackend
from flatscore.models.local import LocalBackend


def clear(backend: Backend) -> None:
    if isinstance(backend, GgufBackend):
        backend.clear_cache()
    else:
        assert isinstance(backend, LocalBackend)
        backend.clear_cache()


def one_turn(backend: Backend, ctx: Any, steps: int) -> tuple[float, float, int, int, str]:
    """(prefill s, decode s, prompt tokens, completion tokens, text) of one greedy turn."""
    messages, tools = ctx
    clear(backend)
    gen = backend.generate(messages, tools, Sampling(max_tokens=steps))
    timing = gen.message.timing
    assert timing is not None and timing.prefill_s is not None and timing.decode_s is not None
    return (
        timing.prefill_s,
        timing.decode_s,
        gen.usage.prompt_tokens,
        gen.usage.completion_tokens,
        gen.raw_text,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--gguf", help="the GGUF file (default: the embedded model's)")
    parser.add_argument("--no-padded", dest="padded", action="store_false")


def run(args: argparse.Namespace) -> list[Table]:
    torch.set_num_threads(1)
    gguf = args.gguf or str(embedded_gguf())

    backends: dict[str, Backend] = {
        "llama.cpp": GgufBackend.from_spec(gguf, "ref", threads=1),
        "engine unpadded": LocalBackend.from_spec(gguf, arm="ref", batch_invariant=False),
        "engine fp16 unpadded": LocalBackend.from_spec(
            gguf, arm="ref", compute="fp16", batch_invariant=False
        ),
    }
    if args.padded:
        backends["engine padded"] = LocalBackend.from_spec(gguf, arm="ref")
    ctxs = contexts(args.prompts)
    llama, engine = backends["llama.cpp"], backends["engine unpadded"]
    assert isinstance(llama, GgufBackend) and isinstance(engine, LocalBackend)
    same_ids = [
        llama.encode(render(m, t).text) == engine.encode(render(m, t).text) for m, t in ctxs
    ]
    print(f"prompt tokens identical in both tokenizers: {sum(same_ids)}/{len(same_ids)}")

    prefill: dict[str, list[float]] = {k: [] for k in backends}
    decode: dict[str, list[float]] = {k: [] for k in backends}
    texts: dict[str, list[str]] = {k: [""] * len(ctxs) for k in backends}
    names = list(backends)
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            pre_tok = pre_s = dec_tok = dec_s = 0.0
            for i, ctx in enumerate(ctxs):
                p_s, d_s, n_in, n_out, text = one_turn(backends[name], ctx, args.steps)
                pre_tok, pre_s = pre_tok + n_in, pre_s + p_s
                dec_tok, dec_s = dec_tok + max(n_out - 1, 0), dec_s + d_s
                texts[name][i] = text
            prefill[name].append(pre_tok / pre_s)
            decode[name].append(dec_tok / dec_s)
            print(
                f"round {r} {name:16s} prefill {pre_tok / pre_s:7.1f} tok/s  "
                f"decode {dec_tok / dec_s:6.1f} tok/s",
                flush=True,
            )

    base = statistics.median(decode["llama.cpp"])
    rows: list[list[object]] = []
    for name in names:
        d, p = statistics.median(decode[name]), statistics.median(prefill[name])
        rows.append([name, f"{p:.0f}", f"{d:.1f}", ratio(d, base)])
    header = [
        "backend (1 thread)",
        "prefill tok/s (median)",
        "decode tok/s (median)",
        "decode vs llama.cpp",
    ]
    notes = [f"Prompt tokens identical in both tokenizers: {sum(same_ids)}/{len(same_ids)}."]
    for i in range(len(ctxs)):
        a, b = texts["llama.cpp"][i], texts["engine unpadded"][i]
        f = texts["engine fp16 unpadded"][i]
        padded = texts["engine padded"][i] == b if args.padded else "not run"
        notes.append(
            f"Prompt {i}: llama.cpp vs engine: {differs(a, b)}; fp16 vs fp32 engine: "
            f"{differs(f, b)}; engine padded = unpadded: {padded}."
        )
        print(f"  llama.cpp: {a[:120]!r}\n  engine:    {b[:120]!r}\n  fp16:      {f[:120]!r}")
    title = f"{len(ctxs)} held-out prompts, {args.steps} tokens each, {args.rounds} rounds"
    return [Table(header, rows, "lr", title=title, notes=notes)]


def differs(a: str, b: str) -> str:
    cut = next((j for j, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    if cut is None and len(a) != len(b):
        cut = min(len(a), len(b))
    return "same text" if cut is None else f"first differs at character {cut}"
