"""The process-wide backend cache: one load per spec, loads serialised, loaded backends
never wait for a slow load."""

from __future__ import annotations

import threading
import time

import pytest

import flatscore.models.shared as shared
from flatscore.models.shared import BackendSpec


def test_a_slow_load_does_not_block_loaded_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per-backend locks: while one arm loads (AWQ calibration takes a minute), episodes of
    arms already loaded get their backend at once; each backend is loaded once."""
    loads: list[str] = []
    release = threading.Event()

    class Fake:
        def close(self) -> None:
            pass

    def fake_load(spec: BackendSpec) -> Fake:
        loads.append(spec.quant)
        if spec.quant == "int4-awq":
            release.wait(5)
        return Fake()

    monkeypatch.setattr(shared, "_load_backend", fake_load)
    shared.clear_backends()
    ref, awq = (
        BackendSpec(kind="embedded", quant="ref"),
        BackendSpec(kind="embedded", quant="int4-awq"),
    )
    first = shared.get_backend(ref)
    slow = threading.Thread(target=shared.get_backend, args=(awq,))
    slow.start()
    time.sleep(0.05)
    started = time.perf_counter()
    assert shared.get_backend(ref) is first
    assert time.perf_counter() - started < 0.5
    release.set()
    slow.join()
    assert shared.get_backend(awq) is shared.get_backend(awq)
    assert loads == ["ref", "int4-awq"]
    shared.clear_backends()
