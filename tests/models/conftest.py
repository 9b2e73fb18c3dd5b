"""Shared fixtures for backend tests: one real embedded model per test session, and a
fault-injecting OpenAI-compatible server on loopback. The suite runs with
--import-mode=importlib, which leaves sys.path alone, so this folder is added for helpers."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).parent))

import pytest
from fault_server import FaultServer


@pytest.fixture(scope="session")
def loaded_model() -> Any:
    """The embedded SmolLM2 (fp32, reference weights); tests must not change its weights."""
    import torch

    from flatscore.models.embedded import load_model

    torch.set_num_threads(1)
    return load_model("embedded")


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    server = FaultServer()
    yield server
    server.close()
