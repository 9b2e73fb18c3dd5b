"""Model backends: the interface, OpenAI-compatible endpoints, local torch models, serving.

Public names: `__all__` (docs/api.md). `LocalBackend` loads on first use: it imports torch
(the `local` extra), which the rest of this package never needs."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from flatscore.models.base import Backend, BackendError, Generation, Sampling
from flatscore.models.openai import OpenAIBackend, OpenAIConfig
from flatscore.models.shared import register_backend

if TYPE_CHECKING:
    from flatscore.models.local import LocalBackend

__all__ = [
    "Backend",
    "BackendError",
    "Generation",
    "LocalBackend",
    "OpenAIBackend",
    "OpenAIConfig",
    "Sampling",
    "register_backend",
]


def __getattr__(name: str) -> Any:
    if name == "LocalBackend":
        return importlib.import_module("flatscore.models.local").LocalBackend
    raise AttributeError(f"module 'flatscore.models' has no attribute {name!r}")
