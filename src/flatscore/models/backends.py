"""The registry of backend kinds, which also holds the backends this process has loaded.

Kept apart from `flatscore.models.shared` (which registers the built-in kinds and imports
their loaders): a loaded backend counts the backends beside it without importing the
loaders that made it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flatscore.registry import Registry

if TYPE_CHECKING:
    from flatscore.models.base import Backend

BACKENDS: Registry[Backend] = Registry("backend", cached=True)
"""How each `BackendSpec.kind` is loaded; holds the loaded backends (one per spec)."""


def loaded_backend_count() -> int:
    """How many backends this process holds (they share its memory and CPU)."""
    return len(BACKENDS.made())
