"""Suite-wide: one torch thread per test process (the suite runs as two pytest-xdist
workers on two cores; more threads would only fight over them), no Hypothesis timing checks
(on a shared machine a draw can wait seconds for a core: a timing failure, not a bug; seen
as `FailedHealthCheck: Input generation is slow` in tests/test_store.py under load 13-19),
and the real embedded model loaded once per process for the tests that need it."""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("flatscore", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("flatscore")


@pytest.fixture(scope="session")
def loaded_model() -> Any:
    """The embedded SmolLM2 (fp32, reference weights); tests must not change its weights."""
    import torch

    from flatscore.models.embedded import load_model

    torch.set_num_threads(1)
    return load_model("embedded")
