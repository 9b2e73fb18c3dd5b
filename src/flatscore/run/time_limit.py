"""`flatscore run --time-limit 1h`: stop a run cleanly after a while, leaving it resumable.

When the time is up the process gets the SIGINT a person's Ctrl-C would send: the executor
cancels the episodes in flight, the run files close (every finished episode is already
fsynced), and `flatscore run STUDY --resume` later continues where it stopped. Episode ids
depend on neither the order nor the time, so any run resumes any other; only the episodes
in flight are lost. Should the run not stop within `grace_s` (a thread stuck in native
code), the process exits at once: still nothing finished is lost.

With a drain (`--drain 15m`) the limit first only stops new episodes from starting
(`draining`, which the executors read): those in flight finish and are written, and the run
ends (`RunStopped`) when none is left, or with the SIGINT once the drain is over. Episodes
in flight are the work a stop throws away — up to `concurrency` of them, most half done —
so a long study run in parts loses next to nothing at each part's end.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading

from flatscore.errors import InputError

_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0}
GRACE_S = 60.0
SECOND_SIGINT_S = 10.0
FORCED_EXIT = 124
"""The exit code when the run had to be ended without its cleanup (as `timeout` uses)."""


_DRAINING = threading.Event()


class RunStopped(Exception):
    """The run ended at its time limit once the episodes in flight had finished."""


def draining() -> bool:
    """Whether the time limit is up and the run only finishes what is in flight."""
    return _DRAINING.is_set()


def parse_duration(text: str, option: str = "--time-limit") -> float:
    """Seconds in `1h`, `45m`, `1h30m`, `90s`, `1.5h` or a bare number of seconds."""
    value = text.strip().lower()
    try:
        seconds = float(value)
    except ValueError:
        parts = _PART.findall(value)
        if not parts or _PART.sub("", value).strip():
            raise InputError(
                f"expected a duration like 1h, 45m, 1h30m or 90s, got {text!r}",
                field=option,
            ) from None
        seconds = sum(float(n) * _UNITS[unit] for n, unit in parts)
    if not seconds > 0:
        raise InputError(f"expected a positive duration, got {text!r}", field=option)
    return seconds


class TimeLimit:
    """A context: after `seconds`, interrupt the main thread as Ctrl-C would; `reached`
    tells the caller that the KeyboardInterrupt it caught was the limit, not a person."""

    def __init__(self, seconds: float, grace_s: float = GRACE_S, drain_s: float = 0.0) -> None:
        self.seconds = seconds
        self.grace_s = grace_s
        self.drain_s = drain_s
        self.reached = False
        self._stopped = threading.Event()
        self._lock = threading.Lock()  # no SIGINT once the block has exited
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        with self._lock:
            if self._stopped.is_set():
                return
            self.reached = True
            if self.drain_s > 0:
                _DRAINING.set()
        if self.drain_s > 0 and self._stopped.wait(self.drain_s):
            return  # what was in flight finished within the drain
        with self._lock:
            if self._stopped.is_set():
                return
            os.kill(os.getpid(), signal.SIGINT)
        # A person presses Ctrl-C again when the first one is not enough: asyncio turns the
        # first into cancelling the run, which an episode in a thread can delay; the second
        # raises KeyboardInterrupt in the main thread at once.
        if not self._stopped.wait(min(SECOND_SIGINT_S, self.grace_s / 2)):
            with self._lock:
                if not self._stopped.is_set():
                    os.kill(os.getpid(), signal.SIGINT)
        if not self._stopped.wait(self.grace_s):
            sys.stderr.write(
                f"time limit: the run did not stop within {self.grace_s:.0f} s; exiting "
                "(finished episodes are in the run files; continue with --resume)\n"
            )
            sys.stderr.flush()
            os._exit(FORCED_EXIT)

    def __enter__(self) -> TimeLimit:
        self._timer.start()
        return self

    def __exit__(self, *_: object) -> None:
        with self._lock:
            self._stopped.set()
            _DRAINING.clear()
        self._timer.cancel()
