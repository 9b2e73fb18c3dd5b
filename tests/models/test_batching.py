"""The batch engine: the prefix store's rules (fast, no model) and, on the real embedded
model (slow), batched = unbatched, join/leave invariance, bounded memory."""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flatscore.models.base import Sampling
from flatscore.models.batching import KVStore, SeqKV
from flatscore.models.chat_format import render
from flatscore.models.compute import apply_compute, bf16_is_fast
from flatscore.models.embedded import LoadedModel
from flatscore.models.local import LocalBackend
from flatscore.models.quant.calibration import bundled

LAYERS = 2


def kv_of(n: int, fill: float = 0.0) -> SeqKV:
    """A cache holding n positions whose values are `fill` + position."""
    kv = SeqKV(LAYERS)
    k = (torch.arange(n, dtype=torch.float32) + fill).view(1, 1, n, 1)
    for layer in range(LAYERS):
        kv.write(layer, k, k)
    kv.advance(n)
    return kv


def test_store_takes_the_same_conversation_and_copies_a_shared_prefix() -> None:
    store = KVStore(LAYERS, max_tokens=10_000)
    system = list(range(100))
    store.put(system, kv_of(100), shared=True)
    turn1 = [*system, 500, 501, 502]  # prompt (101 tokens) + 2 generated
    store.put(turn1, kv_of(103, 0.5), prompt_len=101)

    # the next turn of that conversation takes the entry over
    kv, keep = store.lookup([*turn1, 600, 601])
    assert keep == 103 and kv.length == 103 and len(store) == 1
    # another conversation sharing only the system turn reads the shared prefix in place
    kv2, keep2 = store.lookup([*system, 700, 701])
    assert keep2 == 100 and len(store) == 1 and kv2.length == 100
    assert kv2.base is store._entries[0].kv and kv2.capacity == 0  # no copy
    # its own positions follow the base; attention sees both, in order
    new = torch.full((1, 1, 1, 1), -1.0)
    keys, _ = kv2.write(0, new, new)
    assert keys.flatten().tolist() == [*range(100), -1.0]
    # cutting inside the base copies the part kept; the shared entry is never written
    kv2.truncate(50)
    assert kv2.base is None and kv2.length == 50
    kv2.write(0, new, new)
    assert store._entries[0].kv.keys[0][0, 0, 50, 0] == 50.0


def test_a_cache_on_a_shared_base_behaves_like_a_plain_one() -> None:
    base = kv_of(10)
    plain, based = kv_of(10), SeqKV.on(base)
    for step in range(3):
        new = torch.full((1, 1, 2, 1), 100.0 + step)
        for layer in range(LAYERS):
            a = plain.write(layer, new, new)
            b = based.write(layer, new, new)
            assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
        plain.advance(2)
        based.advance(2)
    assert based.capacity == 64 and based.offset == 10 and based.length == plain.length == 16
    for n in (4, 10, 13):  # copies share the base when they reach past it
        copy_ = based.copy_prefix(n)
        assert copy_.length == n and (copy_.base is base) == (n >= 10)
        assert torch.equal(copy_.flat().keys[0][:, :, :n], plain.keys[0][:, :, :n])
    flat = based.flat()
    assert flat.base is None and torch.equal(flat.keys[1][:, :, :16], plain.keys[1][:, :, :16])


def test_the_store_gives_up_least_recently_used_entries_to_fit() -> None:
    store = KVStore(LAYERS, max_tokens=10_000)
    for head in range(3):
        store.put([head, *range(99)], kv_of(100), prompt_len=50)
    store.lookup([0, *range(99), 7])  # takes entry 0 over
    assert len(store) == 2
    store.fit(150)  # 2 entries of 125 positions (100 + 25% growth): the older one goes
    assert [e.ids[0] for e in store._entries] == [2] and store.tokens <= 150


def test_store_ignores_partial_matches_with_other_conversations() -> None:
    store = KVStore(LAYERS, max_tokens=10_000)
    other = [*range(100), 800, 801, 802]
    store.put(other, kv_of(103), prompt_len=102)
    kv, keep = store.lookup([*range(100), 800, 900, 901])  # diverges inside its prompt
    assert keep == 0 and kv.length == 0 and len(store) == 1
    # the same prompt again is not reused either (its last token must be re-fed anyway,
    # and reusing would make its numbers depend on what ran before)
    kv, keep = store.lookup(other[:102])
    assert keep == 0


def test_a_re_rendered_reply_is_cut_where_it_differs() -> None:
    store = KVStore(LAYERS, max_tokens=10_000)
    store.put([1, 2, 3, 4, 5, 6], kv_of(6), prompt_len=3)
    kv, keep = store.lookup([1, 2, 3, 4, 9, 9, 9])
    assert keep == 4 and kv.length == 4 and len(store) == 0


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 300), st.booleans(), st.integers(0, 5)), min_size=1, max_size=25
    ),
    st.integers(50, 1000),
)
def test_store_never_exceeds_its_budget(puts: list[tuple[int, bool, int]], budget: int) -> None:
    store = KVStore(LAYERS, max_tokens=budget)
    for n, shared, head in puts:
        store.put([head, *range(n)], kv_of(n + 1), shared=shared)
        assert store.tokens <= budget
        store.lookup([head, *range(n + 5)])
        assert store.tokens <= budget


# ---------------------------------------------------------------------- real model

TURNS = 3
TOKENS = 6


def replay(backend: LocalBackend, conv: Any, sampling: Sampling) -> list[Any]:
    """Generate every agent turn of a bundled transcript from its scripted context."""
    turns = [i for i, m in enumerate(conv.messages) if m.role == "assistant"][:TURNS]
    return [backend.generate(conv.messages[:i], conv.tools, sampling) for i in turns]


def same(a: Any, b: Any) -> bool:
    return a.raw_text == b.raw_text and [t.logprob for t in a.logprobs] == [
        t.logprob for t in b.logprobs
    ]


@pytest.fixture(scope="module", params=["fp32", "bf16", "fp16"])
def computed_model(request: pytest.FixtureRequest, loaded_model: Any) -> Any:
    """The embedded model in each compute setting (a copy; bf16 where AMX makes it fast;
    fp16 padded: its fp32 path on fp16 weights)."""
    if request.param == "fp32":
        return loaded_model
    if request.param == "bf16" and not bf16_is_fast():
        pytest.skip("bf16 compute's invariance was measured on AMX kernels; no AMX here")
    model = copy.deepcopy(loaded_model.model)
    apply_compute(model, request.param)
    return LoadedModel(
        model=model, tokenizer=loaded_model.tokenizer, name=request.param,
        description=request.param,
    )  # fmt: skip


@pytest.mark.slow
def test_batched_generation_equals_unbatched_exactly(computed_model: Any) -> None:
    """Two transcripts replayed one after the other vs at the same time: the same tokens
    and the same logprobs, bit for bit (fp32: every step is padded to ≥ 16 rows; bf16:
    linears run in blocks of ≤ 32 rows)."""
    convs = bundled("heldout")[:2]
    sampling = Sampling(max_tokens=TOKENS, logprobs=True, top_logprobs=2)
    alone = LocalBackend(computed_model)
    sequential = [replay(alone, c, sampling) for c in convs]
    together = LocalBackend(computed_model)
    out: dict[int, list[Any]] = {}
    threads = [
        threading.Thread(
            target=lambda k=k: out.__setitem__(k, replay(together, convs[k], sampling))
        )
        for k in range(len(convs))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert together.engine.peak_active == 2  # they did share forward passes
    for k in range(len(convs)):
        assert all(same(a, b) for a, b in zip(sequential[k], out[k], strict=True))
    # the next turns reused their conversation's cache and the system turn was shared
    prompts = sum(g.usage.prompt_tokens for gens in sequential for g in gens)
    assert alone.encoded_tokens < 0.5 * prompts


@pytest.mark.slow
def test_bf16_compute_is_not_fp32(computed_model: Any, loaded_model: Any) -> None:
    """The bf16 and fp16 settings really compute otherwise (logprobs differ from fp32's)."""
    conv = bundled("heldout")[0]
    sampling = Sampling(max_tokens=4, logprobs=True)
    ours = replay(LocalBackend(computed_model), conv, sampling)
    fp32 = replay(LocalBackend(loaded_model), conv, sampling)
    assert all(same(a, b) for a, b in zip(ours, fp32, strict=True)) == (
        computed_model is loaded_model
    )


@pytest.mark.slow
def test_joining_and_leaving_mid_batch_does_not_change_a_sequence(computed_model: Any) -> None:
    conv = bundled("heldout")[0]
    others = bundled("heldout")[1:4]
    first = next(i for i, m in enumerate(conv.messages) if m.role == "assistant")
    long = Sampling(max_tokens=16, logprobs=True)
    solo = LocalBackend(computed_model).generate(conv.messages[:first], conv.tools, long)

    backend = LocalBackend(computed_model)
    result: dict[str, Any] = {}
    main = threading.Thread(
        target=lambda: result.__setitem__(
            "a", backend.generate(conv.messages[:first], conv.tools, long)
        )
    )
    main.start()
    helpers = []
    for j, other in enumerate(others):  # join one by one while `a` decodes; each leaves early
        start = backend.engine.steps
        while backend.engine.steps < start + 2 and main.is_alive():
            time.sleep(0.01)
        k = next(i for i, m in enumerate(other.messages) if m.role == "assistant")
        t = threading.Thread(
            target=lambda o=other, k=k, j=j: backend.generate(
                o.messages[:k], o.tools, Sampling(max_tokens=2 + j)
            )
        )
        t.start()
        helpers.append(t)
    main.join()
    for t in helpers:
        t.join()
    assert backend.engine.peak_active >= 2
    assert same(result["a"], solo)


@pytest.mark.slow
def test_a_wave_of_new_episodes_encodes_the_shared_system_turn_once(loaded_model: Any) -> None:
    from flatscore.episode import Message

    system = Message(role="system", content="You are a support agent. " * 12)
    asks = [[system, Message(role="user", content=f"Question number {i}?")] for i in range(4)]
    backend = LocalBackend(loaded_model)
    threads = [
        threading.Thread(target=lambda m=m: backend.generate(m, [], Sampling(max_tokens=2)))
        for m in asks
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shared = len(backend._shared_prefix(asks[0], []))
    prompts = [len(backend.encode(render(m, []).text)) for m in asks]
    assert shared >= 32
    assert backend.encoded_tokens == shared + sum(p - shared for p in prompts)


@pytest.mark.slow
def test_memory_stays_bounded_with_16_in_flight(loaded_model: Any) -> None:
    """20 conversations at once: never more than 16 sequences in flight, the prefix cache
    within its budget, and every KV cache given back when they are done."""
    from flatscore.episode import Message

    budget = 600
    backend = LocalBackend(loaded_model, max_batch=16, cache_tokens=budget)
    asks = [
        [
            Message(role="system", content="You are a support agent."),
            Message(role="user", content=f"Order #W{1000 + 37 * i} has not arrived; where is it?"),
        ]
        for i in range(20)
    ]
    gens: list[Any] = []
    threads = [
        threading.Thread(
            target=lambda m=m: gens.append(backend.generate(m, [], Sampling(max_tokens=3)))
        )
        for m in asks
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    engine = backend.engine
    assert len(gens) == 20
    assert 8 <= engine.peak_active <= 16  # batched, and never more than max_batch
    assert engine.store.tokens <= budget
    longest = max(g.usage.prompt_tokens + g.usage.completion_tokens for g in gens)
    # in flight: at most 16 caches of at most the longest sequence (+25% growth, min 64)
    assert engine.peak_kv_tokens <= budget + 16 * max(64, int(longest * 1.25) + 1)
    assert engine.active_tokens == 0


def test_a_request_finishing_after_its_event_loop_closed_is_quiet() -> None:
    """An interrupted study closes its event loop while the engine still steps its
    requests: finishing one then must not raise in the engine thread (it did: "Event loop
    is closed", then an abort at exit). A tiny random Llama, no weights needed."""
    import asyncio

    from transformers import LlamaConfig, LlamaForCausalLM

    from flatscore.models.batching import BatchEngine, Request

    config = LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
    )  # fmt: skip
    engine = BatchEngine(LlamaForCausalLM(config).eval(), max_batch=2)
    release = threading.Event()

    def step(_logits: torch.Tensor) -> int | None:
        release.wait(timeout=30)
        return None  # finished: the engine now wakes the (gone) waiter

    errors: list[BaseException] = []
    hook, threading.excepthook = threading.excepthook, lambda a: errors.append(a.exc_value)
    try:
        loop = asyncio.new_event_loop()
        task = loop.create_task(engine.arun(Request(ids=[1, 2, 3], step=step)))
        loop.run_until_complete(asyncio.sleep(0.05))  # submitted; the engine waits in `step`
        task.cancel()
        loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
        loop.close()
        release.set()
        engine.close()
    finally:
        threading.excepthook = hook
    assert errors == []
