"""The telecom database (agent side: customers, lines, plans, bills) and the user's phone."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Plan(_Model):
    plan_id: str
    name: str
    data_gb: int
    price: float


class Line(_Model):
    line_id: str
    phone_number: str
    customer_id: str
    plan_id: str
    status: Literal["active", "suspended"] = "active"
    roaming_enabled: bool = False
    data_used_gb: float = 0.0
    extra_data_gb: int = 0


class Bill(_Model):
    bill_id: str
    customer_id: str
    amount: float
    status: Literal["paid", "overdue"]


class Customer(_Model):
    customer_id: str
    name: str
    line_ids: list[str]


class TelecomDB(_Model):
    plans: dict[str, Plan]
    customers: dict[str, Customer]
    lines: dict[str, Line]
    bills: dict[str, Bill] = Field(default_factory=dict)


class Device(_Model):
    """The user's phone. `registered` is False after the line was suspended, until a
    restart while the line is active."""

    airplane_mode: bool = False
    mobile_data: bool = True
    data_roaming: bool = False
    sim_seated: bool = True
    apn_ok: bool = True
    abroad: bool = False
    registered: bool = True
