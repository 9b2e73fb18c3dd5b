"""The one registry type: names, fresh vs cached objects, unknown names, built-ins."""

from __future__ import annotations

import pytest

from flatscore.agents.base import AGENTS
from flatscore.domains import DOMAINS
from flatscore.executors import EXECUTORS
from flatscore.models.shared import BACKENDS
from flatscore.registry import Registry
from flatscore.users.base import USERS


def test_make_builds_fresh_or_cached_objects() -> None:
    fresh: Registry[list[int]] = Registry("thing")
    fresh.register("pair", lambda n=2: [0] * n)
    assert fresh.make("pair") == [0, 0] and fresh.make("pair", n=3) == [0, 0, 0]
    assert fresh.make("pair") is not fresh.make("pair")
    cached: Registry[list[int]] = Registry("thing", cached=True)
    cached.register("pair", lambda: [0, 0])
    assert cached.make("pair") is cached.make("pair")
    assert "pair" in cached and cached.names() == ["pair"]
    cached.unregister("pair")
    assert "pair" not in cached


def test_unknown_names_list_the_known_ones() -> None:
    reg: Registry[int] = Registry("widget")
    reg.register("b", lambda: 1)
    reg.register("a", lambda: 2)
    with pytest.raises(KeyError, match=r"unknown widget 'c' \(known: a, b\)"):
        reg.make("c")


def test_every_kind_uses_it_with_its_builtins() -> None:
    assert {"oracle", "noop"} <= set(AGENTS.names())
    assert USERS.names() == ["llm", "scripted"]
    assert DOMAINS.names() == ["retail", "telecom"]
    assert DOMAINS.make("retail") is DOMAINS.make("retail")  # loaded once
    assert EXECUTORS.names() == ["local", "ray"]
    assert BACKENDS.names() == ["embedded", "gguf", "local", "openai"]
