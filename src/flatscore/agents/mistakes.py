"""Planted mistakes, named by the analysis' channels: one planter for the training-data oracle
(`slip_rate`) and the embedded model's recovery data.

A mistake is a failing call made before gold action `before`, followed by a recovery: the
gold step itself (the corrected call; for `role_confusion` the request to the user), or,
when the wrong value was one the user gave, a clarifying question first. Every candidate is
checked on a scratch environment (the gold actions before it replayed on a fresh copy): it
must fail, with the environment's error kind its channel implies, so a planted mistake never
changes the world and the episode can still succeed. Training data and the oracle only:
evaluation never plants anything.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from flatscore.domains.framework import Action, Domain, Environment, Task
from flatscore.episode import ToolCall

MISTAKE_CHANNELS: tuple[str, ...] = (
    "role_confusion",
    "near_miss",
    "invented",
    "not_a_name",
    "bad_arguments",
    "entity_not_found",
    "precondition",
)
"""The channels a mistake can be planted in (docs/analysis.md "Definitions"); the first
four are unknown names, which the environment answers `Error: Tool 'x' not found.`"""

ENV_KIND = {
    "role_confusion": "unknown_tool",
    "near_miss": "unknown_tool",
    "invented": "unknown_tool",
    "not_a_name": "unknown_tool",
    "bad_arguments": "bad_arguments",
    "entity_not_found": "entity_not_found",
    "precondition": "precondition",
}

# Plausible other names a small model produces for a tool; far (edit distance > 3) from
# every real name, so that no near-miss rule claims them.
INVENTED = {
    "find_user_by_email": ["lookup_user", "search_customer"],
    "find_user_by_name_zip": ["search_user", "lookup_customer"],
    "get_order": ["order_status", "fetch_purchase"],
    "get_product": ["product_info", "lookup_item"],
    "cancel_order": ["delete_order", "void_purchase"],
    "change_address": ["update_shipping", "modify_address"],
    "return_items": ["process_refund", "send_back"],
    "exchange_items": ["swap_items", "replace_product"],
    "find_customer_by_phone": ["lookup_phone", "search_account"],
    "get_line": ["line_status", "check_subscription"],
    "get_bills": ["list_invoices", "billing_history"],
    "get_plans": ["show_offers", "list_tariffs"],
    "pay_bill": ["make_payment", "settle_invoice"],
    "resume_line": ["reactivate_line", "unblock_number"],
    "enable_roaming": ["activate_international", "turn_on_roaming"],
    "add_data": ["purchase_gigabytes", "top_up"],
    "change_plan": ["switch_tariff", "upgrade_subscription"],
}
# What a clarifying question asks for when a value the user gave names no record.
ASK_AGAIN = {k: ["first_name", "last_name", "zip"] for k in ("first_name", "last_name", "zip")}
_ID = re.compile(r"\b[A-Z]{1,2}\d{3,}\b")


@dataclass(frozen=True)
class Mistake:
    """A failing call before gold action `before`, in `channel`; `ask` names the scenario
    keys the agent asks for again before the corrected call (a clarifying question)."""

    before: int
    channel: str
    call: ToolCall
    ask: list[str] = field(default_factory=list)
    repeat: int = 1  # how many times the failing call is made before the recovery


def _near_misses(name: str) -> list[str]:
    """Plural, case, separator and one-letter variants of a real name."""
    parts = name.split("_")
    return [
        name[:-1] if name.endswith("s") else name + "s",
        parts[0] + "".join(p.title() for p in parts[1:]),
        name.replace("_", "-"),
        name.replace("_", ""),
        name[:-2] + name[-1] + name[-2],
    ]


def _not_a_name(action: Action) -> str:
    """Text or arguments in the name slot."""
    values = [str(v) for v in action.arguments.values()]
    if values:
        return f"{action.name} {values[0]}"
    return f"{action.name.replace('_', ' ')}"


def _corrupt(value: str, rng: random.Random) -> str:
    """A value that looks right but names no record (a digit added, changed or dropped)."""
    digits = [i for i, ch in enumerate(value) if ch.isdigit()]
    if not digits or rng.random() < 0.4:
        return value + str(rng.randint(0, 9))
    i = rng.choice(digits)
    return value[:i] + str((int(value[i]) + rng.randint(1, 9)) % 10) + value[i + 1 :]


def _bad_arguments(action: Action, rng: random.Random) -> list[dict[str, Any] | str]:
    """A required argument missing, one renamed, a value of the wrong type."""
    args = action.arguments
    out: list[dict[str, Any] | str] = []
    if args:
        key = rng.choice(sorted(args))
        out.append({k: v for k, v in args.items() if k != key})
        if key != "id":
            out.append({("id" if k == key else k): v for k, v in args.items()})
        value = args[key]
        out.append({**args, key: [value] if isinstance(value, str) else str(value) + " GB"})
    else:
        out.append({"query": "all"})
    return out


# Argument names a small model adds that no tool takes (seen on held-out tasks: `user_id` on
# `get_order`, `refund` on `return_items`, `item_ids` on `get_order`).
EXTRA_KEYS = ("user_id", "item_ids", "refund", "status", "reason", "customer_id", "amount")


def _extra_argument(action: Action, results: list[str], rng: random.Random) -> dict[str, Any]:
    """The right arguments plus one the tool does not take, valued from the conversation."""
    key = rng.choice([k for k in EXTRA_KEYS if k not in action.arguments])
    seen = sorted({m for text in results for m in _ID.findall(text)})
    value: Any = rng.choice(seen) if seen and key.endswith("_id") else "yes"
    if key == "item_ids":
        value = [rng.choice(seen)] if seen else ["I1000"]
    elif key in ("refund", "amount"):
        value = round(rng.uniform(10, 120), 2)
    return {**action.arguments, key: value}


def _bare_value(action: Action) -> str | None:
    """A value the user gave typed into the name slot ('Xavier', 'Headphones')."""
    for value in action.arguments.values():
        if isinstance(value, str) and value[:1].isupper() and value.replace(" ", "").isalpha():
            return value
    return None


def _seen_ids(results: list[str], value: str) -> list[str]:
    """Record ids in earlier results with the same prefix as `value`, other than it."""
    prefix = re.match(r"[A-Z]+", value)
    found = sorted({m for text in results for m in _ID.findall(text)})
    return [m for m in found if prefix and m.startswith(prefix.group()) and m != value]


class _Scratch:
    """A task's environment advanced through its gold actions, where candidates are tried:
    a failed call changes nothing, so one copy serves every candidate (rebuilt only after
    one that succeeded). The results of the gold actions so far are where precondition
    candidates find other record ids."""

    def __init__(self, domain: Domain[Any], task: Task) -> None:
        self.domain, self.task = domain, task
        self._rebuild(0)

    def _rebuild(self, index: int) -> None:
        self.env: Environment = self.domain.new_environment(self.task)
        self.results = [self.env.apply(a) for a in self.task.actions[:index]]

    def advance_to(self, index: int) -> None:
        if index < len(self.results):
            self._rebuild(index)
        for action in self.task.actions[len(self.results) : index]:
            self.results.append(self.env.apply(action))

    def fails_as(self, call: ToolCall, kind: str) -> bool:
        result = self.env.execute(call)
        if not result.error:
            self._rebuild(len(self.results))
        return result.error and result.error_kind == kind


def _candidates(
    domain: Domain[Any],
    task: Task,
    index: int,
    rng: random.Random,
    scratch: _Scratch,
    natural: bool = False,
) -> list[Mistake]:
    """Every candidate mistake before gold action `index`, checked to fail in its channel.
    `natural` adds the kinds the trained reference made on its own on held-out tasks (an
    argument no tool takes, a real id of the wrong record, a bare value as the name); off,
    the candidates and the random draws are exactly those of the first recovery data."""
    action = task.actions[index]
    if action.requestor == "user":
        # The agent calls the phone tool itself instead of asking the user to.
        call = ToolCall(id="", name=action.name, arguments=dict(action.arguments))
        return [Mistake(index, "role_confusion", call)]
    taken = set(domain.tool_lists().agent) | set(domain.tool_lists().user)
    args = dict(action.arguments)
    out: list[Mistake] = []

    def add(channel: str, name: str, arguments: dict[str, Any] | str, ask: list[str]) -> None:
        out.append(Mistake(index, channel, ToolCall(id="", name=name, arguments=arguments), ask))

    near = [n for n in _near_misses(action.name) if n not in taken and n != action.name]
    add("near_miss", rng.choice(near), args, [])
    invented = [n for n in INVENTED.get(action.name, [action.name + "_lookup"]) if n not in taken]
    add("invented", rng.choice(invented), args, [])
    add("not_a_name", _not_a_name(action), args, [])
    add("bad_arguments", action.name, rng.choice(_bad_arguments(action, rng)), [])
    known = task.scenario.known_info
    for key, value in sorted(args.items()):
        if isinstance(value, str) and value:
            # a value the user gave: ask for it again; one from a tool result: call again
            ask = ASK_AGAIN.get(key, [key]) if known.get(key) == value else []
            add("entity_not_found", action.name, {**args, key: _corrupt(value, rng)}, ask)
    scratch.advance_to(index)
    if natural:
        add("bad_arguments", action.name, _extra_argument(action, scratch.results, rng), [])
        bare = _bare_value(action)
        if bare is not None and bare not in taken:
            add("not_a_name", bare, args, [])
        for key, value in sorted(args.items()):
            if isinstance(value, str):  # a real id of another record: no such record here
                for other in _seen_ids(scratch.results, value):
                    add("entity_not_found", action.name, {**args, key: other}, [])
            elif isinstance(value, list) and value and isinstance(value[0], str):
                for other in _seen_ids(scratch.results, value[0]):
                    if other not in value:
                        add("entity_not_found", action.name, {**args, key: [other]}, [])
    specs = domain.agent_toolkit.specs()
    if specs[action.name].kind == "write":  # another record the rule refuses
        for key, value in sorted(args.items()):
            if isinstance(value, str):
                for other in _seen_ids(scratch.results, value):
                    add("precondition", action.name, {**args, key: other}, [])
    for later in task.actions[index + 1 :]:  # a later write before its prerequisite
        if later.requestor == "agent" and specs[later.name].kind == "write" and later != action:
            add("precondition", later.name, dict(later.arguments), [])
    return [m for m in out if scratch.fails_as(m.call, ENV_KIND[m.channel])]


def mistake_options(
    domain: Domain[Any],
    task: Task,
    index: int,
    rng: random.Random,
    channels: tuple[str, ...],
    scratch: _Scratch | None = None,
    natural: bool = False,
) -> dict[str, list[Mistake]]:
    """The verified mistakes before gold action `index`, by channel (only `channels`)."""
    scratch = scratch or _Scratch(domain, task)
    options: dict[str, list[Mistake]] = {}
    for m in _candidates(domain, task, index, rng, scratch, natural):
        if m.channel in channels:
            options.setdefault(m.channel, []).append(m)
    return options


def pick(options: dict[str, list[Mistake]], rng: random.Random) -> Mistake | None:
    """A channel uniformly among those available, then one of its mistakes."""
    if not options:
        return None
    channel = rng.choice(sorted(options))
    return rng.choice(options[channel])


def plant(
    domain: Domain[Any],
    task: Task,
    rng: random.Random,
    channels: tuple[str, ...],
    count: int = 1,
    natural: bool = False,
) -> list[Mistake]:
    """Up to `count` mistakes before distinct gold actions: each a channel uniformly among
    those the remaining gold actions allow, then a gold action and a mistake of that channel
    (recovery data covers every channel). With `count` 1 it draws what `plant_one` draws."""
    by_index: list[dict[str, list[Mistake]]] = []
    scratch = _Scratch(domain, task)
    for index in range(len(task.actions)):
        by_index.append(mistake_options(domain, task, index, rng, channels, scratch, natural))
    out: list[Mistake] = []
    for _ in range(count):
        used = {m.before for m in out}
        by_channel: dict[str, list[Mistake]] = {}
        for index, options in enumerate(by_index):
            if index not in used:
                for channel, ms in options.items():
                    by_channel.setdefault(channel, []).extend(ms)
        mistake = pick(by_channel, rng)
        if mistake is None:
            break
        out.append(mistake)
    return sorted(out, key=lambda m: m.before)


def plant_one(
    domain: Domain[Any], task: Task, rng: random.Random, channels: tuple[str, ...]
) -> Mistake | None:
    """One mistake for the episode (`plant` with count 1)."""
    planted = plant(domain, task, rng, channels)
    return planted[0] if planted else None
