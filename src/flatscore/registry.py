"""One registry type for everything flatscore builds by name: agents, user simulators,
domains, executors and model backends.

A `Registry` maps a name to a factory. `builtins` names the module whose import registers
the built-in entries, imported on first use, so registering never needs an import cycle
and a plug-in registers its own entries with `register`. `cached=True` keeps one built
object per name (domains load their data once); otherwise every `make` builds a new one
(an agent per episode).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Factories by name; see the module docstring."""

    def __init__(self, kind: str, *, builtins: str | None = None, cached: bool = False) -> None:
        self.kind = kind
        self._builtins = builtins
        self._cached = cached
        self._factories: dict[str, Callable[..., T]] = {}
        self._made: dict[str, T] = {}

    def register(self, name: str, factory: Callable[..., T]) -> None:
        """Make `make(name, **options)` call `factory(**options)` (replacing any entry)."""
        self._factories[name] = factory
        self._made.pop(name, None)

    def unregister(self, name: str) -> None:
        """Remove an entry (a plug-in or a test cleaning up after itself)."""
        self._factories.pop(name, None)
        self._made.pop(name, None)

    def _load_builtins(self) -> None:
        if self._builtins is not None:
            importlib.import_module(self._builtins)

    def names(self) -> list[str]:
        self._load_builtins()
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self.names()

    def make(self, name: str, **options: Any) -> T:
        """A new object (or, cached, the one object) registered as `name`; an unknown name
        raises `KeyError` listing the known ones."""
        self._load_builtins()
        if name not in self._factories:
            raise KeyError(f"unknown {self.kind} {name!r} (known: {', '.join(self.names())})")
        if not self._cached:
            return self._factories[name](**options)
        if name not in self._made:
            self._made[name] = self._factories[name](**options)
        return self._made[name]
