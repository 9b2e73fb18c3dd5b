"""Built-in τ²-style domains. `get_domain(name)` returns a loaded domain; see
`flatscore.domains.framework` for the interfaces (tools, tasks, environment, evaluation)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

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
from flatscore.domains.retail.models import RetailDB
from flatscore.domains.retail.tools import RetailTools
from flatscore.domains.telecom.models import TelecomDB
from flatscore.domains.telecom.tools import PhoneTools, TelecomTools

# One folder per domain (policy.md, db.json, tasks.json, models.py, tools.py); the policy is
# the agent's system prompt, kept short because every token costs a small model.
_HERE = Path(__file__).parent
DOMAINS.register(
    "retail",
    partial(Domain.from_folder, _HERE / "retail", db_type=RetailDB, agent_toolkit=RetailTools),
)
DOMAINS.register(
    "telecom",
    partial(
        Domain.from_folder,
        _HERE / "telecom",
        db_type=TelecomDB,
        agent_toolkit=TelecomTools,
        user_toolkit=PhoneTools,
    ),
)


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
