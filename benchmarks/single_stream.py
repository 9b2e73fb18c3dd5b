"""One sequence alone: the engine padded to 16 rows (batch-invariant, the default) vs
unpadded (`batch_invariant=False`), in one process, alternating rounds (docs/benchmarks.md).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/single_stream.py [--rounds 3] [--steps 32]

For each held-out agent prompt (prefill from scratch, timed apart) the engine decodes
`--steps` tokens greedily as the only sequence in flight, through `LocalBackend.generate`
(the path `flatscore serve` and a one-episode run take). Also reports whether the two
settings chose the same tokens.
"""

from __future__ import annotations

import argparse
import time

import torch

from flatscore.episode import Message
from flatscore.models.base import Sampling
from flatscore.models.local import LocalBackend
from flatscore.models.quant.calibration import bundled


def contexts(n: int) -> list[tuple[list[Message], list[dict]]]:  # type: ignore[type-arg]
    """n agent-turn contexts from the held-out transcripts (the last turn of each)."""
    out = []
    for conv in bundled("heldout")[:n]:
        turns = [i for i, m in enumerate(conv.messages) if m.role == "assistant"]
        out.append((conv.messages[: turns[-1]], conv.tools))
    return out


def run(backend: LocalBackend, ctx: tuple, steps: int) -> tuple[float, float, str]:  # type: ignore[type-arg]
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--contexts", type=int, default=2)
    args = parser.parse_args()
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
                p, rate, text = run(backend, ctx, args.steps)
                best[name][i] = max(best[name][i], rate)
                prefill[name][i] = min(prefill[name][i], p)
                texts[name][i] = text
    for i in range(len(ctxs)):
        a, b = best["padded"][i], best["unpadded"][i]
        print(
            f"context {i}: decode padded {a:.1f} tok/s, unpadded {b:.1f} tok/s ({b / a:.2f}x);"
            f" prefill {prefill['padded'][i]:.2f} s vs {prefill['unpadded'][i]:.2f} s;"
            f" same text: {texts['padded'][i] == texts['unpadded'][i]}"
        )


if __name__ == "__main__":
    main()
