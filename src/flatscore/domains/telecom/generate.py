"""Deterministic generation of the telecom database and tasks (`db.json`, `tasks.json`).

Rewrite the data files with `python -m tools.regenerate telecom` (from the repository); a
test checks that the committed files equal a fresh generation.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from flatscore.domains.framework import Action, Ask, DeviceAssertion, Split, Task, UserScenario
from flatscore.domains.generation import fill_templates, first_tasks, round_robin, write_domain_data
from flatscore.domains.telecom.models import Bill, Customer, Line, Plan, TelecomDB

DATA_DIR = Path(__file__).parent
DB_SEED = 4201
TASK_SEED = 4202
# The held-out customers (lines, numbers, bills) come from their own seed; every test task
# is on them and every train task on the original customers, so no test task names a
# customer, line, number or bill of a train task.
EXTRA_DB_SEED = 4203
EXTRA_TASK_SEED = 4204

NAMES = [
    "Anna Lee",
    "Ben Smith",
    "Carla Garcia",
    "David Chen",
    "Elena Novak",
    "Felix Brown",
    "Grace Khan",
    "Hugo Rossi",
    "Iris Silva",
    "James Meyer",
    "Kara Kim",
    "Leo Lopez",
    "Maya Dubois",
    "Nora Sato",
    "Omar Ivanov",
    "Paula Jones",
    "Quinn Moreau",
    "Rosa Park",
    "Sam Costa",
    "Tara Weber",
    "Uma Patel",
    "Victor Hale",
    "Wendy Ortiz",
    "Xavier Ruiz",
    "Yara Haddad",
    "Zane Fischer",
    "Alice Wong",
    "Bruno Keller",
    "Chloe Martin",
    "Diego Reyes",
    "Emma Laurent",
    "Frank Olsen",
    "Gina Russo",
    "Henry Adams",
    "Ivy Tran",
    "Jonas Berg",
    "Kim Nguyen",
    "Liam Walsh",
    "Mia Fontaine",
    "Noah Schmidt",
]
EXTRA_NAMES = [
    "Olivia Grant",
    "Pablo Vega",
    "Queenie Hart",
    "Raj Mehta",
    "Sofia Bianchi",
    "Tomas Novak",
    "Ursula Lind",
    "Vince Carter",
    "Willa Stone",
    "Ximena Cruz",
    "Yusuf Aydin",
    "Zara Malik",
    "Aaron Fox",
    "Bella Moretti",
    "Caleb Ward",
    "Daria Popescu",
    "Ethan Brooks",
    "Fatima Idris",
    "George Hill",
    "Hana Suzuki",
    "Isaac Bell",
    "Julia Kovacs",
    "Karl Jensen",
    "Lena Horvat",
    "Marco Greco",
    "Nadia Petrov",
    "Oscar Lund",
    "Priya Rao",
    "Ruben Dias",
    "Selma Nilsson",
    "Theo Blanc",
    "Vera Sokol",
    "Wade Turner",
    "Yasmin Aziz",
    "Zoltan Farkas",
    "Amara Okafor",
    "Boris Volkov",
    "Celine Roux",
    "Dmitri Orlov",
    "Elsa Holm",
]
PLANS = [
    ("P1", "Basic", 5, 20.0),
    ("P2", "Plus", 15, 35.0),
    ("P3", "Max", 50, 50.0),
    ("P4", "Unlimited", 1000, 65.0),
]

OK = [DeviceAssertion(field="signal", value="good"), DeviceAssertion(field="internet", value=True)]


def build_db(seed: int = DB_SEED) -> TelecomDB:
    rng = random.Random(seed)
    plans = {pid: Plan(plan_id=pid, name=n, data_gb=gb, price=p) for pid, n, gb, p in PLANS}
    db = TelecomDB(plans=plans, customers={}, lines={}, bills={})
    numbers = rng.sample(range(1000, 10000), 80)
    for name in NAMES:
        _add_customer(rng, db, name, numbers)
    return db


def extend_db(db: TelecomDB, seed: int = EXTRA_DB_SEED) -> TelecomDB:
    """A copy of `db` with the `EXTRA_NAMES` customers (new ids, lines, phone numbers and
    bills) drawn the same way, after the existing ones: the held-out test tasks' entities."""
    rng = random.Random(seed)
    db = db.model_copy(deep=True)
    taken = {int(line.phone_number.removeprefix("555-")) for line in db.lines.values()}
    numbers = rng.sample([n for n in range(1000, 10000) if n not in taken], 2 * len(EXTRA_NAMES))
    for name in EXTRA_NAMES:
        _add_customer(rng, db, name, numbers)
    return db


def _add_customer(rng: random.Random, db: TelecomDB, name: str, numbers: list[int]) -> None:
    """One customer with 1–2 lines (numbers popped from `numbers`) and 1–2 paid bills,
    numbered after the existing ones."""
    cid = f"C{1001 + len(db.customers)}"
    line_ids = []
    for _ in range(1 if rng.random() < 0.75 else 2):
        lid = f"L{1001 + len(db.lines)}"
        plan = rng.choice(sorted(db.plans))
        used = round(rng.uniform(0, db.plans[plan].data_gb * 0.8), 1) if plan != "P4" else 7.5
        db.lines[lid] = Line(
            line_id=lid,
            phone_number=f"555-{numbers.pop()}",
            customer_id=cid,
            plan_id=plan,
            data_used_gb=used,
        )
        line_ids.append(lid)
    db.customers[cid] = Customer(customer_id=cid, name=name, line_ids=line_ids)
    for _ in range(rng.randint(1, 2)):
        bid = f"B{1001 + len(db.bills)}"
        amount = sum(db.plans[db.lines[lid].plan_id].price for lid in line_ids)
        db.bills[bid] = Bill(bill_id=bid, customer_id=cid, amount=amount, status="paid")


def _user(action: str, **arguments: Any) -> Action:
    return Action(name=action, arguments=arguments, requestor="user")


def _agent(action: str, **arguments: Any) -> Action:
    return Action(name=action, arguments=arguments)


class Parts:
    """What a template returns for one customer line."""

    def __init__(
        self,
        requests: list[str],
        goal: str,
        actions: list[Action],
        *,
        setup: list[Action] | None = None,
        asks: list[Ask] | None = None,
        assertions: list[DeviceAssertion] | None = None,
        communicate: list[str] | None = None,
        final: str = "",
    ) -> None:
        self.requests = requests
        self.goal = goal
        self.actions = actions
        self.setup = setup or []
        self.asks = asks or []
        self.assertions = assertions if assertions is not None else OK
        self.communicate = communicate or []
        self.final = final


Template = Callable[[random.Random, TelecomDB, Line], Parts | None]
NO_SERVICE = [
    "My phone has no service.",
    "Hi, my phone shows no signal and I can't make calls.",
    "Hello, I have no service on my phone, can you help?",
]
NO_INTERNET = [
    "My mobile internet doesn't work.",
    "Hi, I can't get online on my phone, the internet isn't working.",
    "Hello, my phone has signal but no internet.",
]
CHECK = _user("check_status")


def _overdue_bill(line: Line, amount: float) -> tuple[str, str, Action]:
    """The overdue bill a task's setup adds for `line`'s customer: its id, its amount as
    the agent should say it, and the setup action that adds it."""
    bid = f"B9{line.line_id[1:]}"
    add = _agent(
        "add_bill", bill_id=bid, customer_id=line.customer_id, amount=amount, status="overdue"
    )
    return bid, f"{amount:.2f}", add


def _unpaid_bill(rng: random.Random, db: TelecomDB, line: Line) -> tuple[str, str, Action]:
    """An overdue bill of the line's plan price plus 1–20 (`_overdue_bill`)."""
    return _overdue_bill(line, round(db.plans[line.plan_id].price + rng.randint(1, 20), 2))


def _suspended(rng: random.Random, db: TelecomDB, line: Line) -> Parts | None:
    cid = line.customer_id
    amount = sum(db.plans[db.lines[lid].plan_id].price for lid in db.customers[cid].line_ids)
    bid, money, add_bill = _overdue_bill(line, amount)
    return Parts(
        NO_SERVICE,
        "Your phone has no service. You agree to pay any overdue bill.",
        [
            CHECK,
            _agent("find_customer_by_phone", phone_number=line.phone_number),
            _agent("get_bills", customer_id=cid),
            _agent("pay_bill", bill_id=bid),
            _agent("resume_line", line_id=line.line_id),
            _user("restart_phone"),
        ],
        setup=[
            add_bill,
            _agent("suspend_line", line_id=line.line_id),
            Action(name="setup_device", arguments={"registered": False}, requestor="user"),
        ],
        asks=[Ask(before=1, keys=["phone_number"])],
        communicate=[money],
        final=f"I paid your overdue bill of ${money} and your line {line.line_id} is active again.",
    )


def _roaming(rng: random.Random, db: TelecomDB, line: Line) -> Parts | None:
    return Parts(
        [
            "I'm traveling abroad and my phone has no service.",
            "Hi, I just arrived abroad and I have no signal.",
            "Hello, my phone doesn't work since I landed abroad.",
        ],
        "You are abroad and your phone has no service. You want it to work, internet included.",
        [
            CHECK,
            _agent("find_customer_by_phone", phone_number=line.phone_number),
            _agent("enable_roaming", line_id=line.line_id),
            _user("set_data_roaming", on=True),
        ],
        setup=[Action(name="setup_device", arguments={"abroad": True}, requestor="user")],
        asks=[Ask(before=1, keys=["phone_number"])],
        final="Roaming is enabled on your line and your phone is set up for it.",
    )


def _refuel(line: Line, top: TopUp) -> Parts:
    return Parts(
        [
            f"I ran out of data. Please add {top.gb} GB to my line.",
            f"Hi, my data is used up, can you add {top.gb} GB?",
            f"Hello, I need {top.gb} GB of extra data, I've used all of mine.",
        ],
        f"You used up your data and want {top.gb} GB of extra data on your line.",
        top.account,
        setup=[top.use_up],
        asks=[Ask(before=0, keys=["phone_number"])],
        final=f"I added {top.gb} GB of data to your line {line.line_id}.",
    )


def _change_plan(rng: random.Random, db: TelecomDB, line: Line) -> Parts | None:
    plan = db.plans[rng.choice([p for p in sorted(db.plans) if p != line.plan_id])]
    price = f"{plan.price:.2f}"
    return Parts(
        [
            f"I want to switch my line to the {plan.name} plan.",
            f"Hi, please move me to the {plan.name} plan.",
            f"Hello, can I change my plan to {plan.name}?",
        ],
        f"You want your line on the {plan.name} plan, and to know its monthly price.",
        [
            _agent("find_customer_by_phone", phone_number=line.phone_number),
            _agent("get_plans"),
            _agent("change_plan", line_id=line.line_id, plan_id=plan.plan_id),
        ],
        asks=[Ask(before=0, keys=["phone_number"])],
        assertions=[],
        communicate=[price],
        final=f"Your line {line.line_id} is now on the {plan.name} plan, ${price} per month.",
    )


def _bill_info(rng: random.Random, db: TelecomDB, line: Line) -> Parts | None:
    bid, money, add_bill = _unpaid_bill(rng, db, line)
    return Parts(
        [
            "How much do I owe? I think I have an unpaid bill.",
            "Hi, do I have an overdue bill? How much is it?",
            "Hello, I'd like to know the amount of my unpaid bill.",
        ],
        "You want to know the amount of your overdue bill. You do not want to pay it now.",
        [
            _agent("find_customer_by_phone", phone_number=line.phone_number),
            _agent("get_bills", customer_id=line.customer_id),
        ],
        setup=[add_bill],
        asks=[Ask(before=0, keys=["phone_number"])],
        assertions=[],
        communicate=[money],
        final=f"You have an overdue bill of ${money} (bill {bid}).",
    )


def _plans_info(rng: random.Random, db: TelecomDB, line: Line) -> Parts | None:
    plans = list(db.plans.values())
    if rng.random() < 0.5:
        plan = min(plans, key=lambda p: p.price)
        requests = ["What is your cheapest plan?", "Hi, which plan costs the least?"]
        goal = "You want to know the name and price of the cheapest plan."
    else:
        plan = max(plans, key=lambda p: p.data_gb)
        requests = ["Which plan has the most data?", "Hi, what's your plan with the most data?"]
        goal = "You want to know the name and price of the plan with the most data."
    price = f"{plan.price:.2f}"
    return Parts(
        requests,
        goal,
        [_agent("get_plans")],
        assertions=[],
        communicate=[plan.name, price],
        final=f"That is the {plan.name} plan, at ${price} per month.",
    )


class TopUp(NamedTuple):
    """The account half of a task whose internet needs data: the line's data is used up
    (`use_up`, a setup action) and the user wants `gb` more (the agent's `account` actions)."""

    gb: int
    use_up: Action
    account: list[Action]


def _data_top_up(make: Callable[[Line, TopUp], Parts]) -> Template:
    """A template on a line whose data is used up and topped up (`TopUp`); none on an
    unlimited line."""

    def template(rng: random.Random, db: TelecomDB, line: Line) -> Parts | None:
        if line.plan_id == "P4":
            return None
        gb = rng.randint(1, 5)
        actions = [
            _agent("find_customer_by_phone", phone_number=line.phone_number),
            _agent("get_line", line_id=line.line_id),
            _agent("add_data", line_id=line.line_id, gb=gb),
        ]
        return make(line, TopUp(gb, _agent("use_all_data", line_id=line.line_id), actions))

    return template


def _device_and_data(
    problem: dict[str, Any], fixes: list[Action], complaint: str, goal: str
) -> Template:
    """A phone problem (fixed by the user's `fixes`) on a line whose data is also used up
    (fixed by the agent): internet needs both, so no task is solved by the phone alone."""

    def make(line: Line, top: TopUp) -> Parts:
        return Parts(
            [
                f"{complaint} I may have used up my data too: if so, please add {top.gb} GB.",
                f"Hi, {complaint[0].lower()}{complaint[1:]} If my data ran out, I'd like "
                f"{top.gb} GB more.",
            ],
            f"{goal} You may also have used up your data; if so, you want {top.gb} GB of extra "
            "data on your line.",
            [CHECK, *fixes, *top.account],
            setup=[top.use_up, Action(name="setup_device", arguments=problem, requestor="user")],
            asks=[Ask(before=1 + len(fixes), keys=["phone_number"])],
            final=f"Your phone is fixed and I added {top.gb} GB of data to your line "
            f"{line.line_id}.",
        )

    return _data_top_up(make)


def _airplane_abroad(rng: random.Random, db: TelecomDB, line: Line) -> Parts | None:
    """Airplane mode on, abroad without roaming: the user and the agent each fix a part."""
    return Parts(
        [
            "I'm abroad and my phone has no service at all.",
            "Hi, I'm traveling abroad and I have no signal on my phone.",
        ],
        "You are abroad and your phone has no service. You want it to work, internet included.",
        [
            CHECK,
            _user("set_airplane_mode", on=False),
            _agent("find_customer_by_phone", phone_number=line.phone_number),
            _agent("enable_roaming", line_id=line.line_id),
            _user("set_data_roaming", on=True),
        ],
        setup=[
            Action(
                name="setup_device",
                arguments={"airplane_mode": True, "abroad": True},
                requestor="user",
            )
        ],
        asks=[Ask(before=2, keys=["phone_number"])],
        final="Roaming is enabled on your line and your phone is set up for it.",
    )


def _sim_and_bill(rng: random.Random, db: TelecomDB, line: Line) -> Parts | None:
    """SIM not seated, and the user asks about an overdue bill (the amount is only in the
    agent's records)."""
    bid, money, add_bill = _unpaid_bill(rng, db, line)
    return Parts(
        [
            "My phone has no service. And do I have an unpaid bill? How much is it?",
            "Hi, my phone shows no signal, and I'd also like to know how much I owe.",
        ],
        "Your phone has no service. You also want to know the amount of your overdue bill; "
        "you do not want to pay it now.",
        [
            CHECK,
            _user("reseat_sim"),
            _agent("find_customer_by_phone", phone_number=line.phone_number),
            _agent("get_bills", customer_id=line.customer_id),
        ],
        setup=[
            add_bill,
            Action(name="setup_device", arguments={"sim_seated": False}, requestor="user"),
        ],
        asks=[Ask(before=2, keys=["phone_number"])],
        communicate=[money],
        final=f"Your phone has service again. You have an overdue bill of ${money} (bill {bid}).",
    )


# Every template needs agent tool calls (a phone-only task is solved by every arm, so it
# says nothing about the agent): the five device templates pair a phone problem with an
# account-side one.
TEMPLATES: list[tuple[str, Template]] = [
    ("airplane", _airplane_abroad),
    (
        "mobile_data",
        _device_and_data(
            {"mobile_data": False},
            [_user("set_mobile_data", on=True)],
            "My mobile internet doesn't work.",
            "Your phone's internet does not work.",
        ),
    ),
    ("sim", _sim_and_bill),
    (
        "apn",
        _device_and_data(
            {"apn_ok": False},
            [_user("reset_network")],
            "My phone has signal but no internet.",
            "Your phone's internet does not work.",
        ),
    ),
    (
        "airplane_data",
        _device_and_data(
            {"airplane_mode": True, "mobile_data": False},
            [_user("set_airplane_mode", on=False), _user("set_mobile_data", on=True)],
            "My phone has no service and no internet.",
            "Your phone has no service and no internet.",
        ),
    ),
    ("suspended", _suspended),
    ("roaming", _roaming),
    ("refuel", _data_top_up(_refuel)),
    ("change_plan", _change_plan),
    ("bill_info", _bill_info),
    ("plans_info", _plans_info),
]

# Train tasks per template, on the original customers only (50 in all).
TRAIN_COUNTS = {
    "airplane": 5,
    "mobile_data": 5,
    "sim": 5,
    "apn": 4,
    "airplane_data": 4,
    "suspended": 6,
    "roaming": 5,
    "refuel": 5,
    "change_plan": 5,
    "bill_info": 4,
    "plans_info": 2,
}
# Test tasks per template, on the held-out customers only: 114 in all (τ²'s telecom count),
# balanced (10–11; 11 for the four with the longest gold solutions).
TEST_COUNTS = {
    "airplane": 11,
    "mobile_data": 11,
    "sim": 10,
    "apn": 10,
    "airplane_data": 11,
    "suspended": 11,
    "roaming": 10,
    "refuel": 10,
    "change_plan": 10,
    "bill_info": 10,
    "plans_info": 10,
}


def _instantiate(
    rng: random.Random,
    db: TelecomDB,
    template: str,
    make: Template,
    lines: list[Line],
    first: int,
    count: int,
) -> list[Task]:
    """`count` tasks of one template, numbered from `first`, each on another line of
    `lines` (in order); the split is set by the caller."""

    def build(line: Line, index: int) -> dict[str, Any] | None:
        parts = make(rng, db, line)
        if parts is None:
            return None
        name = db.customers[line.customer_id].name
        instructions = (
            f"You are {name}, a mobile phone customer. {parts.goal} Your phone number is "
            f"{line.phone_number}; give it only when asked. You can act on your phone with "
            "your tools, but only when the agent asks you to."
        )
        known = {"phone_number": line.phone_number, "name": name}
        return {
            "scenario": UserScenario(
                requests=parts.requests, known_info=known, instructions=instructions
            ),
            "setup": parts.setup,
            "actions": parts.actions,
            "device_assertions": parts.assertions,
            "communicate": parts.communicate,
            "asks": parts.asks,
            "final_message": parts.final,
        }

    return first_tasks("telecom", template, lines, count, first, build)


def build_split(
    db: TelecomDB,
    line_ids: list[str],
    counts: dict[str, int],
    split: Split,
    seed: int,
    first: dict[str, int] | None = None,
) -> list[Task]:
    """`counts[template]` tasks of every template on the lines `line_ids` only (each task of a
    template on another line), numbered from `first[template]`, interleaved round-robin over
    the templates so that any prefix of the split covers them evenly."""
    rng = random.Random(seed)
    per_template = fill_templates(
        rng,
        TEMPLATES,
        lambda: [db.lines[lid] for lid in line_ids],
        counts,
        partial(_instantiate, rng, db),
        first,
    )
    for tasks in per_template:
        for task in tasks:
            task.split = split
    return round_robin(per_template)


def write_data(directory: Path = DATA_DIR) -> None:
    """Train tasks on the original customers, test tasks on the held-out ones: no test task
    names a record any train task names."""
    base_db = build_db()
    db = extend_db(base_db)
    old = list(base_db.lines)
    new = [lid for lid in db.lines if lid not in base_db.lines]
    train = build_split(db, old, TRAIN_COUNTS, "train", TASK_SEED)
    test = build_split(db, new, TEST_COUNTS, "test", EXTRA_TASK_SEED, first=TRAIN_COUNTS)
    write_domain_data(directory, db, [*train, *test])
