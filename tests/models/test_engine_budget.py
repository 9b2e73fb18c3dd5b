"""The batch engine's KV budget and its unpadded mode, on a tiny real Llama (random
weights: fast; the embedded model's versions of these properties are the slow tests in
test_batching.py)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch

from flatscore.models.batching import BatchEngine, Request
from flatscore.models.compute import apply_compute
from tiny_llama_model import tiny_llama


def greedy(n: int, out: list[int]) -> Any:
    def step(logits: torch.Tensor) -> int | None:
        out.append(int(torch.argmax(logits)))
        return out[-1] if len(out) < n else None

    return step


def run_all(engine: BatchEngine, prompts: list[list[int]], new: int = 6) -> list[list[int]]:
    outs: list[list[int]] = [[] for _ in prompts]
    requests = [
        Request(ids=p, step=greedy(new, o), prefix_len=40, max_new=new)
        for p, o in zip(prompts, outs, strict=True)
    ]
    # All threads enter the engine together: a staggered start on a loaded machine would
    # leave the sequences nothing to share a batch with (a flaky "peak" comparison).
    barrier = threading.Barrier(len(requests))

    def enter(r: Request) -> None:
        barrier.wait()
        engine.run(r)

    threads = [threading.Thread(target=enter, args=(r,)) for r in requests]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outs


def prompts(n: int = 12) -> list[list[int]]:
    g = torch.Generator().manual_seed(1)
    system = torch.randint(0, 64, (40,), generator=g).tolist()  # a shared prefix
    return [system + torch.randint(0, 64, (20 + 7 * i,), generator=g).tolist() for i in range(n)]


def test_the_kv_budget_bounds_memory_and_changes_no_token() -> None:
    model = tiny_llama()
    free = BatchEngine(model, max_batch=16)
    expected = run_all(free, prompts())
    budget = 300
    bounded = BatchEngine(model, max_batch=16, kv_budget=budget)
    assert run_all(bounded, prompts()) == expected  # batch invariance: only speed changes
    assert bounded.peak_active >= 1
    # Exact: caches are allocated to their prompt + max_new at once (no 25% growth), the
    # shared system turn is counted once and kept while others read it, and a stored turn
    # of another conversation that starts with it is not mistaken for it (the old engine: 413).
    assert bounded.peak_kv_tokens <= budget
    assert bounded.store.tokens <= budget


def test_the_shared_prefix_is_held_once() -> None:
    engine = BatchEngine(tiny_llama(), max_batch=16)
    run_all(engine, prompts())
    shared = [e for e in engine.store._entries if e.shared]
    assert len(shared) == 1 and shared[0].kv.length == 40
    # every sequence held only its own positions beyond the 40 shared ones
    others = [e for e in engine.store._entries if not e.shared]
    assert others and all(e.kv.base is shared[0].kv and e.kv.offset == 40 for e in others)


def test_unpadded_engine_gives_a_lone_sequence_nearly_the_same_numbers() -> None:
    model = tiny_llama()
    (prompt,) = prompts(1)
    logits: dict[bool, list[torch.Tensor]] = {True: [], False: []}
    for invariant in (True, False):
        engine = BatchEngine(model, batch_invariant=invariant)
        assert engine.min_rows == (16 if invariant else 1)
        out: list[int] = []

        def step(x: torch.Tensor, out: list[int] = out, mode: bool = invariant) -> int | None:
            logits[mode].append(x.clone())
            out.append(int(torch.argmax(x)))
            return out[-1] if len(out) < 4 else None

        engine.run(Request(ids=prompt, step=step))
    for a, b in zip(logits[True], logits[False], strict=True):
        assert torch.allclose(a, b, atol=1e-4)  # other kernels, the same math


@pytest.mark.parametrize(
    ("compute", "invariant"), [("fp32", False), ("fp16", False), ("fp32", True)]
)
def test_a_private_prefix_copy_changes_no_number(compute: str, invariant: bool) -> None:
    """The engine copies the shared system turn into each sequence's own cache instead of
    joining the two per layer per step (by default when unpadded; asked for in a padded,
    batch-invariant engine: a study's `private_prefix`): two turns of one conversation,
    then a second conversation on the same system turn, give the same logits bit for bit
    as with the joined cache, and every cache it ran on held its positions itself (fp16:
    the grouped decode attention on the cache's strided views)."""
    model = tiny_llama()
    apply_compute(model, compute)
    first, other = prompts(2)
    logits: dict[bool, list[torch.Tensor]] = {True: [], False: []}
    for private in (True, False):
        default = BatchEngine(model, batch_invariant=invariant)
        assert default.private_prefix is not invariant  # on exactly when unpadded
        engine = BatchEngine(model, batch_invariant=invariant, private_prefix=private)
        assert engine.private_prefix is private
        bases: list[bool] = []
        out: list[int] = []

        def step(
            x: torch.Tensor,
            out: list[int] = out,
            mode: bool = private,
            bases: list[bool] = bases,
            engine: BatchEngine = engine,
        ) -> int | None:
            logits[mode].append(x.clone())
            bases.extend(r.kv.base is not None for r in engine._active if r.kv is not None)
            out.append(int(torch.argmax(x)))
            return out[-1] if len(out) % 5 else None

        engine.run(Request(ids=first, step=step, prefix_len=40, max_new=5))
        second_turn = first + out + [7, 8, 9]
        engine.run(Request(ids=second_turn, step=step, prefix_len=40, max_new=5))
        engine.run(Request(ids=other, step=step, prefix_len=40, max_new=5))
        assert any(e.shared for e in engine.store._entries)
        assert not any(bases) if private else all(bases)
    assert len(logits[True]) == len(logits[False]) == 15
    for a, b in zip(logits[True], logits[False], strict=True):
        assert torch.equal(a, b)


def test_the_fp16_setting_decodes_a_lone_sequence_close_to_fp32() -> None:
    """Unpadded, one sequence: the fp16 stack (fp16 one-row linears, fused gate/up, grouped
    decode attention) computes the same model as fp32, to fp16's rounding."""
    (prompt,) = prompts(1)
    logits: dict[str, list[torch.Tensor]] = {"fp32": [], "fp16": []}
    for compute in logits:
        model = tiny_llama()
        apply_compute(model, compute)  # type: ignore[arg-type]
        out: list[int] = []

        def step(x: torch.Tensor, out: list[int] = out, mode: str = compute) -> int | None:
            logits[mode].append(x.clone())
            out.append(int(torch.argmax(logits["fp32"][len(out)])))  # fp32's path, teacher-forced
            return out[-1] if len(out) < 6 else None

        BatchEngine(model, batch_invariant=False).run(Request(ids=prompt, step=step))
    for a, b in zip(logits["fp32"], logits["fp16"], strict=True):
        assert torch.allclose(a, b, atol=2e-2) and not torch.equal(a, b)


def test_an_idle_engine_gives_freed_memory_back_once() -> None:
    import time

    from flatscore.models.batching import IDLE_TRIM_S, release_freed_memory

    assert release_freed_memory() in (True, False)  # glibc here: callable, no error
    engine = BatchEngine(tiny_llama(), max_batch=16)
    engine.trim_every_s = None  # idle trims only (a slow host would trim while running)
    run_all(engine, prompts(3))
    time.sleep(3 * IDLE_TRIM_S)
    assert engine.trims == 1  # once per idle period, not every second
    run_all(engine, prompts(2))
    time.sleep(3 * IDLE_TRIM_S)
    assert engine.trims == 2
    engine.close()


def test_a_running_engine_gives_freed_memory_back_after_sequences_finish() -> None:
    """Four arms run side by side for the whole demo, so idle trims come too late: the
    engine trims while running, after a sequence finished, at most every `trim_every_s`.
    Tokens do not change. Fails if `_advance` never trims."""
    model = tiny_llama()
    expected = run_all(BatchEngine(model, max_batch=16), prompts())
    for every, trimmed in ((0.0, True), (1e9, False), (None, False)):
        engine = BatchEngine(model, max_batch=4)  # waves: sequences finish while others run
        engine.idle_s = None  # idle trims are the test above
        engine.trim_every_s = every
        assert run_all(engine, prompts()) == expected
        assert (engine.trims >= 1) is trimmed, every
        engine.close()


def test_closing_abandons_the_pass_in_progress_between_layers() -> None:
    """close() returns within a layer, not after the whole pass (on a loaded host one
    prefill pass is many seconds): the layers after it do not run, the request in flight
    fails, nothing hangs. Fails if the engine finishes the pass first."""
    import time

    engine = BatchEngine(tiny_llama(), max_batch=16)
    layers = engine.model.model.layers
    first, second = layers[0].forward, layers[1].forward
    entered = threading.Event()
    second_ran_closed: list[bool] = []

    def held_first(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        deadline = time.monotonic() + 30
        while not engine._closed and time.monotonic() < deadline:
            time.sleep(0.01)
        return first(*args, **kwargs)

    def watched_second(*args: Any, **kwargs: Any) -> Any:
        second_ran_closed.append(engine._closed)
        return second(*args, **kwargs)

    layers[0].forward, layers[1].forward = held_first, watched_second
    request = Request(ids=prompts(1)[0], step=greedy(5, []))
    engine.submit(request)
    assert entered.wait(60)
    engine.close()
    assert request.done.is_set() and isinstance(request.error, RuntimeError)
    assert True not in second_ran_closed


def converse(engine: BatchEngine, n: int = 6, turns: int = 4) -> list[list[int]]:
    """`n` conversations at once, each `turns` turns: a prompt (a shared 40-token system
    turn and its own 10), then per turn 6 generated tokens and 8 of the user's. Returns
    each conversation's tokens."""
    g = torch.Generator().manual_seed(2)
    system = torch.randint(0, 64, (40,), generator=g).tolist()
    starts = [system + torch.randint(0, 64, (10,), generator=g).tolist() for _ in range(n)]
    users = [
        [torch.randint(0, 64, (8,), generator=g).tolist() for _ in range(turns)] for _ in range(n)
    ]
    convs = [list(s) for s in starts]
    barrier = threading.Barrier(n)

    def talk(k: int) -> None:
        barrier.wait()
        for t in range(turns):
            out: list[int] = []
            engine.run(Request(ids=list(convs[k]), step=greedy(6, out), prefix_len=40, max_new=6))
            convs[k] += out + users[k][t]

    threads = [threading.Thread(target=talk, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return convs


def test_under_a_budget_conversations_keep_their_cached_turns() -> None:
    """Six conversations whose caches do not all fit: the budget holds, no token changes,
    and conversations are not evicted to make room for younger ones (each eviction is a
    whole conversation encoded again). Measured: 1.3-1.7x the prompt tokens the engine
    encodes without a budget; evicting the least recently used turn instead: 3.2x."""
    model = tiny_llama()
    free = BatchEngine(model, max_batch=16)
    expected = converse(free)
    budget = 200  # the system turn and about 3 of the 6 conversations at their longest
    bounded = BatchEngine(model, max_batch=16, kv_budget=budget)
    assert converse(bounded) == expected
    assert bounded.peak_kv_tokens <= budget
    assert bounded.encoded_tokens <= 2 * free.encoded_tokens
