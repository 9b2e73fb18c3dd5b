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


def alone(backend: Any) -> list[Generation]:
    """Each request on its own, nothing cached."""
    out = []
    for sampling in REQUESTS:
        backend.clear_cache()
        out.append(backend.generate(MESSAGES, TOOLS, sampling))
    backend.clear_cache()
    return out


def fresh_engine(backend: Any) -> Any:
    """A new engine for `backend` (one KV stream, nothing cached), the old one returned."""
    from flatscore.models.gguf_batch import GgufBatchEngine

    old = backend.engine
    backend.engine = GgufBatchEngine(
        old._lib, old._model, n_vocab=backend.n_vocab, slots=4, context=512, threads=1
    )
    return old


def assert_same(many: Generation, one: Generation) -> None:
    assert many.raw_text == one.raw_text
    assert many.message.tool_calls == one.message.tool_calls
    assert many.usage == one.usage
    assert many.logprobs is not None and len(many.logprobs) == many.usage.completion_tokens
    assert many.logprobs == one.logprobs  # bit for bit
    assert all(len(lp.top) == 3 for lp in many.logprobs)


def test_generations_in_flight_together_give_what_each_gives_alone(backend: Any) -> None:
    """Four requests that arrive together (held back until all four wait: which arrive
    first is not left to the host's timing) share decode calls, encode their common prompt
    once, and give bit for bit what each gives alone; so does a prompt restored from the
    prefix cache."""
    solo = alone(backend)
    old = fresh_engine(backend)
    engine = backend.engine
    try:

        async def together() -> list[Generation]:
            with engine._cond:  # re-entrant: the engine plans only once all four wait
                tasks = [
                    asyncio.create_task(backend.agenerate(MESSAGES, TOOLS, s)) for s in REQUESTS
                ]
                while len(engine._waiting) < len(REQUESTS):
                    await asyncio.sleep(0)
            return list(await asyncio.gather(*tasks))

        batched = asyncio.run(together())
        assert engine.peak_active == len(REQUESTS) and engine.slots == len(REQUESTS)
        # The forced call's prompt is encoded once; the three others (one prompt, the forced
        # one's start) wait for it and restore it: one token each.
        forced_prompt = solo[0].usage.prompt_tokens
        assert engine.encoded_tokens == forced_prompt + 3 and engine.shared == 1
        for one, many in zip(solo, batched, strict=True):
            assert_same(many, one)
        forced = batched[0]  # a tool call in the chat format, parsed
        assert forced.raw_text.startswith('<tool_call>{"name": "get_order", "arguments": ')
        assert [c.name for c in forced.message.tool_calls] == ["get_order"]
        assert batched[2].raw_text != batched[3].raw_text  # each request its own seed
        # Every finished sequence's KV went to the store: the same prompt again runs one
        # token on the restored KV, and gives the same bits (KV restored wrong: other text).
        again = backend.generate(MESSAGES, TOOLS, GREEDY)
        assert again.cached_tokens == again.usage.prompt_tokens - 1
        assert_same(again, solo[1])
    finally:
        engine.close()
        backend.engine = old


def test_the_context_grows_under_the_sequence_in_flight_and_keeps_the_numbers(
    backend: Any,
) -> None:
    """A fresh engine (one KV stream) gets the other requests once the first has picked its
    first token: the context is remade with more streams at once, the first moves into it
    with its KV and the others join it mid-flight (no draining), and everything matches
    alone."""
    solo = alone(backend)
    old = fresh_engine(backend)
    engine = backend.engine
    try:
        made = [backend._request(MESSAGES, TOOLS, s) for s in REQUESTS]
        first, decoding, _ = made[0]

        def step_then_submit(logits: Any) -> int | None:
            if not decoding.out:
                for request, _, _ in made[1:]:
                    engine.submit(request)
            return decoding.step(logits)

        first.step = step_then_submit
        engine.run(first)
        for request, _, _ in made[1:]:
            assert request.done.wait(60)
        assert engine.grown == 1 and engine.slots == len(REQUESTS)
        assert engine.peak_active == len(REQUESTS)  # the first did not finish alone
        for i, (request, d, prefix) in enumerate(made):
            assert request.error is None
            assert_same(backend._generation(MESSAGES, request, d, prefix, 0.0), solo[i])
    finally:
        engine.close()
        backend.engine = old


def test_a_position_gives_the_same_bits_in_any_call_under_64_rows(backend: Any) -> None:
    """What the engine's batch invariance rests on (llama.cpp's CPU flash attention, this
    build): a prompt fed one token per call, or in chunks of up to `ONE_CHUNK_ROWS`, gives
    the next token the same logits bit for bit; a 64-row chunk (the tiled kernel) does not."""
    import numpy as np

    from flatscore.models.gguf_batch import ONE_CHUNK_ROWS

    lib = backend.engine._lib
    ids = [*backend.encode("You are a retail support agent. " * 12)[:80], 42]
    ctx = backend.engine.new_context(128, 128, 1)  # the engine's settings, 1 thread
    batch = lib.llama_batch_init(128, 0, 1)

    def logits(chunks: list[int]) -> Any:
        lib.llama_memory_seq_rm(lib.llama_get_memory(ctx), 0, -1, -1)
        pos = 0
        for n in chunks:
            batch.n_tokens = n
            for j in range(n):
                batch.token[j], batch.pos[j], batch.n_seq_id[j] = ids[pos + j], pos + j, 1
                batch.seq_id[j][0], batch.logits[j] = 0, j == n - 1
            assert lib.llama_decode(ctx, batch) == 0
            pos += n
        assert pos == len(ids)
        ptr = lib.llama_get_logits_ith(ctx, chunks[-1] - 1)
        return np.ctypeslib.as_array(ptr, shape=(backend.n_vocab,)).copy()

    try:
        one_by_one = logits([1] * len(ids))
        chunked = logits([ONE_CHUNK_ROWS, len(ids) - ONE_CHUNK_ROWS])
        tiled = logits([ONE_CHUNK_ROWS + 1, len(ids) - ONE_CHUNK_ROWS - 1])
    finally:
        lib.llama_batch_free(batch)
        lib.llama_free(ctx)
    assert np.array_equal(chunked, one_by_one)
    assert not np.array_equal(tiled, one_by_one)


def test_teacher_forcing_gives_the_logits_a_generation_saw(backend: Any) -> None:
    """`GgufBackend.teacher_force` on a prompt and the tokens a greedy turn generated gives,
    at every generated position, the logprob the turn recorded, bit for bit (what the
    fidelity table rests on: a GGUF arm's teacher-forced logits are its generation's)."""
    backend.clear_cache()
    request, decoding, _ = backend._request(MESSAGES, TOOLS, GREEDY)
    backend.engine.run(request)
    ids = request.ids + decoding.out
    rows = backend.teacher_force(ids, list(range(len(request.ids), len(ids))))
    assert rows.shape == (len(decoding.out), backend.n_vocab) and len(decoding.out) > 0
    for row, token, lp in zip(rows, decoding.out, decoding.logprobs, strict=True):
        assert int(row.argmax()) == token  # greedy
        assert backend._token_logprob(row.astype("float64"), token, 3) == lp
