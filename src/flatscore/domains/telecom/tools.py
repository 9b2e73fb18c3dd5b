"""Telecom tools: the agent's account tools and the user's phone tools (dual control).

The phone's tools are called by the user (`ToolCall(requestor="user")`); an agent that calls
one gets `Error: Tool 'x' not found.` — role confusion in the analysis.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field

from flatscore.domains.framework import (
    Action,
    NotFound,
    Precondition,
    Task,
    Toolkit,
    UserToolkit,
    lookup,
    setup,
    tool,
)
from flatscore.domains.telecom.models import Bill, Device, Line, Plan, TelecomDB


def _digits(phone: str) -> str:
    return re.sub(r"\D", "", phone)


def data_left(db: TelecomDB, line: Line) -> float:
    return db.plans[line.plan_id].data_gb + line.extra_data_gb - line.data_used_gb


class TelecomTools(Toolkit[TelecomDB]):
    """The telecom agent's tools."""

    def _line(self, line_id: str) -> Line:
        return lookup(self.db.lines, "Line", line_id)

    def _active_line(self, line_id: str) -> Line:
        """A line that changes on a write tool must not be suspended."""
        line = self._line(line_id)
        if line.status != "active":
            raise Precondition(f"Line '{line_id}' is suspended: resume it first.")
        return line

    @tool("read")
    def find_customer_by_phone(self, phone_number: str) -> dict[str, Any]:
        """Find a customer by a phone number. Returns the customer and their lines."""
        for line in self.db.lines.values():
            if _digits(line.phone_number) == _digits(phone_number) and _digits(phone_number):
                customer = self.db.customers[line.customer_id]
                lines = [
                    {
                        "line_id": lid,
                        "phone_number": self.db.lines[lid].phone_number,
                        "status": self.db.lines[lid].status,
                    }
                    for lid in customer.line_ids
                ]
                return {"customer_id": customer.customer_id, "name": customer.name, "lines": lines}
        raise NotFound("Customer with phone number", phone_number)

    @tool("read")
    def get_line(self, line_id: str) -> dict[str, Any]:
        """Get a line's status, plan, roaming and data usage."""
        line = self._line(line_id)
        view = line.model_dump(mode="json")
        view["data_left_gb"] = round(data_left(self.db, line), 2)
        return view

    @tool("read")
    def get_bills(self, customer_id: str) -> list[Bill]:
        """List a customer's bills."""
        if customer_id not in self.db.customers:
            raise NotFound("Customer", customer_id)
        return [b for b in self.db.bills.values() if b.customer_id == customer_id]

    @tool("read")
    def get_plans(self) -> list[Plan]:
        """List the available plans."""
        return list(self.db.plans.values())

    @tool("write")
    def pay_bill(self, bill_id: str) -> Bill:
        """Pay an overdue bill with the customer's payment method on file."""
        bill = lookup(self.db.bills, "Bill", bill_id)
        if bill.status != "overdue":
            raise Precondition(f"Bill '{bill_id}' is already paid.")
        bill.status = "paid"
        return bill

    @tool("write")
    def resume_line(self, line_id: str) -> Line:
        """Resume a suspended line. All of the customer's bills must be paid first."""
        line = self._line(line_id)
        if line.status != "suspended":
            raise Precondition(f"Line '{line_id}' is not suspended.")
        overdue = [
            b.bill_id
            for b in self.db.bills.values()
            if b.customer_id == line.customer_id and b.status == "overdue"
        ]
        if overdue:
            raise Precondition(
                f"Line '{line_id}' cannot be resumed: bill '{overdue[0]}' is overdue."
            )
        line.status = "active"
        return line

    @tool("write")
    def enable_roaming(self, line_id: str) -> Line:
        """Enable international roaming on a line."""
        line = self._active_line(line_id)
        if line.roaming_enabled:
            raise Precondition(f"Roaming is already enabled on line '{line_id}'.")
        line.roaming_enabled = True
        return line

    @tool("write")
    def add_data(self, line_id: str, gb: Annotated[int, Field(ge=1, le=10)]) -> dict[str, Any]:
        """Add extra data (1 to 10 GB) to an active line."""
        line = self._active_line(line_id)
        line.extra_data_gb += gb
        return self.get_line(line_id)

    @tool("write")
    def change_plan(self, line_id: str, plan_id: str) -> Line:
        """Move a line to another plan."""
        line = self._line(line_id)
        if plan_id not in self.db.plans:
            raise NotFound("Plan", plan_id)
        if line.plan_id == plan_id:
            raise Precondition(f"Line '{line_id}' is already on plan '{plan_id}'.")
        line.plan_id = plan_id
        return line

    # Task setup only (never offered as tools).
    @setup
    def add_bill(self, bill_id: str, customer_id: str, amount: float, status: str) -> None:
        self.db.bills[bill_id] = Bill(
            bill_id=bill_id,
            customer_id=customer_id,
            amount=amount,
            status=status,
        )

    @setup
    def suspend_line(self, line_id: str) -> None:
        self._line(line_id).status = "suspended"

    @setup
    def use_all_data(self, line_id: str) -> None:
        line = self._line(line_id)
        line.data_used_gb = float(self.db.plans[line.plan_id].data_gb)


# How the agent asks for each phone action; the scripted user recognises these and variants.
_VERBS = (
    "turn",
    "switch",
    "enable",
    "disable",
    "check",
    "restart",
    "reboot",
    "reseat",
    "reset",
    "take",
    "remove",
    "look",
    "tell",
    "open",
    "put",
    "go",
    "use",
    "run",
)
_POLITE = ("please", "can you", "could you", "would you", "try", "now ")


def _direction(clause: str) -> bool | None:
    if re.search(r"\b(off|disable|deactivate)\b", clause):
        return False
    if re.search(r"\b(on|enable|activate)\b", clause):
        return True
    return None


class PhoneTools(UserToolkit[TelecomDB]):
    """The user's phone. Its line is the one with the task's `phone_number`."""

    def __init__(self, db: TelecomDB, task: Task) -> None:
        super().__init__(db, task)
        self.device = Device()
        self.phone_number = task.scenario.known_info.get("phone_number", "")

    def _line(self) -> Line | None:
        for line in self.db.lines.values():
            if line.phone_number == self.phone_number:
                return line
        return None

    def state(self) -> dict[str, Any]:
        d = self.device
        line = self._line()
        signal = not (
            d.airplane_mode
            or not d.sim_seated
            or not d.registered
            or line is None
            or line.status != "active"
            or (d.abroad and not line.roaming_enabled)
        )
        internet = (
            signal
            and line is not None
            and d.mobile_data
            and d.apn_ok
            and data_left(self.db, line) > 0
            and (d.data_roaming or not d.abroad)
        )
        return {
            **d.model_dump(),
            "signal": "good" if signal else "none",
            "internet": bool(internet),
        }

    @staticmethod
    def _onoff(value: bool) -> str:
        return "on" if value else "off"

    @tool("read")
    def check_status(self) -> str:
        """Read the phone's status bar."""
        s = self.state()
        return (
            f"Airplane mode: {self._onoff(s['airplane_mode'])} | Signal: {s['signal']} | "
            f"SIM: {'ok' if s['sim_seated'] else 'not detected'} | "
            f"Mobile data: {self._onoff(s['mobile_data'])} | "
            f"Data roaming: {self._onoff(s['data_roaming'])} | "
            f"APN: {'ok' if s['apn_ok'] else 'invalid'} | "
            f"Internet: {'yes' if s['internet'] else 'no'}"
        )

    @tool("write")
    def set_airplane_mode(self, on: bool) -> str:
        """Turn airplane mode on or off."""
        self.device.airplane_mode = on
        return f"Airplane mode is now {self._onoff(on)}."

    @tool("write")
    def set_mobile_data(self, on: bool) -> str:
        """Turn mobile data on or off."""
        self.device.mobile_data = on
        return f"Mobile data is now {self._onoff(on)}."

    @tool("write")
    def set_data_roaming(self, on: bool) -> str:
        """Turn data roaming on or off."""
        self.device.data_roaming = on
        return f"Data roaming is now {self._onoff(on)}."

    @tool("write")
    def reseat_sim(self) -> str:
        """Take the SIM card out and put it back in."""
        self.device.sim_seated = True
        return "The SIM card is reseated."

    @tool("write")
    def reset_network(self) -> str:
        """Reset the network settings (restores the default APN)."""
        self.device.apn_ok = True
        return "Network settings are reset."

    @tool("write")
    def restart_phone(self) -> str:
        """Restart the phone."""
        line = self._line()
        self.device.registered = line is not None and line.status == "active"
        return "The phone restarted."

    @setup
    def setup_device(self, **changes: Any) -> None:
        self.device = self.device.model_copy(update=changes)

    @classmethod
    def instruction(cls, action: Action) -> str:
        """The request in words and by the tool's exact name, as τ²'s telecom manual guides
        the user (`toggle_airplane_mode()`): the agent reads the names it must not call."""
        on = action.arguments.get("on")
        flag = "true" if on else "false"
        texts = {
            "check_status": "Please check the status bar on your phone with `check_status()` "
            "and tell me what it shows.",
            "set_airplane_mode": f"Please turn {cls._onoff(bool(on))} airplane mode on your "
            f"phone: use `set_airplane_mode(on={flag})`.",
            "set_mobile_data": f"Please turn {cls._onoff(bool(on))} mobile data on your phone: "
            f"use `set_mobile_data(on={flag})`.",
            "set_data_roaming": f"Please turn {cls._onoff(bool(on))} data roaming on your "
            f"phone: use `set_data_roaming(on={flag})`.",
            "reseat_sim": "Please take the SIM card out of your phone and put it back in: use "
            "`reseat_sim()`.",
            "reset_network": "Please reset the network settings on your phone: use "
            "`reset_network()`.",
            "restart_phone": "Please restart your phone: use `restart_phone()`.",
        }
        return texts[action.name]

    @classmethod
    def _named(cls, clause: str) -> Action | None:
        """A phone tool named with its call (`set_airplane_mode(on=false)`, `reseat_sim()`)."""
        found = re.search(r"\b([a-z_]+)\(\s*(?:on\s*=\s*)?(true|false|on|off)?\s*\)", clause)
        if found is None or found.group(1) not in cls.tool_names():
            return None
        name, flag = found.groups()
        if "on" in cls.specs()[name].args_model.model_fields:
            if flag is None:
                return None
            return Action(name=name, arguments={"on": flag in ("true", "on")}, requestor="user")
        return Action(name=name, requestor="user")

    @classmethod
    def parse_requests(cls, text: str) -> list[Action]:
        actions: list[Action] = []
        for raw in re.split(r"[.!?\n;,]|\band\b|\bthen\b", text.lower()):
            clause = raw.strip()
            if not clause:
                continue
            imperative = clause.startswith(_VERBS) or any(p in clause for p in _POLITE)
            if not imperative:
                continue
            action = cls._match(clause)
            if action is not None and action not in actions:
                actions.append(action)
        return actions

    @classmethod
    def _match(cls, clause: str) -> Action | None:
        named = cls._named(clause)
        if named is not None:
            return named

        def toggle(name: str) -> Action | None:
            on = _direction(clause.replace(" on your phone", "").replace(" on the phone", ""))
            return None if on is None else Action(name=name, arguments={"on": on}, requestor="user")

        if "airplane" in clause or "flight mode" in clause:
            return toggle("set_airplane_mode")
        if "roaming" in clause:
            return toggle("set_data_roaming")
        if "mobile data" in clause or "cellular data" in clause:
            return toggle("set_mobile_data")
        if "sim" in clause.split() or "sim card" in clause:
            if re.search(r"reseat|re-seat|reinsert|re-insert|take|remove|out", clause):
                return Action(name="reseat_sim", requestor="user")
            return None
        if "reset" in clause and "network" in clause:
            return Action(name="reset_network", requestor="user")
        if re.search(r"\b(restart|reboot)\b", clause):
            return Action(name="restart_phone", requestor="user")
        if "status" in clause and re.search(r"\b(check|look|tell|read|what)\b", clause):
            return Action(name="check_status", requestor="user")
        return None
