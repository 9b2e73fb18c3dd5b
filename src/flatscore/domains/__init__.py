"""Built-in τ²-style domains. `get_domain(name)` returns a loaded domain; see
`flatscore.domains.framework` for the interfaces (tools, tasks, environment, evaluation)."""

from __future__ import annotations

from typing import Any

from flatscore.domains import retail, telecom
from flatscore.domains.framework import (
    DOMAINS,
    Action,
    Domain,
    Environment,
    Evaluation,
    Task,
    ToolError,
    UserScenario,
)

DOMAINS.register("retail", retail.make_domain)
DOMAINS.register("telecom", telecom.make_domain)


def get_domain(name: str) -> Domain[Any]:
    """A registered domain by name (`retail`, `telecom`), loaded once."""
    return DOMAINS.make(name)


def domain_names() -> list[str]:
    return DOMAINS.names()


__all__ = [
    "DOMAINS",
    "Action",
    "Domain",
    "Environment",
    "Evaluation",
    "Task",
    "ToolError",
    "UserScenario",
    "domain_names",
    "get_domain",
]
