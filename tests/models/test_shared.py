"""The process-wide backend cache (`BACKENDS`, a cached registry): one load per spec, loads
serialised, loaded backends never wait for a slow load."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from flatscore.models.backends import loaded_backend_count
from flatscore.models.shared import BACKENDS, clear_backends, get_backend
from flatscore.study import BackendSpec


class Fake:
    closed = False

    def close(self) -> None:
        self.closed = True


RELEASE = threading.Event()


@pytest.fixture
def loads() -> Iterator[list[str]]:
    """A backend kind `slow-fake` whose `int4-awq` load waits for `RELEASE`; yields the
    loads made, in order."""
    made: list[str] = []
    RELEASE.clear()

    def load(spec: BackendSpec) -> Fake:
        made.append(spec.quant)
        if spec.quant == "int4-awq":
            RELEASE.wait(5)
        return Fake()

    BACKENDS.register("slow-fake", load)
    clear_backends()
    yield made
    RELEASE.set()
    clear_backends()
    BACKENDS.unregister("slow-fake")


def test_a_slow_load_does_not_block_loaded_backends(loads: list[str]) -> None:
    """While one arm loads (AWQ calibration takes a minute), episodes of arms already loaded
    get their backend at once; each backend is loaded once."""
    ref = BackendSpec(kind="slow-fake", quant="ref")
    awq = BackendSpec(kind="slow-fake", quant="int4-awq")
    first = get_backend(ref)
    slow = threading.Thread(target=get_backend, args=(awq,))
    slow.start()
    time.sleep(0.05)
    started = time.perf_counter()
    assert get_backend(ref) is first
    assert get_backend(BackendSpec(kind="slow-fake", quant="ref")) is first  # an equal spec
    assert time.perf_counter() - started < 0.5
    assert slow.is_alive() and loaded_backend_count() == 1
    RELEASE.set()
    slow.join()
    assert get_backend(awq) is get_backend(awq)
    assert loads == ["ref", "int4-awq"] and loaded_backend_count() == 2


def test_equal_specs_share_one_load_and_clearing_closes_them(loads: list[str]) -> None:
    threads = [
        threading.Thread(target=get_backend, args=(BackendSpec(kind="slow-fake", quant=q),))
        for q in ("ref", "int8", "ref", "int8", "ref")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(loads) == ["int8", "ref"] and loaded_backend_count() == 2
    held = [get_backend(BackendSpec(kind="slow-fake", quant=q)) for q in ("ref", "int8")]
    clear_backends()
    assert loaded_backend_count() == 0 and all(isinstance(b, Fake) and b.closed for b in held)
    get_backend(BackendSpec(kind="slow-fake", quant="ref"))
    assert loads.count("ref") == 2  # loaded again after clearing
