"""The one registry type: names, fresh vs cached objects, unknown names, built-ins."""

from __future__ import annotations

import pytest

from flatscore.agents.base import AGENTS
from flatscore.domains import DOMAINS
from flatscore.models.shared import BACKENDS
from flatscore.registry import Registry
from flatscore.run.executors import EXECUTORS
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


def test_a_cached_registry_builds_once_per_name_and_options() -> None:
    built: list[int] = []
    reg: Registry[list[int]] = Registry("thing", cached=True)
    reg.register("n", lambda n=0: built.append(n) or [n])
    assert reg.make("n", n=1) is reg.make("n", n=1) is not reg.make("n", n=2)
    assert reg.make("n") is reg.make("n") and built == [1, 2, 0]
    assert reg.made() == [[1], [2], [0]]
    assert reg.clear() == [[1], [2], [0]] and reg.made() == []
    reg.make("n", n=1)
    assert built == [1, 2, 0, 1]  # built again after clearing


def test_check_is_a_validator_listing_the_known_names() -> None:
    reg: Registry[int] = Registry("widget")
    reg.register("a", lambda: 1)
    assert reg.check("a") == "a"
    with pytest.raises(ValueError, match=r"unknown widget 'b' \(known: a\)"):
        reg.check("b")


def test_arms_and_compute_settings_are_registries() -> None:
    from flatscore.models.base import COMPUTES
    from flatscore.models.quant.arms import ARMS, Arm

    assert {"ref", "int8", "int4", "int4-awq"} <= set(ARMS.names())
    assert isinstance(ARMS.make("int4-awq"), Arm) and ARMS.make("int4-awq").awq
    assert ARMS.make("int8") is ARMS.make("int8")
    assert COMPUTES.names() == ["bf16", "fp16", "fp32"]


def test_takes_reads_the_factory_signature() -> None:
    reg: Registry[object] = Registry("thing")
    reg.register("needs", lambda backend, patience=1: None)
    reg.register("plain", lambda patience=1: None)
    reg.register("any", lambda **options: None)
    assert reg.takes("needs", "backend", required=True) and reg.takes("needs", "backend")
    assert not reg.takes("needs", "patience", required=True)
    assert not reg.takes("plain", "backend") and reg.takes("any", "backend")
    assert not reg.takes("any", "backend", required=True)
