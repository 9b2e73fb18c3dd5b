"""The telecom database (agent side: customers, lines, plans, bills) and the user's phone."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from flatscore.strict import StrictModel


class Plan(StrictModel):
    plan_id: str
    name: str
    data_gb: int
    price: float


class Line(StrictModel):
    line_id: str
    phone_number: str
    customer_id: str
    plan_id: str
    status: Literal["active", "suspended"] = "active"
    roaming_enabled: bool = False
    data_used_gb: float = 0.0
    extra_data_gb: int = 0


class Bill(StrictModel):
    bill_id: str
    customer_id: str
    amount: float
    status: Literal["paid", "overdue"]


class Customer(StrictModel):
    customer_id: str
    name: str
    line_ids: list[str]


class TelecomDB(StrictModel):
    plans: dict[str, Plan]
    customers: dict[str, Customer]
    lines: dict[str, Line]
    bills: dict[str, Bill] = Field(default_factory=dict)


class Device(StrictModel):
    """The user's phone. `registered` is False after the line was suspended, until a
    restart while the line is active."""

    airplane_mode: bool = False
    mobile_data: bool = True
    data_roaming: bool = False
    sim_seated: bool = True
    apn_ok: bool = True
    abroad: bool = False
    registered: bool = True
