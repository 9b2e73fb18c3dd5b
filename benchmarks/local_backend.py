"""Local backend speed: prefill and decode tokens/s, and episode time with vs without
KV-cache reuse (the same backend, the same model, in one process).

The "episode" replays the held-out bundled transcripts: at every agent turn the backend
generates a reply (greedy, up to --max-tokens) from the scripted conversation so far, as
the runner would. Without reuse every turn re-encodes the whole prompt.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/local_backend.py --threads 1
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from flatscore.models.base import Sampling
from flatscore.models.chat_format import render
from flatscore.models.embedded import load_model
from flatscore.models.local import LocalBackend
from flatscore.quant.calibration import bundled


def prefill_decode(backend: LocalBackend, ids: list[int], decode_steps: int) -> tuple[float, float]:
    """tokens/s for one fresh prefill of `ids` and for `decode_steps` single-token steps."""
    backend.reset()
    with torch.inference_mode():
        t0 = time.perf_counter()
        slot, logits, _ = backend._prefill(ids)
        t1 = time.perf_counter()
        for _ in range(decode_steps):
            logits = backend._step(slot, int(torch.argmax(logits)))
        t2 = time.perf_counter()
    return len(ids) / (t1 - t0), decode_steps / (t2 - t1)


def episode_time(backend: LocalBackend, max_tokens: int) -> tuple[float, int, int]:
    """Seconds, agent turns and prompt tokens encoded for replaying the held-out episodes."""
    backend.reset()
    backend.encoded_tokens = 0
    turns = 0
    t0 = time.perf_counter()
    for conv in bundled("heldout"):
        for i, message in enumerate(conv.messages):
            if message.role == "assistant":
                backend.generate(conv.messages[:i], conv.tools, Sampling(max_tokens=max_tokens))
                turns += 1
    return time.perf_counter() - t0, turns, backend.encoded_tokens


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--decode-steps", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    loaded = load_model("embedded")
    reuse = LocalBackend(loaded, reuse_kv=True)
    full = LocalBackend(loaded, reuse_kv=False)
    conv = bundled("heldout")[0]
    ids = reuse.encode(render(conv.messages, conv.tools).text)
    prefill_decode(reuse, ids[:64], 4)  # warm-up
    prefill, decode = prefill_decode(reuse, ids, args.decode_steps)

    t_reuse, turns, enc_reuse = episode_time(reuse, args.max_tokens)
    t_full, _, enc_full = episode_time(full, args.max_tokens)
    print(f"threads={args.threads} load1={os.getloadavg()[0]:.2f} torch={torch.__version__}")
    print(f"prefill: {prefill:.0f} tok/s ({len(ids)}-token prompt, fresh cache)")
    print(f"decode:  {decode:.1f} tok/s (at a ~{len(ids)}-token context)")
    print(f"episodes: {turns} agent turns, max_tokens={args.max_tokens}")
    print(f"  with KV reuse:    {t_reuse:.1f} s, {enc_reuse} prompt tokens encoded")
    print(f"  without KV reuse: {t_full:.1f} s, {enc_full} prompt tokens encoded")
    print(f"  speed-up: {t_full / t_reuse:.2f}x")


if __name__ == "__main__":
    main()
