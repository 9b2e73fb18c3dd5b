"""`telecom`: dual control. The agent has account tools (customers, lines, plans, bills); the
user holds a phone with its own tools, and the agent must tell the user what to do on it."""

from __future__ import annotations

from pathlib import Path

from flatscore.domains.framework import Domain
from flatscore.domains.telecom.models import TelecomDB
from flatscore.domains.telecom.tools import PhoneTools, TelecomTools

# The policy is the agent's system prompt: short, because every token costs a small model.
POLICY = (Path(__file__).parent / "policy.md").read_text(encoding="utf-8").strip()


def make_domain() -> Domain[TelecomDB]:
    return Domain(
        name="telecom",
        policy=POLICY,
        db_type=TelecomDB,
        agent_toolkit=TelecomTools,
        user_toolkit=PhoneTools,
        data_dir=Path(__file__).parent,
    )
