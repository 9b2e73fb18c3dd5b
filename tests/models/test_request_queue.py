"""The request queue both batch engines are built on (`flatscore.models.request_queue`), with
a counting engine of a few lines: no model, a real engine thread. The engines' own uses
of it are tested on a tiny Llama (test_batch_limit.py, test_engine_budget.py) and on the
GGUF file (test_gguf_batch.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass

import pytest

from flatscore.models.request_queue import QueuedRequest, RequestQueue


@dataclass
class Countdown(QueuedRequest[int]):
    """`step` gets the engine's step number; the request ends when it returns None."""


class Counting(RequestQueue[Countdown, list[Countdown]]):
    """Each step: every waiting request joins, every request in flight steps once."""

    label = "counting engine"
    idle_s = 0.05

    def __init__(self, *, fail_at: int | None = None) -> None:
        super().__init__()
        self.fail_at = fail_at
        self.idles = 0
        self.released = 0

    def _plan(self) -> list[Countdown]:
        joining, self._waiting = self._waiting, []
        return joining

    def _advance(self, joining: list[Countdown]) -> None:
        self._active.extend(joining)
        self.steps += 1
        if self.steps == self.fail_at:
            raise ValueError("a failing step")
        for r in [r for r in self._active if r.cancelled]:
            self._active.remove(r)
            self._finish(r, asyncio.CancelledError())
        for r in list(self._active):
            if r.step(self.steps) is None:
                self._active.remove(r)
                self._finish(r)

    def _fail_batch(self, error: Exception) -> None:
        for r in self._active:
            self._finish(r, error)
        self._active = []

    def _on_idle(self) -> None:
        self.idles += 1

    def _release(self) -> None:
        self.released += 1


def lasting(
    steps: int, seen: list[int] | None = None, gate: threading.Event | None = None
) -> Countdown:
    """Ends after `steps` steps, noting the engine's step numbers in `seen`; its first step
    waits for `gate`."""
    left = [steps]

    def step(n: int) -> int | None:
        if gate is not None:
            gate.wait(10)
        if seen is not None:
            seen.append(n)
        left[0] -= 1
        return n if left[0] > 0 else None

    return Countdown(ids=[1], step=step)


def test_requests_in_flight_share_steps() -> None:
    engine = Counting()
    gate = threading.Event()
    a_steps: list[int] = []
    b_steps: list[int] = []
    a, b = lasting(5, a_steps, gate), lasting(2, b_steps)
    engine.submit(a)
    engine.submit(b)
    gate.set()
    assert b.done.wait(5) and b.error is None
    assert a.done.wait(5) and a.error is None
    assert len(a_steps) == 5 and a_steps == list(range(a_steps[0], a_steps[0] + 5))
    assert set(b_steps) <= set(a_steps)  # stepped together, not one after the other
    engine.close()


def test_a_failing_step_fails_its_batch_and_the_engine_keeps_serving() -> None:
    engine = Counting(fail_at=2)
    with pytest.raises(ValueError, match="a failing step"):
        engine.run(lasting(5))
    served = lasting(2)
    assert engine.run(served) is served and served.error is None  # the engine still serves
    engine.close()


def test_arun_wakes_its_loop_and_a_cancelled_waiter_leaves_the_batch() -> None:
    engine = Counting()

    async def main() -> tuple[Countdown, Countdown]:
        done = await engine.arun(lasting(3))
        forever = Countdown(ids=[1], step=lambda n: n)  # never ends by itself
        task = asyncio.create_task(engine.arun(forever))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return done, forever

    done, forever = asyncio.run(main())
    assert done.error is None
    assert forever.cancelled and forever.done.wait(5)
    assert isinstance(forever.error, asyncio.CancelledError)
    engine.close()


def test_closing_fails_what_waits_and_refuses_what_comes_after() -> None:
    engine = Counting()
    held = threading.Event()
    blocker = Countdown(ids=[1], step=lambda n: None if held.wait(10) else n)
    engine.submit(blocker)
    waiting = lasting(3)
    engine.submit(waiting)
    closer = threading.Thread(target=engine.close)
    closer.start()
    time.sleep(0.05)
    held.set()
    closer.join(10)
    for r in (blocker, waiting):
        assert r.done.is_set()
    assert isinstance(waiting.error, RuntimeError)
    assert "the counting engine was closed" in str(waiting.error)
    assert engine.released == 1
    with pytest.raises(RuntimeError, match="the counting engine is closed"):
        engine.submit(lasting(1))


def test_an_idle_engine_calls_its_idle_hook_once_per_idle_period() -> None:
    engine = Counting()
    engine.run(lasting(2))
    time.sleep(6 * engine.idle_s)
    assert engine.idles == 1
    engine.run(lasting(2))
    time.sleep(6 * engine.idle_s)
    assert engine.idles == 2
    engine.close()
