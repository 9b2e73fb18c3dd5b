"""Several generations of one GGUF arm in flight at once (`flatscore.models.gguf_batch`), on
the shipped SmolLM2 Q4_1 file run by llama.cpp: they share decode calls, keep the chat
format's tool calls, their own seeds and top-k logprobs, and give what each gives alone.

In the fast suite on purpose, kept cheap: a short prompt, 10 tokens a turn, a 512-position
stream per sequence. Skipped, with the reason shown, where llama-cpp-python (the `gguf`
extra) is not installed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from flatscore.episode import Message
from flatscore.models.base import Generation, Sampling
from flatscore.models.gguf_files import EXTRA_HINT, llama_cpp_available
from sample_chat import order_tool

pytestmark = pytest.mark.skipif(not llama_cpp_available(), reason=EXTRA_HINT)

TOOLS = [order_tool("get_order", "Look up an order by its id.")]
MESSAGES = [
    Message(role="system", content="You are a retail support agent. Use the tools."),
    Message(role="user", content="Where is my order #W123?"),
]
FORCED = Sampling(
    max_tokens=10,
    tool_choice={"type": "function", "function": {"name": "get_order"}},
    logprobs=True,
    top_logprobs=3,
)
GREEDY = Sampling(max_tokens=10, logprobs=True, top_logprobs=3)


def sampled(seed: int) -> Sampling:
    return Sampling(temperature=1.0, max_tokens=10, seed=seed, logprobs=True, top_logprobs=3)


REQUESTS = [FORCED, GREEDY, sampled(7), sampled(8)]


@pytest.fixture(scope="module")
def backend() -> Iterator[Any]:
    from flatscore.models.gguf import GgufBackend

    b = GgufBackend.from_spec(
        "embedded-base", "ref", threads=1, max_context=512, max_batch=4, kv_memory_mb=None
    )
    yield b
    b.close()


# Slow (out of the fast suite) until its timing dependence is found: it failed once in
# four runs on the loaded 2-core host (which requests share the first decode calls
# depends on when they arrive) and passed alone every time.
@pytest.mark.slow
def test_generations_in_flight_together_give_what_each_gives_alone(backend: Any) -> None:
    alone: list[Generation] = []
    for sampling in REQUESTS:
        backend.clear_cache()
        alone.append(backend.generate(MESSAGES, TOOLS, sampling))
    backend.clear_cache()

    async def together() -> list[Generation]:
        return list(
            await asyncio.gather(*(backend.agenerate(MESSAGES, TOOLS, s) for s in REQUESTS))
        )

    batched = asyncio.run(together())
    # They shared decode calls: all four, or three after the first alone (the engine may
    # take the first before the others arrive, and then grows its context once it is done).
    assert backend.engine.peak_active >= len(REQUESTS) - 1
    assert backend.engine.grown >= 1 and backend.engine.slots >= 3  # it started with one
    for one, many in zip(alone, batched, strict=True):
        assert many.raw_text == one.raw_text
        assert many.message.tool_calls == one.message.tool_calls
        assert many.usage == one.usage
        assert many.logprobs is not None and len(many.logprobs) == many.usage.completion_tokens
        assert many.logprobs == one.logprobs  # bit for bit: no call runs a lone row
        assert all(len(lp.top) == 3 for lp in many.logprobs)
    forced = batched[0]  # a tool call in the chat format, parsed
    assert forced.raw_text.startswith('<tool_call>{"name": "get_order", "arguments": ')
    assert [c.name for c in forced.message.tool_calls] == ["get_order"]
    assert batched[2].raw_text != batched[3].raw_text  # each request its own seed
    # Every sequence's cached prefix went to the store: the same prompt again runs one token
    # on the restored KV. Not bit for bit: where the restored cells land in the stream
    # changes the last bits (docs/benchmarks.md); KV restored wrong gives another text.
    again = backend.generate(MESSAGES, TOOLS, GREEDY)
    assert again.cached_tokens == again.usage.prompt_tokens - 1
    assert again.raw_text == alone[1].raw_text
    assert again.logprobs is not None and alone[1].logprobs is not None
    for x, y in zip(again.logprobs, alone[1].logprobs, strict=True):
        assert x.logprob == pytest.approx(y.logprob, abs=0.25)


def test_the_context_grows_after_the_sequence_in_flight_and_keeps_the_numbers(
    backend: Any,
) -> None:
    """A fresh engine (one KV stream) gets the other requests only once the first has
    picked its first token: it finishes alone, then the context is remade with more streams
    for the others, and everything matches alone."""
    from flatscore.models.gguf_batch import GgufBatchEngine

    alone = {}
    for i, sampling in enumerate(REQUESTS):
        backend.clear_cache()
        alone[i] = backend.generate(MESSAGES, TOOLS, sampling)
    engine = backend.engine
    backend.engine = GgufBatchEngine(
        engine._lib,
        engine._model,
        n_vocab=backend.n_vocab,
        slots=4,
        context=backend.max_context,
        threads=1,
    )
    try:
        made = [backend._request(MESSAGES, TOOLS, s) for s in REQUESTS]
        first, decoding, _ = made[0]

        def step_then_submit(logits: Any) -> int | None:
            if not decoding.out:
                for request, _, _ in made[1:]:
                    backend.engine.submit(request)
            return decoding.step(logits)

        first.step = step_then_submit
        backend.engine.run(first)
        for request, _, _ in made[1:]:
            request.done.wait(60)
        assert backend.engine.grown >= 1 and backend.engine.slots >= 3
        for i, (request, d, prefix) in enumerate(made):
            assert request.error is None
            gen = backend._generation(MESSAGES, request, d, prefix, 0.0)
            assert gen.raw_text == alone[i].raw_text and gen.logprobs == alone[i].logprobs
    finally:
        backend.engine.close()
        backend.engine = engine
