"""Backend tests: a fault-injecting OpenAI-compatible server on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fault_server import FaultServer


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    server = FaultServer()
    yield server
    server.close()
