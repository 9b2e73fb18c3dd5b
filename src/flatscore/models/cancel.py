"""Cooperative cancellation of a generation (the client that asked for it went away).

The server runs a generation in a worker thread under `cancellable(event)`; a backend that
generates token by token calls `check_cancelled()` between tokens, which raises
`GenerationCancelled` once the event is set. Outside `cancellable` the check is a no-op, so
backends stay usable anywhere else unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import TypeVar

from flatscore.models.base import BackendError

T = TypeVar("T")

_current: ContextVar[threading.Event | None] = ContextVar("flatscore_cancel", default=None)


class GenerationCancelled(BackendError):
    """The generation was abandoned because nobody is waiting for it any more."""

    def __init__(self) -> None:
        super().__init__("generation cancelled: the client disconnected", kind="cancelled")


def check_cancelled() -> None:
    """Raise GenerationCancelled when the current generation has been cancelled."""
    event = _current.get()
    if event is not None and event.is_set():
        raise GenerationCancelled()


def run_cancellable(event: threading.Event, fn: Callable[[], T]) -> T:
    """Call `fn()` (in this thread) with `event` as its cancellation signal."""
    token = _current.set(event)
    try:
        return fn()
    finally:
        _current.reset(token)
