"""Deterministic generation of the retail database and tasks (`db.json`, `tasks.json`).

Rewrite the data files with `python -m tools.regenerate retail` (from the repository); a
test checks that the committed files equal a fresh generation, so the split never drifts
silently.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from flatscore.domains.framework import Action, Ask, Task, UserScenario
from flatscore.domains.generation import fill_templates, first_tasks, round_robin, write_domain_data
from flatscore.domains.retail.models import Order, OrderItem, Product, RetailDB, User, Variant

DATA_DIR = Path(__file__).parent
DB_SEED = 4101
TASK_SEED = 4102
# The held-out extension: new users (and their orders) drawn from their own seed, and test
# tasks on them only, appended after the original tasks so that the train split and the
# first 30 test tasks stay byte-identical (the shipped adapter's training data depends on them).
EXTRA_DB_SEED = 4103
EXTRA_TASK_SEED = 4104
EXTRA_USERS = 60

FIRST = [
    "Anna",
    "Ben",
    "Carla",
    "David",
    "Elena",
    "Felix",
    "Grace",
    "Hugo",
    "Iris",
    "James",
    "Kara",
    "Leo",
    "Maya",
    "Nora",
    "Omar",
    "Paula",
    "Quinn",
    "Rosa",
    "Sam",
    "Tara",
    "Uma",
    "Victor",
    "Wendy",
    "Xavier",
    "Yara",
    "Zane",
    "Alice",
    "Bruno",
    "Chloe",
    "Diego",
    "Emma",
    "Frank",
    "Gina",
    "Henry",
    "Ivy",
    "Jonas",
    "Kim",
    "Liam",
    "Mia",
    "Noah",
    "Olga",
    "Pedro",
    "Rita",
    "Simon",
    "Tina",
    "Ugo",
    "Vera",
    "Will",
    "Zoe",
    "Adam",
]
LAST = [
    "Lee",
    "Smith",
    "Garcia",
    "Chen",
    "Novak",
    "Brown",
    "Khan",
    "Rossi",
    "Silva",
    "Meyer",
    "Kim",
    "Lopez",
    "Dubois",
    "Sato",
    "Ivanov",
    "Jones",
    "Moreau",
    "Park",
    "Costa",
    "Weber",
]
STREETS = ["Oak St", "Maple Ave", "Pine Rd", "Cedar Ln", "Elm St", "Lake Dr", "Hill Rd", "Park Ave"]
CITIES = ["Springfield", "Riverton", "Lakeside", "Fairview", "Milton", "Ashland", "Clayton"]

PRODUCTS: list[tuple[str, dict[str, list[str]], int]] = [
    ("T-Shirt", {"color": ["red", "blue"], "size": ["M", "L", "XL"]}, 19),
    ("Water Bottle", {"capacity": ["500ml", "750ml", "1l"]}, 14),
    ("Running Shoes", {"color": ["black", "white"], "size": ["8", "9", "10"]}, 89),
    ("Backpack", {"color": ["green", "grey", "black"]}, 49),
    ("Headphones", {"type": ["wired", "wireless"], "color": ["black", "white"]}, 59),
    ("Desk Lamp", {"color": ["black", "white", "silver"]}, 34),
    ("Coffee Mug", {"size": ["small", "large"], "color": ["red", "white"]}, 12),
    ("Yoga Mat", {"thickness": ["4mm", "6mm"], "color": ["purple", "blue"]}, 29),
    ("Jacket", {"size": ["S", "M", "L"], "color": ["navy", "olive"]}, 119),
    ("Sunglasses", {"style": ["aviator", "round", "square"]}, 79),
]

REASON_PHRASES = {
    "no longer needed": ["I no longer need it", "I don't need it anymore"],
    "ordered by mistake": ["I ordered it by mistake", "it was ordered by mistake"],
}


def _variants(rng: random.Random, axes: dict[str, list[str]]) -> list[dict[str, str]]:
    combos: list[dict[str, str]] = [{}]
    for axis, values in axes.items():
        combos = [{**c, axis: v} for c in combos for v in values]
    return combos


def build_db(seed: int = DB_SEED) -> RetailDB:
    rng = random.Random(seed)
    products: dict[str, Product] = {}
    next_item = 1001
    for p_index, (name, axes, base) in enumerate(PRODUCTS, start=1):
        pid = f"P{p_index:02d}"
        variants = []
        for options in _variants(rng, axes):
            price = round(base + rng.randint(0, 8) + 0.99, 2)
            variants.append(
                Variant(
                    item_id=f"I{next_item}",
                    options=options,
                    price=price,
                    available=rng.random() < 0.8,
                )
            )
            next_item += 1
        products[pid] = Product(product_id=pid, name=name, variants=variants)

    db = RetailDB(users={}, products=products, orders={})
    names = rng.sample([(f, s) for f in FIRST for s in LAST], 50)
    for first, last in names:
        _add_user(rng, db, first, last)
    return db


def extend_db(db: RetailDB, seed: int = EXTRA_DB_SEED, users: int = EXTRA_USERS) -> RetailDB:
    """A copy of `db` with `users` new users (new names, ids, zips, addresses, orders) drawn
    the same way, after the existing ones: the held-out test tasks' entities."""
    rng = random.Random(seed)
    db = db.model_copy(deep=True)
    taken = {(u.first_name, u.last_name) for u in db.users.values()}
    names = rng.sample([(f, s) for f in FIRST for s in LAST if (f, s) not in taken], users)
    for first, last in names:
        _add_user(rng, db, first, last)
    return db


def _add_user(rng: random.Random, db: RetailDB, first: str, last: str) -> None:
    """One user with 2–4 orders, numbered after the existing users and orders."""
    uid = f"U{1001 + len(db.users)}"
    zip_code = f"{rng.randint(10000, 99999)}"
    address = f"{rng.randint(1, 999)} {rng.choice(STREETS)}, {rng.choice(CITIES)}"
    user = User(
        user_id=uid,
        first_name=first,
        last_name=last,
        email=f"{first.lower()}.{last.lower()}{rng.randint(1, 99)}@example.com",
        zip=zip_code,
        address=address,
        order_ids=[],
    )
    statuses = ["pending", "processed", "delivered", "cancelled"]
    for _ in range(rng.randint(2, 4)):
        oid = f"W{1001 + len(db.orders)}"
        status = rng.choices(statuses, weights=[40, 10, 42, 8])[0]
        items = []
        for pid in sorted(rng.sample(sorted(db.products), rng.randint(1, 3))):
            product = db.products[pid]
            v = rng.choice(product.variants)
            items.append(
                OrderItem(
                    item_id=v.item_id,
                    product_id=pid,
                    name=product.name,
                    options=dict(v.options),
                    price=v.price,
                )
            )
        db.orders[oid] = Order(
            order_id=oid, user_id=uid, status=status, address=address, items=items
        )
        user.order_ids.append(oid)
    db.users[uid] = user


# --------------------------------------------------------------------------- tasks


def _label(item: OrderItem) -> str:
    return f"{item.name} ({', '.join(item.options.values())})"


def _labels(items: list[OrderItem]) -> str:
    return " and the ".join(_label(i) for i in items)


def _refund(items: list[OrderItem]) -> str:
    """What `items` refund, as the agent should say it."""
    return f"{sum(i.price for i in items):.2f}"


def _on_order(order_id: str, name: str, **arguments: object) -> list[Action]:
    """`get_order` first (the policy's look-up), then the action `name` on that order."""
    return [
        Action(name="get_order", arguments={"order_id": order_id}),
        Action(name=name, arguments={"order_id": order_id, **arguments}),
    ]


class _Builder:
    """Shared pieces of every retail task: who the user is and how they authenticate."""

    def __init__(self, db: RetailDB, rng: random.Random) -> None:
        self.db = db
        self.rng = rng

    def auth(self, user: User, by_email: bool) -> tuple[Action, dict[str, str], list[str], str]:
        if by_email:
            action = Action(name="find_user_by_email", arguments={"email": user.email})
            known = {"email": user.email}
            keys = ["email"]
            who = f"Your email is {user.email}."
        else:
            action = Action(
                name="find_user_by_name_zip",
                arguments={
                    "first_name": user.first_name,
                    "last_name": user.last_name,
                    "zip": user.zip,
                },
            )
            known = {"first_name": user.first_name, "last_name": user.last_name, "zip": user.zip}
            keys = ["first_name", "last_name", "zip"]
            who = (
                f"Your name is {user.first_name} {user.last_name} and your zip code is "
                f"{user.zip}. You do not remember your email."
            )
        return action, known, keys, who

    def orders(self, user: User, status: str) -> list[Order]:
        return [self.db.orders[o] for o in user.order_ids if self.db.orders[o].status == status]

    def pick(self, user: User, status: str) -> Order | None:
        """One of the user's orders in `status` (seeded), or None when there is none."""
        orders = self.orders(user, status)
        return self.rng.choice(orders) if orders else None


TaskParts = tuple[list[str], list[Action], list[str], str, str]
Template = Callable[[_Builder, User], TaskParts | None]


def _cancel(b: _Builder, user: User) -> TaskParts | None:
    order = b.pick(user, "pending")
    if order is None:
        return None
    reason = b.rng.choice(sorted(REASON_PHRASES))
    why = b.rng.choice(REASON_PHRASES[reason])
    refund = _refund(order.items)
    requests = [
        f"Hi, I want to cancel my order {order.order_id}, {why}.",
        f"Please cancel order {order.order_id}. {why.capitalize()}.",
        f"Can you cancel my order {order.order_id}? {why.capitalize()}.",
    ]
    actions = _on_order(order.order_id, "cancel_order", reason=reason)
    final = (
        f"Order {order.order_id} is cancelled. A refund of ${refund} goes to your original "
        "payment method."
    )
    goal = f"You want to cancel order {order.order_id} because {why}."
    return requests, actions, [refund], final, goal


def _address(b: _Builder, user: User) -> TaskParts | None:
    order = b.pick(user, "pending")
    if order is None:
        return None
    new = f"{b.rng.randint(1, 999)} {b.rng.choice(STREETS)}, {b.rng.choice(CITIES)}"
    requests = [
        f"I need to change the shipping address of order {order.order_id} to {new}.",
        f"Please ship my order {order.order_id} to {new} instead.",
        f"Hello, can you update the address on order {order.order_id}? The new one is {new}.",
    ]
    actions = _on_order(order.order_id, "change_address", address=new)
    final = f"Order {order.order_id} will now be shipped to {new}."
    goal = f"You want order {order.order_id} shipped to {new}."
    return requests, actions, [], final, goal


def _pick_return(b: _Builder, order: Order) -> list[OrderItem]:
    k = 1 if len(order.items) == 1 else b.rng.randint(1, min(2, len(order.items)))
    return sorted(b.rng.sample(order.items, k), key=lambda i: i.item_id)


def _return(b: _Builder, user: User) -> TaskParts | None:
    order = b.pick(user, "delivered")
    if order is None:
        return None
    items = _pick_return(b, order)
    what = _labels(items)
    refund = _refund(items)
    requests = [
        f"I'd like to return the {what} from order {order.order_id}.",
        f"Hi, I want to send back the {what} I got in order {order.order_id}.",
        f"Can I return the {what} from my order {order.order_id}?",
    ]
    ids = [i.item_id for i in items]
    actions = _on_order(order.order_id, "return_items", item_ids=ids)
    final = (
        f"The return for order {order.order_id} is requested. You will get ${refund} back on "
        "your original payment method."
    )
    goal = f"You want to return the {what} from order {order.order_id}."
    return requests, actions, [refund], final, goal


def _exchange_choice(b: _Builder, order: Order) -> tuple[OrderItem, Variant, str] | None:
    options = []
    for item in order.items:
        product = b.db.products[item.product_id]
        for v in product.variants:
            diff = [k for k in v.options if v.options[k] != item.options[k]]
            if v.available and len(diff) == 1:
                options.append((item, v, f"{diff[0]} {v.options[diff[0]]}"))
    return b.rng.choice(options) if options else None


def _exchange_parts(b: _Builder, order: Order) -> tuple[list[Action], str, str] | None:
    choice = _exchange_choice(b, order)
    if choice is None:
        return None
    item, new, change = choice
    actions = [
        Action(name="get_order", arguments={"order_id": order.order_id}),
        Action(name="get_product", arguments={"product_id": item.product_id}),
        Action(
            name="exchange_items",
            arguments={
                "order_id": order.order_id,
                "item_ids": [item.item_id],
                "new_item_ids": [new.item_id],
            },
        ),
    ]
    return actions, f"the {_label(item)} from order {order.order_id} for {change}", change


def _exchange(b: _Builder, user: User) -> TaskParts | None:
    for order in b.orders(user, "delivered"):
        parts = _exchange_parts(b, order)
        if parts is None:
            continue
        actions, what, change = parts
        requests = [
            f"I want to exchange {what}.",
            f"Hi, could you swap {what}, please?",
            f"Please exchange {what}.",
        ]
        final = f"The exchange for order {order.order_id} is requested ({change})."
        return requests, actions, [], final, f"You want to exchange {what}."
    return None


def _status(b: _Builder, user: User) -> TaskParts | None:
    order = b.db.orders[b.rng.choice(user.order_ids)]
    requests = [
        f"What is the status of my order {order.order_id}?",
        f"Hi, can you tell me where my order {order.order_id} stands?",
        f"I'd like to know the status of order {order.order_id}.",
    ]
    actions = [Action(name="get_order", arguments={"order_id": order.order_id})]
    final = f"Order {order.order_id} is {order.status}."
    goal = f"You want to know the status of order {order.order_id}."
    return requests, actions, [order.status], final, goal


def _cancel_two(b: _Builder, user: User) -> TaskParts | None:
    pending = b.orders(user, "pending")
    if len(pending) < 2:
        return None
    first, second = sorted(b.rng.sample(pending, 2), key=lambda o: o.order_id)
    reason = b.rng.choice(sorted(REASON_PHRASES))
    why = b.rng.choice(REASON_PHRASES[reason]).replace(" it", " them")
    ids = f"{first.order_id} and {second.order_id}"
    refunds = [_refund(o.items) for o in (first, second)]
    requests = [
        f"Please cancel my orders {ids}, {why}.",
        f"I want to cancel both {ids}. {why.capitalize()}.",
        f"Hi, can you cancel orders {ids}? {why.capitalize()}.",
    ]
    actions = []
    for order in (first, second):
        actions += _on_order(order.order_id, "cancel_order", reason=reason)
    final = (
        f"Orders {ids} are cancelled. Refunds of ${refunds[0]} and ${refunds[1]} go to your "
        "original payment method."
    )
    return requests, actions, refunds, final, f"You want to cancel orders {ids} because {why}."


def _cancel_and_return(b: _Builder, user: User) -> TaskParts | None:
    pending, delivered = b.orders(user, "pending"), b.orders(user, "delivered")
    if not pending or not delivered:
        return None
    a, d = b.rng.choice(pending), b.rng.choice(delivered)
    reason = b.rng.choice(sorted(REASON_PHRASES))
    why = b.rng.choice(REASON_PHRASES[reason])
    items = _pick_return(b, d)
    what = _labels(items)
    refunds = [_refund(a.items), _refund(items)]
    requests = [
        f"Please cancel order {a.order_id} ({why}) and return the {what} from order {d.order_id}.",
        f"I have two things: cancel order {a.order_id}, {why}, and return the {what} from "
        f"order {d.order_id}.",
    ]
    actions = [
        *_on_order(a.order_id, "cancel_order", reason=reason),
        *_on_order(d.order_id, "return_items", item_ids=[i.item_id for i in items]),
    ]
    final = (
        f"Order {a.order_id} is cancelled (refund ${refunds[0]}) and the return for order "
        f"{d.order_id} is requested (refund ${refunds[1]})."
    )
    goal = (
        f"You want to cancel order {a.order_id} because {why}, and to return the {what} "
        f"from order {d.order_id}."
    )
    return requests, actions, refunds, final, goal


def _return_and_exchange(b: _Builder, user: User) -> TaskParts | None:
    delivered = b.orders(user, "delivered")
    for r_order in delivered:
        for x_order in delivered:
            if r_order.order_id == x_order.order_id:
                continue
            parts = _exchange_parts(b, x_order)
            if parts is None:
                continue
            x_actions, x_what, change = parts
            items = _pick_return(b, r_order)
            what = _labels(items)
            refund = _refund(items)
            requests = [
                f"I want to return the {what} from order {r_order.order_id}, and exchange "
                f"{x_what}.",
                f"Two requests: return the {what} from order {r_order.order_id}, and "
                f"exchange {x_what}.",
            ]
            actions = [
                *_on_order(r_order.order_id, "return_items", item_ids=[i.item_id for i in items]),
                *x_actions,
            ]
            final = (
                f"The return for order {r_order.order_id} is requested (refund ${refund}) and "
                f"the exchange for order {x_order.order_id} is requested ({change})."
            )
            goal = (
                f"You want to return the {what} from order {r_order.order_id} and exchange "
                f"{x_what}."
            )
            return requests, actions, [refund], final, goal
    return None


def _refuse_cancel(b: _Builder, user: User) -> TaskParts | None:
    others = [b.db.orders[o] for o in user.order_ids]
    others = [o for o in others if o.status in ("delivered", "processed")]
    if not others:
        return None
    order = b.rng.choice(others)
    requests = [
        f"Please cancel my order {order.order_id}, I no longer need it.",
        f"I want to cancel order {order.order_id}.",
        f"Hi, can you cancel order {order.order_id} for me?",
    ]
    actions = [Action(name="get_order", arguments={"order_id": order.order_id})]
    final = (
        f"Order {order.order_id} is {order.status}, so it cannot be cancelled: only pending "
        "orders can be cancelled."
    )
    goal = (
        f"You want to cancel order {order.order_id}. If the agent says it cannot be "
        "cancelled, accept that."
    )
    return requests, actions, [order.status], final, goal


TEMPLATES: list[tuple[str, Template, int]] = [
    ("cancel", _cancel, 12),
    ("address", _address, 10),
    ("return", _return, 12),
    ("exchange", _exchange, 10),
    ("status", _status, 8),
    ("cancel_two", _cancel_two, 8),
    ("cancel_and_return", _cancel_and_return, 8),
    ("return_and_exchange", _return_and_exchange, 6),
    ("refuse_cancel", _refuse_cancel, 8),
]


# Test tasks per template after the extension: 114 in all (τ²'s retail count), balanced
# (12 or 13 each; the 13s go to the templates with the most agent tool calls).
TEST_COUNTS = {
    "cancel": 13,
    "address": 12,
    "return": 13,
    "exchange": 13,
    "status": 12,
    "cancel_two": 13,
    "cancel_and_return": 13,
    "return_and_exchange": 13,
    "refuse_cancel": 12,
}


def _instantiate(
    builder: _Builder, template: str, make: Template, users: list[User], first: int, count: int
) -> list[Task]:
    """`count` tasks of one template, numbered from `first`, each for another user of
    `users` (in order); the split is set by the caller."""

    def build(user: User, index: int) -> dict[str, Any] | None:
        parts = make(builder, user)
        if parts is None:
            return None
        requests, actions, communicate, final, goal = parts
        auth, known, keys, who = builder.auth(user, by_email=index % 2 == 0)
        instructions = (
            f"You are {user.first_name} {user.last_name}, a customer of an online shop. "
            f"{goal} {who} Only give this information when asked."
        )
        return {
            "scenario": UserScenario(
                requests=requests, known_info=known, instructions=instructions
            ),
            "actions": [auth, *actions],
            "communicate": communicate,
            "asks": [Ask(before=0, keys=keys)],
            "final_message": final,
        }

    return first_tasks("retail", template, users, count, first, build)


def build_tasks(db: RetailDB, seed: int = TASK_SEED) -> list[Task]:
    """Every template instantiated for distinct users; every third task goes to test."""
    rng = random.Random(seed)
    builder = _Builder(db, rng)
    per_template = fill_templates(
        rng,
        [(template, make) for template, make, _ in TEMPLATES],
        lambda: list(db.users.values()),
        {template: count for template, _, count in TEMPLATES},
        partial(_instantiate, builder),
    )
    tasks: list[Task] = []
    for made in per_template:
        for index, task in enumerate(made):
            task.split = "test" if index % 3 == 0 else "train"
            tasks.append(task)
    return tasks


def build_test_tasks(
    db: RetailDB, base: list[Task], new_users: list[str], seed: int = EXTRA_TASK_SEED
) -> list[Task]:
    """Held-out test tasks on the new users only, so that every template reaches its
    `TEST_COUNTS`; ids continue each template's numbering; interleaved round-robin over the
    templates, so that any prefix of the test split covers them evenly."""
    rng = random.Random(seed)
    made = {t: [task for task in base if task.template == t] for t, _, _ in TEMPLATES}
    missing = {t: TEST_COUNTS[t] - sum(task.split == "test" for task in made[t]) for t in made}
    return round_robin(
        fill_templates(
            rng,
            [(template, make) for template, make, _ in TEMPLATES],
            lambda: [db.users[u] for u in new_users],
            missing,
            partial(_instantiate, _Builder(db, rng)),
            first={t: len(tasks) for t, tasks in made.items()},
        )
    )


def write_data(directory: Path = DATA_DIR) -> None:
    base_db = build_db()
    base = build_tasks(base_db)
    db = extend_db(base_db)
    new_users = [u for u in db.users if u not in base_db.users]
    write_domain_data(directory, db, [*base, *build_test_tasks(db, base, new_users)])
