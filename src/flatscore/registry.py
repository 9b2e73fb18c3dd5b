"""One registry type for everything flatscore builds by name: agents, user simulators,
domains, executors, model backends, precision arms and compute settings.

A `Registry` maps a name to a factory. `builtins` names the module whose import registers
the built-in entries, imported on first use, so registering never needs an import cycle
and a plug-in registers its own entries with `register`. `cached=True` keeps one built
object per name and options (domains load their data once; a model backend is loaded once
per process for each spec); otherwise every `make` builds a new one (an agent per episode).

A cached registry is safe to use from threads: builds run one at a time (model loads: the
lazy imports of transformers are not thread-safe), and an object already built is returned
at once even while another one is being built (a slow AWQ load holds up nobody else).
"""

from __future__ import annotations

import importlib
import inspect
import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Factories by name; see the module docstring."""

    def __init__(self, kind: str, *, builtins: str | None = None, cached: bool = False) -> None:
        self.kind = kind
        self._builtins = builtins
        self._cached = cached
        self._factories: dict[str, Callable[..., T]] = {}
        self._about: dict[str, Any] = {}
        self._made: dict[tuple[str, Hashable], T] = {}
        self._made_lock = threading.Lock()  # guards `_made` only (held for microseconds)
        self._build_lock = threading.RLock()  # one build at a time (a factory may make more)

    def register(self, name: str, factory: Callable[..., T], about: Any = None) -> None:
        """Make `make(name, **options)` call `factory(**options)` (replacing any entry);
        `about`: what else the entry declares (`about(name)`), gone with the entry."""
        self._factories[name] = factory
        self._about[name] = about
        self._forget(name)

    def unregister(self, name: str) -> None:
        """Remove an entry (a plug-in or a test cleaning up after itself)."""
        self._factories.pop(name, None)
        self._about.pop(name, None)
        self._forget(name)

    def about(self, name: str) -> Any:
        """What `name`'s registration declared besides its factory (None if nothing, or
        if `name` is not registered)."""
        self._load_builtins()
        return self._about.get(name)

    def _forget(self, name: str) -> None:
        with self._made_lock:
            for key in [k for k in self._made if k[0] == name]:
                del self._made[key]

    def _load_builtins(self) -> None:
        if self._builtins is not None:
            importlib.import_module(self._builtins)

    def names(self) -> list[str]:
        self._load_builtins()
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self.names()

    def check(self, name: str) -> str:
        """`name` if registered, else a `ValueError` listing the known names (for pydantic
        validators: the registry, not a `Literal`, lists what exists)."""
        if name not in self:
            raise ValueError(f"unknown {self.kind} {name!r} (known: {', '.join(self.names())})")
        return name

    def takes(self, name: str, option: str, *, required: bool = False) -> bool:
        """Whether `name`'s factory takes the keyword `option` (`required`: has to be given
        it): what a spec may, or must, give it (a user simulator reached through a model
        requires `backend`)."""
        self._load_builtins()
        params = inspect.signature(self._factories[name]).parameters.values()
        if required:
            return any(p.name == option and p.default is p.empty for p in params)
        return any(p.name == option or p.kind is p.VAR_KEYWORD for p in params)

    def make(self, name: str, **options: Any) -> T:
        """A new object (or, cached, the one object for `name` and `options`, which must
        then be hashable) registered as `name`; an unknown name raises `KeyError` listing
        the known ones."""
        self._load_builtins()
        if name not in self._factories:
            raise KeyError(f"unknown {self.kind} {name!r} (known: {', '.join(self.names())})")
        if not self._cached:
            return self._factories[name](**options)
        key = (name, tuple(sorted(options.items())))
        with self._made_lock:
            if key in self._made:
                return self._made[key]
        with self._build_lock:
            with self._made_lock:
                if key in self._made:
                    return self._made[key]
            made = self._factories[name](**options)
            with self._made_lock:
                self._made[key] = made
            return made

    def made(self) -> list[T]:
        """The objects a cached registry holds, in the order they were built."""
        with self._made_lock:
            return list(self._made.values())

    def clear(self) -> list[T]:
        """Forget every object built so far; returns them (to be closed by the caller)."""
        with self._made_lock:
            made = list(self._made.values())
            self._made.clear()
        return made
