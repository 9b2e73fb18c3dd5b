"""The batch engine's `max_batch` holds when sequences arrive while others are in flight: a
tiny random Llama (no weights needed), the sequences in each forward pass counted from the
engine's own calls to their step functions."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from flatscore.models.batching import BatchEngine, Request

MAX_BATCH = 2


def tiny_engine() -> BatchEngine:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128,
    )  # fmt: skip
    return BatchEngine(LlamaForCausalLM(config).eval(), max_batch=MAX_BATCH)


def test_sequences_joining_mid_flight_never_exceed_max_batch() -> None:
    engine = tiny_engine()
    stepped: Counter[int] = Counter()  # engine step → sequences decoded in it
    arrived = threading.Event()

    def decoder(tokens: int, hold_at: int | None = None) -> Callable[[torch.Tensor], int | None]:
        left = [tokens]

        def step(_logits: torch.Tensor) -> int | None:
            stepped[engine.steps] += 1
            if hold_at is not None and left[0] == hold_at:
                arrived.wait(timeout=30)  # in flight while the newcomers are submitted
            left[0] -= 1
            return 1 if left[0] > 0 else None

        return step

    first = [Request(ids=[1, 2, 3], step=decoder(12, hold_at=8)) for _ in range(MAX_BATCH)]
    later = [Request(ids=[4, 5, 6 + i], step=decoder(3)) for i in range(3)]
    try:
        for r in first:
            engine.submit(r)
        while engine.steps < 2:  # both first sequences are decoding
            threading.Event().wait(0.005)
        for r in later:
            engine.submit(r)
        arrived.set()
        for r in first + later:
            assert r.done.wait(timeout=60) and r.error is None
    finally:
        engine.close()
    assert max(stepped.values()) == MAX_BATCH  # batched, and never more
    assert engine.peak_active == MAX_BATCH
    assert sum(stepped.values()) == 2 * 12 + 3 * 3  # every sequence decoded to its end
