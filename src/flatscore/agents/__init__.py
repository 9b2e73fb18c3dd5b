"""Agents: the interface (`base`), the built-in `oracle` and `noop`, and a registry by name."""

from __future__ import annotations

from flatscore.agents.base import (
    Agent,
    ToolSchema,
    agent_names,
    make_agent,
    register_agent,
)
from flatscore.agents.model import ModelAgent, make_model_agent
from flatscore.agents.noop import NoopAgent
from flatscore.agents.oracle import OracleAgent

register_agent("oracle", OracleAgent)
register_agent("noop", NoopAgent)
register_agent("model", make_model_agent)
register_agent("embedded", make_model_agent)

__all__ = [
    "Agent",
    "ModelAgent",
    "NoopAgent",
    "OracleAgent",
    "ToolSchema",
    "agent_names",
    "make_agent",
    "register_agent",
]
