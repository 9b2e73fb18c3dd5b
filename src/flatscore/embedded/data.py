"""Training data for the embedded agent: oracle episodes on the TRAIN split of both built-in
domains, run with the real runner and the scripted user (phrasing varied by seed).

A share of the episodes contain one planted mistake followed by the correct call, so the model
sees how to recover: an invented tool name, a user (phone) tool called by the agent (role
confusion), a wrong argument name, or a record id that does not exist. The environment
answers the mistake with its real error text. Planted mistakes exist ONLY here: evaluation
never plants anything, every failure at test time is the model's own.

Loss is on agent tokens only: the chat-format agent spans (`render(...).agent_spans`) of the
agent's own turns, minus the runner's fixed greeting and minus the planted mistakes (which
the model must learn to recover from, not to make).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any, Literal

from flatscore.agents.base import ToolSchema
from flatscore.agents.oracle import OracleAgent, ask_text
from flatscore.domains import get_domain
from flatscore.domains.framework import Task
from flatscore.episode import Episode, Message, ToolCall
from flatscore.models.chat_format import render
from flatscore.runner.episode_loop import GREETING, EpisodeSpec, run_episode
from flatscore.runner.views import agent_view
from flatscore.users.scripted import ScriptedUser

DOMAINS = ("retail", "telecom")
MistakeKind = Literal["invented_tool", "role_confusion", "bad_argument_name", "unknown_id"]

# Plausible wrong names a small model might produce; never real tools of either domain.
INVENTED = {
    "find_user_by_email": ["get_user_by_email", "lookup_user", "find_user"],
    "find_user_by_name_zip": ["find_user_by_name", "get_user", "search_user"],
    "get_order": ["get_order_details", "check_order", "order_status"],
    "get_product": ["get_product_details", "find_product", "get_item"],
    "cancel_order": ["cancel", "cancel_orders", "delete_order"],
    "change_address": ["update_address", "set_address", "modify_address"],
    "return_items": ["return_order", "return_item", "refund_items"],
    "exchange_items": ["exchange_item", "exchange_order", "swap_items"],
    "find_customer_by_phone": ["find_customer", "get_customer", "lookup_phone"],
    "get_line": ["get_line_details", "check_line", "line_status"],
    "get_bills": ["get_bill", "list_bills", "check_bills"],
    "get_plans": ["list_plans", "get_plan", "show_plans"],
    "pay_bill": ["pay_bills", "pay_overdue_bill", "make_payment"],
    "resume_line": ["reactivate_line", "unsuspend_line", "activate_line"],
    "enable_roaming": ["turn_on_roaming", "enable_data_roaming", "activate_roaming"],
    "add_data": ["add_data_gb", "buy_data", "top_up_data"],
    "change_plan": ["switch_plan", "update_plan", "set_plan"],
}


EMAIL = ["email"]
NAME_ZIP = ["first_name", "last_name", "zip"]


def detour_plan(plan: list[Message]) -> list[Message]:
    """The plan with the identification asked the other way first (the agent cannot know
    which the user remembers): an email user is asked for name + zip and offers the email
    instead; a name + zip user is first asked for the email and says they don't remember
    it. Not a mistake (no call fails): a conversation the model must be able to follow."""
    out = list(plan)
    for i, message in enumerate(out):
        if message.content == ask_text(EMAIL):
            out[i] = Message(role="assistant", content=ask_text(NAME_ZIP))
            return out
        if message.content == ask_text(NAME_ZIP):
            out.insert(i, Message(role="assistant", content=ask_text(EMAIL)))
            return out
    return out


@dataclass
class Mistake:
    """A wrong call the agent makes once, right before plan step `step`."""

    step: int
    kind: MistakeKind
    call: ToolCall


def _corrupt_id(value: str, rng: random.Random) -> str:
    """An id that looks right but does not exist (an extra or dropped digit)."""
    return value + str(rng.randint(0, 9)) if rng.random() < 0.5 else value[:-1]


def plan_mistake(task: Task, plan: list[Message], rng: random.Random) -> Mistake | None:
    """Pick one plan step and a wrong call before it, or None when no step suits."""
    domain = get_domain(task.domain)
    options: list[Mistake] = []
    for step, message in enumerate(plan):
        if message.tool_calls:
            good = message.tool_calls[0]
            args = dict(good.arguments) if isinstance(good.arguments, dict) else {}
            wrong_name = rng.choice(INVENTED.get(good.name, [good.name + "_info"]))
            options.append(
                Mistake(step, "invented_tool", ToolCall(id="x", name=wrong_name, arguments=args))
            )
            if args:
                key = rng.choice(sorted(args))
                renamed = {("id" if k == key else k): v for k, v in args.items()}
                if key != "id":
                    options.append(
                        Mistake(
                            step,
                            "bad_argument_name",
                            ToolCall(id="x", name=good.name, arguments=renamed),
                        )
                    )
                ids = [k for k, v in args.items() if k.endswith("_id") and isinstance(v, str)]
                if ids:
                    k = rng.choice(ids)
                    broken = {**args, k: _corrupt_id(args[k], rng)}
                    options.append(
                        Mistake(
                            step, "unknown_id", ToolCall(id="x", name=good.name, arguments=broken)
                        )
                    )
        elif domain.user_toolkit is not None and message.content:
            # An instruction to the user: the agent calls the phone tool itself instead.
            actions = domain.user_toolkit.parse_requests(message.content)
            if len(actions) == 1:
                a = actions[0]
                options.append(
                    Mistake(
                        step,
                        "role_confusion",
                        ToolCall(id="x", name=a.name, arguments=dict(a.arguments)),
                    )
                )
    return rng.choice(options) if options else None


class SlipOracle(OracleAgent):
    """The oracle, optionally with the identification detour (`detour_plan`) and with one
    planted mistake before a chosen plan step. Training data only; never registered."""

    name = "oracle"

    def __init__(self, mistake_seed: int | None = None, detour: bool = False) -> None:
        super().__init__()
        self.mistake_seed = mistake_seed
        self.detour = detour
        self.detoured = False  # whether the detour changed this episode's plan
        self.mistake: Mistake | None = None
        self._slipped = False

    def start(self, task: Task, seed: int) -> None:
        super().start(task, seed)
        self.detoured = False
        if self.detour:
            plan = detour_plan(self._plan)
            self.detoured = plan != self._plan
            self._plan = plan
        self._slipped = False
        self.mistake = None
        if self.mistake_seed is not None:
            rng = random.Random(f"mistake|{self.mistake_seed}|{task.domain}|{task.id}")
            self.mistake = plan_mistake(task, self._plan, rng)

    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message:
        m = self.mistake
        if m is not None and not self._slipped and self._next == m.step:
            self._slipped = True
            return Message(role="assistant", tool_calls=[m.call.model_copy()])
        return await super().act(messages, tools)


@dataclass
class Example:
    """One training conversation: the agent's view, its tool schemas, and which agent
    messages carry loss (indices into `messages`)."""

    domain: str
    task_id: str
    seed: int
    mistake: str | None
    detour: bool
    messages: list[Message]
    tools: list[dict[str, Any]]
    trained: list[int]


def failed_call_ids(episode: Episode) -> set[str]:
    return {
        m.tool_result.call_id
        for m in episode.messages
        if m.tool_result is not None and m.tool_result.error
    }


def trained_messages(view: list[Message], failed: set[str]) -> list[int]:
    """Agent turns that carry loss: every assistant turn except the fixed greeting and
    any turn with a call that failed (a planted mistake)."""
    out = []
    for i, m in enumerate(view):
        if m.role != "assistant":
            continue
        if i == 1 and m.content == GREETING and not m.tool_calls:
            continue
        if any(c.id in failed for c in m.tool_calls):
            continue
        out.append(i)
    return out


async def _episode(
    task: Task, seed: int, mistake_seed: int | None, detour: bool
) -> tuple[Episode, SlipOracle]:
    domain = get_domain(task.domain)
    spec = EpisodeSpec(
        domain=domain, task=task, trial=0, seed=seed, study="train-embedded", arm="oracle"
    )
    agent = SlipOracle(mistake_seed, detour)
    return await run_episode(spec, agent, ScriptedUser()), agent


def make_example(
    task: Task, seed: int, *, with_mistake: bool, detour: bool = False
) -> Example | None:
    """Run one oracle episode (seeded user phrasing, optional detour and planted mistake)
    and turn it into an example. None when the episode did not succeed or the mistake did
    not fail exactly once (so every example is a clean demonstration)."""
    episode, agent = asyncio.run(_episode(task, seed, seed if with_mistake else None, detour))
    failed = failed_call_ids(episode)
    if not episode.succeeded:
        return None
    if with_mistake and (agent.mistake is None or len(failed) != 1):
        return None
    if not with_mistake and failed:
        return None
    domain = get_domain(task.domain)
    view = agent_view(episode.messages, domain.policy)
    # The tokens after the last agent turn carry no loss: drop them.
    trained = trained_messages(view, failed)
    view = view[: trained[-1] + 1]
    return Example(
        domain=task.domain,
        task_id=task.id,
        seed=seed,
        mistake=agent.mistake.kind if with_mistake and agent.mistake else None,
        detour=agent.detoured,
        messages=view,
        tools=domain.agent_tool_schemas(),
        trained=trained,
    )


def build_examples(
    variants: int = 12,
    mistake_share: float = 0.3,
    seed: int = 0,
    domains: tuple[str, ...] = DOMAINS,
    detour_share: float = 0.5,
) -> list[Example]:
    """`variants` episodes per train task (scripted-user seeds `seed*1000 + v`); a seeded
    `mistake_share` of them with a planted mistake and `detour_share` with the
    identification detour (where the task asks for identification); deterministic."""
    rng = random.Random(f"examples|{seed}")
    examples = []
    for name in domains:
        for task in get_domain(name).tasks("train"):
            for v in range(variants):
                user_seed = seed * 1000 + v
                mistake = rng.random() < mistake_share
                detour = rng.random() < detour_share
                ex = make_example(task, user_seed, with_mistake=mistake, detour=detour)
                if ex is not None:
                    examples.append(ex)
    return examples


@dataclass
class Tokenized:
    ids: list[int]
    labels_mask: list[bool]  # True where the token is an agent token with loss


def tokenize(example: Example, tokenizer: Any) -> Tokenized:
    """Token ids of the rendered conversation and the mask of trained agent tokens: exactly
    the tokens whose characters start inside a trained agent span."""
    rendered = render(example.messages, example.tools, add_generation_prompt=False)
    spans = [s for s in rendered.agent_spans if s.message_index in set(example.trained)]
    enc = tokenizer(rendered.text, add_special_tokens=False, return_offsets_mapping=True)
    mask = []
    j = 0
    for start, _end in enc["offset_mapping"]:
        while j < len(spans) and spans[j].end <= start:
            j += 1
        mask.append(j < len(spans) and spans[j].start <= start < spans[j].end)
    return Tokenized(ids=list(enc["input_ids"]), labels_mask=mask)
