"""A request queue drained by one engine thread: what the local backend's batch engine
(`flatscore.models.batching`) and the gguf backend's (`flatscore.models.gguf_batch`) share.

Callers submit generation requests from any thread or event loop; one thread, started on
demand, takes the waiting ones into the batch in flight and runs steps until the queue is
empty, then waits on a condition variable. A waiter blocks on the request's `done` event
(`run`), or awaits it without holding a thread (`arun`: the request's `on_done` wakes the
event loop). Each engine keeps only its own scheduling and step (`_plan`, `_advance`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

Logits = TypeVar("Logits")


@dataclass
class QueuedRequest(Generic[Logits]):
    """One generation: prompt ids and the decoding step (given the logits of its last
    token: the next token to feed, or None when it is finished). Filled in by the engine:
    `encoded` (prompt tokens run through the model) and `error`."""

    ids: list[int]
    step: Callable[[Logits], int | None]
    max_new: int = 0  # the most tokens it may generate
    encoded: int = 0
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)
    on_done: Callable[[], None] | None = None
    cancelled: bool = False  # set by a waiter that gave up: dropped at the next step
    # engine state
    held: list[int] = field(default_factory=list)  # ids whose KV the sequence holds
    pending: list[int] = field(default_factory=list)  # ids still to feed


R = TypeVar("R", bound="QueuedRequest[Any]")
Plan = TypeVar("Plan")


class RequestQueue(ABC, Generic[R, Plan]):
    """Submitting, waiting and closing around one engine thread. A subclass decides under
    the lock what the next step takes (`_plan`: e.g. the requests that join), then runs it
    outside the lock (`_advance`); an exception there fails the batch in flight
    (`_fail_batch`) and the engine keeps serving."""

    label = "engine"  # in error messages: "the <label> is closed"
    thread_name = "flatscore-engine"
    idle_s: float | None = None  # idle this long: `_on_idle` once (None: never)

    def __init__(self) -> None:
        self._waiting: list[R] = []
        self._active: list[R] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.steps = 0
        self.peak_active = 0
        self.encoded_tokens = 0

    # -------------------------------------------------------------- submitting

    def _thread_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def submit(self, request: R) -> None:
        with self._cond:
            if self._closed:
                raise RuntimeError(f"the {self.label} is closed")
            self._waiting.append(request)
            if not self._thread_alive():
                self._thread = threading.Thread(
                    target=self._loop, name=self.thread_name, daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def run(self, request: R) -> R:
        """Submit and wait (blocking)."""
        self.submit(request)
        request.done.wait()
        if request.error is not None:
            raise request.error
        return request

    async def arun(self, request: R) -> R:
        """Submit and wait without holding a thread (many episodes in flight)."""
        loop = asyncio.get_running_loop()
        finished: asyncio.Future[None] = loop.create_future()

        def settle() -> None:
            if not finished.done():
                finished.set_result(None)

        def wake() -> None:
            # A closed loop (the run was interrupted) has no waiter left to wake.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle)

        request.on_done = wake
        self.submit(request)
        try:
            await finished
        except asyncio.CancelledError:  # an episode timeout: stop spending steps on it
            request.cancelled = True
            raise
        if request.error is not None:
            raise request.error
        return request

    def close(self) -> None:
        """Fail what waits or runs, stop the thread, then `_release` the engine's memory."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout=60)
        self._release()

    # -------------------------------------------------------------- the loop

    def _finish(self, request: R, error: BaseException | None = None) -> None:
        """Hand `request` back to its waiter (engines first put away what it held)."""
        request.error = error
        request.done.set()
        if request.on_done is not None:
            request.on_done()

    def _loop(self) -> None:
        while True:
            with self._cond:
                idle = False
                while not self._closed and not self._waiting and not self._active:
                    if not self._cond.wait(None if idle else self.idle_s):
                        idle = True
                        self._on_idle()
                if self._closed:
                    for r in self._waiting + self._active:
                        self._finish(r, RuntimeError(f"the {self.label} was closed"))
                    self._waiting, self._active = [], []
                    return
                plan = self._plan()
            try:
                self._advance(plan)
            except Exception as exc:  # fail the batch, keep serving
                self._fail_batch(exc)

    def _on_idle(self) -> None:
        """Called once when the engine has been idle `idle_s` seconds."""

    @abstractmethod
    def _plan(self) -> Plan:
        """Under the lock, with work to do: what the next step takes."""

    @abstractmethod
    def _advance(self, plan: Plan) -> None:
        """Outside the lock: admit what `plan` says and run one step."""

    @abstractmethod
    def _fail_batch(self, error: Exception) -> None:
        """`_advance` raised: finish every request in flight with `error`."""

    @abstractmethod
    def _release(self) -> None:
        """After the thread stopped: free the engine's caches and buffers."""
