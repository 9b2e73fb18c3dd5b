"""Fixture studies for the report tests, built with the suite's episode builders
(tests/analysis_builders.py).

`study()` is a small realistic study: one model on two domains, arms bf16 and int4, several
tasks × trials, failed calls of every channel (role confusion, invented names, bad
arguments, missing records, refused actions, malformed output), int4 failing the same names
more often. `hostile_study()` is the same shape with attack strings in every model-controlled
field: message texts, tool names, arguments, result texts, task ids and arm names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from analysis_builders import agent_call, cell, episode_of
from flatscore.analysis.analyze import AnalysisOptions, analyze
from flatscore.analysis.result import AnalysisResult
from flatscore.episode import Episode, Message, TerminationReason, ToolLists

AGENT_TOOLS = ["get_user_details", "get_order_details", "cancel_pending_order", "transfer"]
USER_TOOLS = ["toggle_airplane_mode", "check_status_bar"]

PAYLOADS = (
    "<script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=1">',
    "</textarea><svg onload=window.__pwned=1>",
    '"><script>window.__pwned=1</script>',
    "</script><script>window.__pwned=1</script>",
    '<a href="javascript:window.__pwned=1">click</a>',
    "<!--<script>window.__pwned=1</script>-->",
    "\u2028\u2029{{ 7*7 }}${window.__pwned=1}",
)


@dataclass(frozen=True)
class Step:
    """One agent call: `outcome` is "ok", or an error channel recorded by the environment."""

    name: str
    outcome: str = "ok"
    text: str = ""
    arguments: dict[str, object] | str | None = None


def episode(
    arm: str,
    task: str,
    trial: int,
    steps: Sequence[Step],
    *,
    success: bool,
    domain: str = "retail",
    model: str = "tiny-agent",
    malformed: bool = False,
    say: str = "Let me look that up.",
    termination: TerminationReason | None = None,
) -> Episode:
    messages = [
        Message(role="system", content=f"You are a {domain} support agent. Follow the policy."),
        Message(role="user", content=f"Hi, I need help with task {task}."),
    ]
    for i, step in enumerate(steps):
        failed = step.outcome != "ok"
        messages += agent_call(
            f"call-{i}",
            step.name,
            step.outcome,
            step.text or (f"Error: {step.outcome}" if failed else '{"status": "ok"}'),
            arguments=step.arguments if step.arguments is not None else {"order_id": f"#W{i}"},
            say=say,
        )
    if malformed:
        messages.append(Message(role="assistant", content='{"name": "get_user', malformed=True))
    messages.append(Message(role="assistant", content="Done. Anything else?"))
    return episode_of(
        cell(task, trial, study="fixture", arm=arm, model=model, domain=domain),
        messages,
        success=success,
        termination=termination or TerminationReason.USER_STOP,
        max_errors=11,
        tools=ToolLists(agent=AGENT_TOOLS, user=USER_TOOLS, source="run"),
    )


def _steps(arm: str, task_no: int, trial: int) -> list[Step]:
    """Reference failures are a subset of int4's: same names, int4 repeats them."""
    base = [Step("get_user_details"), Step("get_order_details")]
    ref_fail = [
        Step(
            "toggle_airplane_mode",
            "role_confusion",
            "Error: Tool 'toggle_airplane_mode' not found.",
        ),
        Step("get_order_details", "entity_not_found", "Error: order #W9 not found"),
        Step(
            "cancel_pending_order", "precondition", "Error: non-pending order cannot be cancelled"
        ),
        Step(
            "get_user_details",
            "bad_arguments",
            "Error: missing 1 required argument",
            "{user_id: oops",
        ),
    ]
    extra = [
        Step(
            "toggle_airplane_mode",
            "role_confusion",
            "Error: Tool 'toggle_airplane_mode' not found.",
        ),
        Step("lookup_customer", "invented", "Error: Tool 'lookup_customer' not found."),
        Step("check_status_bar", "role_confusion", "Error: Tool 'check_status_bar' not found."),
    ]
    steps = list(base)
    if (task_no + trial) % 2 == 0:
        steps.append(ref_fail[task_no % len(ref_fail)])
    if arm != "bf16":
        steps += extra[: 1 + (task_no + trial) % 3]
    steps.append(Step("get_order_details"))
    return steps


def study(tasks: int = 6, trials: int = 2, arms: Sequence[str] = ("bf16", "int4")) -> list[Episode]:
    """Two domains × arms × tasks × trials; int4 has amplified failures and fails at small K."""
    out = []
    for domain in ("retail", "telecom"):
        for arm in arms:
            for t in range(tasks):
                for trial in range(trials):
                    steps = _steps(arm, t, trial)
                    success = (t + trial) % 5 != 0
                    out.append(
                        episode(
                            arm,
                            f"{domain[0]}{t}",
                            trial,
                            steps,
                            success=success,
                            domain=domain,
                            malformed=(arm != "bf16" and t == 1 and trial == 0),
                        )
                    )
    return out


HOSTILE_ARM = 'int4"><svg onload=window.__pwned=1>'
HOSTILE_MODEL = "<b onmouseover=window.__pwned=1>agent</b>"


def hostile_study() -> list[Episode]:
    """Attack strings in every model-controlled field (texts, tool names, arguments, results,
    task ids) and in the arm and model names an imported log may carry; two arms."""
    out = []
    for arm in ("bf16", HOSTILE_ARM):
        for t, payload in enumerate(PAYLOADS):
            steps = [
                Step("get_user_details", arguments={"user_id": payload, payload: payload}),
                Step(payload, "invented", f"Error: Tool '{payload}' not found."),
                Step(
                    "get_order_details", "entity_not_found", f"Error: {payload} not found", payload
                ),
            ]
            if arm != "bf16":
                steps.append(Step(payload, "invented", payload))
            out.append(
                episode(
                    arm,
                    f"task-{t}-{payload}",
                    0,
                    steps,
                    success=t % 2 == 0,
                    say=payload,
                    domain="retail",
                    model=HOSTILE_MODEL,
                    malformed=t == 0,
                )
            )
    return out


def analyzed(episodes: Sequence[Episode]) -> AnalysisResult:
    """The real analysis, with a small bootstrap: the report tests check rendering, not CIs."""
    return analyze(episodes, AnalysisOptions(bootstrap=200, seed=0))
