"""`retail`: single control. Customers, orders and products; the agent authenticates the
user, then reads orders and cancels, re-addresses, returns or exchanges under policy rules."""

from __future__ import annotations

from pathlib import Path

from flatscore.domains.framework import Domain
from flatscore.domains.retail.models import RetailDB
from flatscore.domains.retail.tools import RetailTools

# The policy is the agent's system prompt: short, because every token costs a small model.
POLICY = (Path(__file__).parent / "policy.md").read_text(encoding="utf-8").strip()


def make_domain() -> Domain[RetailDB]:
    return Domain(
        name="retail",
        policy=POLICY,
        db_type=RetailDB,
        agent_toolkit=RetailTools,
        user_toolkit=None,
        data_dir=Path(__file__).parent,
    )
