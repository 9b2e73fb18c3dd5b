"""`flatscore export inspect`: canonical runs as Inspect AI `.eval` logs for `inspect view`.

One log per (model, domain, arm): each episode is a sample (task → sample id, trial → epoch)
whose scores say what flatscore measured, so `inspect view` can sort and filter on them:
`reward`, `success` (C/I), `failed_calls` and `channels` (failed agent calls per channel).
Every failed tool answer carries Inspect's error field and, in its metadata, the channel
the analysis gives it. What Inspect has no field for (tool lists, the recorded error kind,
the termination reason) rides in metadata, and `flatscore import inspect` reads it back.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from flatscore.analysis.channels import ChannelRules, episode_classifier, load_rules
from flatscore.analysis.facts import episode_facts
from flatscore.episode import Episode, Message, TerminationReason
from flatscore.formats.inspect_log import require_inspect

if TYPE_CHECKING:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ChatMessage

SCORER = "flatscore"
_LIMITS = {
    TerminationReason.MAX_STEPS: "message",
    TerminationReason.TIMEOUT: "time",
    TerminationReason.CONTEXT_WINDOW_EXCEEDED: "context",
}
"""Endings Inspect records as a sample limit (inspect_errors.yaml maps them back)."""
_TOOL_RAISED = frozenset({"entity_not_found", "precondition", "other"})
"""Channels of errors a tool raises (Inspect's `unknown` type); every other channel —
bad_arguments and the unknown-tool family, however finely the analysis splits it — is
Inspect's `parsing`."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]+")


class ExportedLog(BaseModel):
    path: str
    model: str
    domain: str
    arm: str
    samples: int


def _safe(name: str) -> str:
    return _UNSAFE.sub("-", name).strip("-") or "x"


def _messages(episode: Episode, rules: ChannelRules) -> list[ChatMessage]:
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
    )
    from inspect_ai.tool import ToolCall, ToolCallError

    classify = episode_classifier(episode, rules)
    calls = {c.id: c for m in episode.messages for c in m.tool_calls}
    out: list[ChatMessage] = []
    for m in episode.messages:
        if m.role == "system":
            out.append(ChatMessageSystem(content=m.content or ""))
        elif m.role == "user":
            out.append(ChatMessageUser(content=m.content or "", metadata=_user_calls(m)))
        elif m.role == "assistant":
            tool_calls = [
                ToolCall(
                    id=c.id,
                    function=c.name,
                    arguments=c.arguments if isinstance(c.arguments, dict) else {},
                    parse_error=None if isinstance(c.arguments, dict) else c.arguments,
                )
                for c in m.tool_calls
                if c.requestor == "agent"
            ]
            out.append(
                ChatMessageAssistant(
                    content=m.content or "",
                    tool_calls=tool_calls or None,
                    model=episode.model,
                    metadata={"malformed": True} if m.malformed else None,
                )
            )
        else:
            r = m.tool_result
            assert r is not None  # the schema's rule for tool messages
            call = calls.get(r.call_id)
            meta: dict[str, Any] = {}
            if r.requestor == "user":
                meta["requestor"] = "user"
            error = None
            if r.error:
                channel = classify(call, r) if call is not None and r.requestor == "agent" else None
                meta.update(flatscore_channel=channel, flatscore_error_kind=r.error_kind)
                kind: Literal["parsing", "unknown"] = (
                    "parsing" if channel is not None and channel not in _TOOL_RAISED else "unknown"
                )
                error = ToolCallError(kind, r.text)
            out.append(
                ChatMessageTool(
                    content="" if r.error else r.text,
                    tool_call_id=r.call_id,
                    function=call.name if call is not None else None,
                    error=error,
                    metadata=meta or None,
                )
            )
    return out


def _user_calls(m: Message) -> dict[str, Any] | None:
    """The user's own tool calls (telecom's phone tools): Inspect's user turns have no field."""
    calls = [
        {"id": c.id, "name": c.name, "arguments": c.arguments}
        for c in m.tool_calls
        if c.requestor == "user"
    ]
    return {"flatscore_user_tool_calls": calls} if calls else None


def _sample(episode: Episode, rules: ChannelRules) -> EvalSample:
    from inspect_ai.log import EvalError, EvalSample, EvalSampleLimit
    from inspect_ai.model import ModelUsage
    from inspect_ai.scorer import CORRECT, INCORRECT, Score

    facts = episode_facts(episode, rules)
    first_user = next((m.content for m in episode.messages if m.role == "user"), None)
    scores: dict[str, Score] = {}
    if episode.reward is not None:
        scores["reward"] = Score(value=episode.reward)
    scores["success"] = Score(value=CORRECT if episode.succeeded else INCORRECT)
    scores["failed_calls"] = Score(value=facts.agent_failed)
    scores["channels"] = Score(value=dict(facts.channels))
    limit = _LIMITS.get(episode.termination_reason)
    return EvalSample(
        id=episode.task_id,
        epoch=episode.trial + 1,
        input=first_user or "",
        target="",
        messages=_messages(episode, rules),
        scores=scores,
        metadata={
            "flatscore_episode_id": episode.episode_id,
            "termination_reason": episode.termination_reason.value,
            "agent_calls": facts.agent_calls,
            "failed_calls": facts.agent_failed,
            "user_calls": facts.user_calls,
            "user_failed_calls": facts.user_failed,
            "channels": dict(facts.channels),
            **{f"failed_{ch}": n > 0 for ch, n in facts.channels.items()},
            "flatscore_tools": episode.tools.model_dump(),
            "reward_breakdown": episode.reward_breakdown,
            "flatscore_metadata": episode.metadata,
        },
        model_usage={
            episode.model: ModelUsage(
                input_tokens=episode.usage.prompt_tokens,
                output_tokens=episode.usage.completion_tokens,
                total_tokens=episode.usage.prompt_tokens + episode.usage.completion_tokens,
            )
        },
        limit=EvalSampleLimit(type=limit, limit=0) if limit else None,
        error=(
            EvalError(
                message=str(episode.metadata.get("inspect_error", "infrastructure error")),
                traceback="",
                traceback_ansi="",
            )
            if episode.is_infrastructure_error
            else None
        ),
        started_at=episode.timing.started_at,
        completed_at=episode.timing.ended_at,
        total_time=episode.timing.duration_s,
        uuid=episode.episode_id,
    )


def _log(key: tuple[str, str, str, str], samples: list[EvalSample]) -> Any:
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalResults,
        EvalScore,
        EvalSpec,
        EvalStats,
    )

    study, model, domain, arm = key
    ids = list(dict.fromkeys(s.id for s in samples))
    epochs = max(s.epoch for s in samples)
    successes = sum(s.scores is not None and s.scores["success"].value == "C" for s in samples)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    starts = sorted(str(s.started_at) for s in samples if s.started_at)
    ends = sorted(str(s.completed_at) for s in samples if s.completed_at)
    stats = EvalStats(  # the run's span, else the viewer shows a NaN duration
        started_at=starts[0] if starts else now, completed_at=ends[-1] if ends else now
    )
    spec = EvalSpec(
        created=now,
        task=domain,
        dataset=EvalDataset(name=domain, samples=len(ids), sample_ids=ids),
        model=model,
        config=EvalConfig(epochs=epochs),
        metadata={"flatscore_arm": arm, "flatscore_study": study},
    )
    results = EvalResults(
        total_samples=len(samples),
        completed_samples=len(samples),
        scores=[
            EvalScore(
                name="success",
                scorer=SCORER,
                metrics={"accuracy": EvalMetric(name="accuracy", value=successes / len(samples))},
            )
        ],
    )
    return EvalLog(eval=spec, status="success", results=results, stats=stats, samples=samples)


def export_inspect(
    episodes: Iterable[Episode], out: str | Path, *, rules: ChannelRules | None = None
) -> list[ExportedLog]:
    """Write one `.eval` log per (model, domain, arm) under `out`; returns what was written.

    A log holds its group's samples in memory while it is built (Inspect writes a log whole)."""
    require_inspect()
    from inspect_ai.log import write_eval_log

    rules = rules or load_rules()
    groups: dict[tuple[str, str, str, str], list[EvalSample]] = defaultdict(list)
    seen: set[str] = set()
    for ep in episodes:
        if ep.episode_id in seen:  # the same episode in two inputs: one sample (id, epoch)
            continue
        seen.add(ep.episode_id)
        groups[(ep.study, ep.model, ep.domain, ep.arm)].append(_sample(ep, rules))
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    several_models = len({k[1] for k in groups}) > 1
    several_studies = len({k[0] for k in groups}) > 1
    written = []
    for key, samples in sorted(groups.items()):
        study, model, domain, arm = key
        parts = [domain, arm] + ([model] if several_models else [])
        parts = ([study] if several_studies else []) + parts
        path = out_dir / ("__".join(_safe(p) for p in parts) + ".eval")
        write_eval_log(_log(key, samples), str(path))
        written.append(
            ExportedLog(path=str(path), model=model, domain=domain, arm=arm, samples=len(samples))
        )
    return written
