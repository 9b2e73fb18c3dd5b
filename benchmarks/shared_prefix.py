"""The shared system turn read in place vs copied into each sequence's cache.

One padded decode step of the batch engine with the shared system turn read in place
(joined to each sequence's own positions by `torch.cat` in every layer of every step) or
copied once into each sequence's cache (`BatchEngine.private_prefix`), at a study's sizes.
16 sequences on one shared prefix, each with its own positions after it (random keys and
values: the step's cost does not depend on them), the embedded model in fp32, 16 rows per
pass as in a study. The two layouts alternate within each round (a loaded host slows both
alike: read the ratio). Every step's logits must be equal bit for bit between the two.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch

from benchmarks.harness import Table, ratio
from flatscore.console import quiet_third_party
from flatscore.models.batching import MIN_ROWS, SeqKV, packed_forward, use_ragged_attention
from flatscore.models.embedded import load_model


def caches(model: torch.nn.Module, prefix: int, own: int, n: int, steps: int) -> list[SeqKV]:
    """`n` caches reading one shared prefix of `prefix` positions, each with `own` more."""
    config: Any = model.config
    layers, heads = int(config.num_hidden_layers), int(config.num_key_value_heads)
    dim = int(config.hidden_size) // int(config.num_attention_heads)
    g = torch.Generator().manual_seed(0)
    base = SeqKV(layers)
    base.want = prefix
    for i in range(layers):
        base.write(i, *torch.randn(2, 1, heads, prefix, dim, generator=g))
    base.advance(prefix)
    out = []
    for _ in range(n):
        kv = SeqKV.on(base)
        kv.want = prefix + own + steps
        for i in range(layers):
            kv.write(i, *torch.randn(2, 1, heads, own, dim, generator=g))
        kv.advance(own)
        out.append(kv)
    return out


@torch.inference_mode()
def decode(model: torch.nn.Module, kvs: list[SeqKV], steps: int) -> tuple[float, torch.Tensor]:
    """Seconds per decode step (every sequence feeds one token), and every step's logits."""
    logits = []
    t0 = time.perf_counter()
    for s in range(steps):
        logits.append(packed_forward(model, kvs, [[100 + s] for _ in kvs], MIN_ROWS))
    return (time.perf_counter() - t0) / steps, torch.stack(logits)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prefix", type=int, default=700, help="shared system-turn positions")
    parser.add_argument("--own", type=int, default=1500, help="each sequence's own positions")
    parser.add_argument("--sequences", type=int, default=16)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)


def run(args: argparse.Namespace) -> list[Table]:
    torch.set_num_threads(1)
    quiet_third_party()
    model = load_model("embedded").model
    use_ragged_attention(model)

    seconds: dict[str, list[float]] = {"joined per step": [], "copied once": []}
    same = True
    for _ in range(args.rounds):
        kvs = caches(model, args.prefix, args.own, args.sequences, args.steps)
        joined, ref = decode(model, kvs, args.steps)
        kvs = caches(model, args.prefix, args.own, args.sequences, args.steps)
        t0 = time.perf_counter()
        kvs = [kv.flat(kv.want) for kv in kvs]  # what `_admit` does once per turn
        copy_s = time.perf_counter() - t0
        copied, out = decode(model, kvs, args.steps)
        same = same and torch.equal(ref, out)
        seconds["joined per step"].append(joined)
        seconds["copied once"].append(copied + copy_s / args.steps)
    base = statistics.median(seconds["joined per step"])
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    rows: list[list[object]] = [[name, f"{s:.3f}", ratio(base, s)] for name, s in medians.items()]
    head = ["shared prefix", "s per decode step (median)", "vs joined"]
    title = (
        f"{args.sequences} sequences, prefix {args.prefix} + own {args.own} positions, "
        f"{args.steps} steps, {args.rounds} rounds"
    )
    note = f"Every step's logits equal bit for bit: {same}."
    return [Table(head, rows, "lr", title=title, notes=[note])]
