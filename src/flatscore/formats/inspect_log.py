"""Import Inspect AI eval logs (`.eval` and `.json`) as canonical episodes, streaming.

Samples are read one at a time through `inspect_ai`'s own reader and models: a `.eval` log
(a zip with one member per sample) by `read_eval_log_sample`; a `.json` log by streaming its
`samples` array with ijson (Inspect's own `.json` sample reader loads the whole file) and
validating each with Inspect's `EvalSample`. Before Inspect sees a byte the file is checked
like every other input (regular file; each `.eval` member at most `MAX_RECORD_BYTES` and
nested at most `MAX_DEPTH` levels), so a damaged or hostile log is one `InputError`.

How tool errors and sample endings map to flatscore's channels and termination reasons is
data: `inspect_errors.yaml`. Needs the `inspect` extra.
"""

from __future__ import annotations

import functools
import math
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from flatscore.analysis.channels import BASE_CHANNELS
from flatscore.episode import (
    Episode,
    Message,
    Source,
    TerminationReason,
    Timing,
    TokenUsage,
    ToolCall,
    ToolLists,
    ToolResult,
    make_episode_id,
)
from flatscore.errors import InputError
from flatscore.store.inputs import (
    MAX_RECORD_BYTES,
    DepthGuard,
    TooDeep,
    check_regular_file,
    error_text,
    json_array,
    open_json,
)

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample

FORMAT_EVAL = "inspect-eval"
FORMAT_JSON = "inspect-json"
DEFAULT_STUDY = "inspect"
USER_ROLE = "user"
"""The model role whose calls are the simulated user's (their tools are the user's tools)."""
BUILTIN_MAP = "builtin:flatscore/formats/inspect_errors.yaml"


def require_inspect() -> None:
    """A clear line instead of an ImportError when the `inspect` extra is missing."""
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        raise InputError(
            "Inspect AI logs need the `inspect` extra: pip install 'flatscore[inspect]'"
        ) from None


# --- The mapping (data) ----------------------------------------------------------------------


class _Termination(BaseModel):
    model_config = ConfigDict(extra="forbid")

    error: TerminationReason
    completed: TerminationReason
    limits: dict[str, TerminationReason] = Field(default_factory=dict)


class ErrorMap(BaseModel):
    """Inspect's ToolCallError types → base channels; sample endings → termination reasons."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    tool_errors: dict[str, str | None] = Field(default_factory=dict)
    termination: _Termination
    source: str = BUILTIN_MAP

    @field_validator("tool_errors")
    @classmethod
    def _known_channels(cls, value: dict[str, str | None]) -> dict[str, str | None]:
        for kind, channel in value.items():
            if channel is not None and channel not in BASE_CHANNELS:
                known = ", ".join(sorted(BASE_CHANNELS))
                raise ValueError(f"{kind}: unknown channel {channel!r} (known: {known}, null)")
        return value


@functools.cache
def _builtin_map() -> ErrorMap:
    text = resources.files("flatscore.formats").joinpath("inspect_errors.yaml").read_text("utf-8")
    return ErrorMap.model_validate(yaml.safe_load(text))


def load_error_map(path: str | Path | None = None) -> ErrorMap:
    """The bundled mapping, or a user's YAML file of the same layout (bad file: InputError)."""
    if path is None:
        return _builtin_map()
    p = Path(path)
    check_regular_file(p)
    try:
        data = yaml.safe_load(p.read_text("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputError(f"not valid YAML ({error_text(exc)})", file=str(p)) from None
    if not isinstance(data, dict):
        raise InputError("expected a mapping with 'tool_errors' and 'termination'", file=str(p))
    try:
        return ErrorMap.model_validate({**data, "source": str(p)})
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        msg = str(first["msg"]).removeprefix("Value error, ")
        raise InputError(msg, file=str(p), field=loc) from None


# --- Reading the log -------------------------------------------------------------------------


def _label(index: int, sample_id: object, epoch: object) -> str:
    return f"#{index} (id {sample_id}, epoch {epoch})"


def _reader_error(exc: BaseException) -> str:
    """Inspect's error, and the one behind it (its header reader wraps the parser's)."""
    parts: list[str] = []
    cause: BaseException | None = exc
    while cause is not None and len(parts) < 2:
        first = (str(cause).strip().splitlines() or [""])[0]
        parts.append(f"{type(cause).__name__}: {first[:160]}")
        cause = cause.__cause__
    return f"not a readable Inspect log ({'; '.join(parts)})"


_HEADER_PARTS = {
    "EvalSpec": "eval",
    "EvalPlan": "plan",
    "EvalResults": "results",
    "EvalStats": "stats",
}
"""Inspect's streaming header reader validates these parts on their own (field prefixes)."""


def _validation_error(
    exc: ValidationError, path: Path, record: str | None, prefix: str = ""
) -> InputError:
    """The most specific of pydantic's errors (Inspect's messages are a union: every member
    reports; the deepest location is the one that says what is wrong), located τ²-style."""
    errors = exc.errors()
    first = max(errors, key=lambda e: len(e["loc"]))
    same = [e for e in errors if e["loc"] == first["loc"]]
    msg = str(first["msg"]).removeprefix("Value error, ")
    if len(same) > 1 and all(e["type"] == "literal_error" for e in same):
        allowed = [str(e.get("ctx", {}).get("expected", "")) for e in same]
        msg = f"must be one of {', '.join(allowed)}, not {first['input']!r}"
    field = prefix
    for part in first["loc"]:
        if isinstance(part, int):
            field += f"[{part}]"
        elif "[" not in part and "(" not in part:  # pydantic's union/wrapper tags
            field += f".{part}" if field else part
    return InputError(msg, file=str(path), record=record, field=field or None)


def _check_eval_zip(path: Path) -> None:
    """Bound a `.eval` archive before Inspect opens it: a zip, members small and shallow."""
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if info.file_size > MAX_RECORD_BYTES:
                    raise InputError(
                        f"member larger than {MAX_RECORD_BYTES // (1024 * 1024)} MiB",
                        file=str(path),
                        field=info.filename,
                    )
                if not info.filename.endswith(".json"):
                    continue
                guard = DepthGuard()
                with zf.open(info) as fh:
                    while chunk := fh.read(1 << 20):
                        guard.feed(chunk)
    except TooDeep as exc:
        raise InputError(str(exc), file=str(path)) from None
    except InputError:
        raise
    except Exception as exc:  # zipfile, zlib and zstd each raise their own kinds
        raise InputError(
            f"not an Inspect .eval log (damaged or not a zip archive: {error_text(exc)})",
            file=str(path),
        ) from None


def read_header(path: Path) -> EvalLog:
    """The log's header (task, model, epochs, status) through Inspect's reader."""
    from inspect_ai.log import read_eval_log

    check_regular_file(path)
    if path.suffix == ".eval":
        _check_eval_zip(path)
    elif path.suffix != ".json":
        raise InputError("not an Inspect log (expected a .eval or .json file)", file=str(path))
    else:
        with open_json(path) as fh:  # depth-check the whole file first (streaming)
            try:
                while fh.read(1 << 20):
                    pass
            except TooDeep as exc:
                raise InputError(str(exc), file=str(path)) from None
    try:
        return read_eval_log(str(path), header_only=True)
    except ValidationError as exc:
        raise _validation_error(exc, path, None) from None
    except Exception as exc:  # Inspect raises many kinds on a damaged file
        cause = exc.__cause__
        if isinstance(cause, ValidationError) and cause.title in _HEADER_PARTS:
            raise _validation_error(cause, path, None, _HEADER_PARTS[cause.title]) from None
        raise InputError(_reader_error(exc), file=str(path)) from None


def _validated(data: Any, path: Path, index: int) -> EvalSample:
    from inspect_ai.log import EvalSample

    if not isinstance(data, dict):
        raise InputError(
            f"a sample must be an object, not {type(data).__name__}",
            file=str(path),
            record=f"#{index}",
        )
    try:
        return EvalSample.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(
            exc, path, _label(index, data.get("id"), data.get("epoch"))
        ) from None


def _json_samples(path: Path) -> Iterator[EvalSample]:
    """`samples` of a `.json` log, one at a time (ijson), each validated by Inspect's model."""
    for index, data in enumerate(json_array(path, "samples", lambda i: f"#{i}")):
        yield _validated(data, path, index)


def _eval_samples(path: Path) -> Iterator[EvalSample]:
    """Samples of a `.eval` log, one zip member at a time, in the log's own order."""
    from inspect_ai.log import read_eval_log_sample, read_eval_log_sample_summaries

    try:
        summaries = read_eval_log_sample_summaries(str(path))
    except Exception as exc:
        raise InputError(_reader_error(exc), file=str(path)) from None
    for index, summary in enumerate(summaries):
        label = _label(index, summary.id, summary.epoch)
        try:
            sample = read_eval_log_sample(
                str(path), id=summary.id, epoch=summary.epoch, resolve_attachments=True
            )
        except ValidationError as exc:
            raise _validation_error(exc, path, label) from None
        except Exception as exc:
            raise InputError(_reader_error(exc), file=str(path), record=label) from None
        yield sample


def _samples(path: Path) -> Iterator[EvalSample]:
    from inspect_ai.log import resolve_sample_attachments

    if path.suffix == ".eval":
        yield from _eval_samples(path)
        return
    for sample in _json_samples(path):
        yield resolve_sample_attachments(sample, "full")


# --- One sample → one Episode ----------------------------------------------------------------


@dataclass
class _Context:
    path: Path
    fmt: str
    study: str
    arm: str
    model: str
    domain: str
    scorer: str | None
    errors: ErrorMap
    ours: bool = False
    """The log is one flatscore exported: its metadata restores what Inspect has no field for."""


def _tool_lists(sample: EvalSample, ours: bool) -> ToolLists:
    """Agent tools: the tools offered in the agent's model calls; user tools: those offered
    in calls of the `user` role. Without model events (a log written with events excluded),
    a name that ever got an answer other than a parsing error is an agent tool."""
    if ours and isinstance(sample.metadata.get("flatscore_tools"), dict):
        return ToolLists.model_validate(sample.metadata["flatscore_tools"])
    from inspect_ai.event import ModelEvent

    agent: set[str] = set()
    user: set[str] = set()
    seen = False
    for event in sample.events:
        if not isinstance(event, ModelEvent):
            continue
        seen = True
        names = {t.name for t in event.tools}
        (user if event.role == USER_ROLE else agent).update(names)
    if seen:
        return ToolLists(agent=sorted(agent), user=sorted(user), source="tool_defs")
    for m in sample.messages:
        if m.role == "tool" and m.function and (m.error is None or m.error.type != "parsing"):
            agent.add(m.function)
    return ToolLists(agent=sorted(agent), source="inferred")


def _messages(
    sample: EvalSample, agent_tools: set[str], ctx: _Context, types: Counter[str]
) -> list[Message]:
    out: list[Message] = []
    names: dict[str, str] = {}
    for m in sample.messages:
        meta = (m.metadata or {}) if ctx.ours else {}
        if m.role == "assistant":
            calls = []
            for tc in m.tool_calls or []:
                names[tc.id] = tc.function
                # An unparseable call keeps Inspect's parse error (it quotes the raw text).
                args: dict[str, Any] | str = (
                    tc.parse_error if tc.parse_error is not None else tc.arguments
                )
                calls.append(ToolCall(id=tc.id, name=tc.function, arguments=args))
            malformed = meta.get("malformed") is True
            out.append(
                Message(
                    role="assistant", content=m.text or None, tool_calls=calls, malformed=malformed
                )
            )
        elif m.role == "tool":
            call_id = m.tool_call_id or ""
            name = m.function or names.get(call_id, "")
            kind: str | None = None
            if m.error is not None:
                types[m.error.type] += 1
                if "flatscore_error_kind" in meta:
                    kind = meta["flatscore_error_kind"]
                elif name in agent_tools:
                    kind = ctx.errors.tool_errors.get(m.error.type)
            out.append(
                Message(
                    role="tool",
                    tool_result=ToolResult(
                        call_id=call_id,
                        requestor="user" if meta.get("requestor") == "user" else "agent",
                        error=m.error is not None,
                        text=m.error.message if m.error is not None else m.text,
                        error_kind=kind,
                    ),
                )
            )
        elif m.role == "user" and meta.get("flatscore_user_tool_calls"):
            calls = [
                ToolCall.model_validate({**c, "requestor": "user"})
                for c in meta["flatscore_user_tool_calls"]
            ]
            out.append(Message(role="user", content=m.text or None, tool_calls=calls))
        else:
            out.append(Message(role=m.role, content=m.text or None))
    return out


def _score_float(value: Any) -> float | None:
    """Inspect's own conversion of a score value (C/I/P/N, yes/no, numbers); None for lists
    and dicts (Inspect would warn and call them 0)."""
    from inspect_ai.scorer import value_to_float

    if isinstance(value, (list, dict)) or value is None:
        return None
    return float(value_to_float()(value))


def _reward(sample: EvalSample, ctx: _Context, label: str) -> tuple[float | None, dict[str, float]]:
    scores = sample.scores or {}
    breakdown: dict[str, float] = {}
    for name, score in scores.items():
        value = _score_float(score.value)
        if value is not None and math.isfinite(value):
            breakdown[name] = value
    if not scores:
        return None, breakdown
    if ctx.ours and ctx.scorer is None:  # flatscore's export: `reward` only when there was one
        ours = scores.get("reward")
        return (None if ours is None else _score_float(ours.value)), breakdown
    name = ctx.scorer or next(iter(scores))
    if name not in scores:
        raise InputError(
            f"no score {name!r} (scores: {', '.join(scores)})",
            file=str(ctx.path),
            record=label,
            field="scores",
        )
    value = _score_float(scores[name].value)
    if value is None or not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise InputError(
            f"the success score must be a number in [0, 1] or C/I/P/N, not {scores[name].value!r}",
            file=str(ctx.path),
            record=label,
            field=f"scores.{name}.value",
        )
    return value, breakdown


def _termination(sample: EvalSample, ctx: _Context) -> TerminationReason:
    errors = ctx.errors
    recorded = sample.metadata.get("termination_reason") if ctx.ours else None
    if recorded in {r.value for r in TerminationReason}:
        return TerminationReason(recorded)
    if sample.error is not None:
        return errors.termination.error
    if sample.limit is not None:
        return errors.termination.limits.get(sample.limit.type, TerminationReason.MAX_STEPS)
    return errors.termination.completed


def _usage(sample: EvalSample) -> TokenUsage:
    """The agent's tokens: its own model calls (not the simulated user's)."""
    from inspect_ai.event import ModelEvent

    total = TokenUsage()
    seen = False
    for event in sample.events:
        if isinstance(event, ModelEvent) and event.role != USER_ROLE:
            seen = True
            u = event.output.usage
            if u is not None:
                total = total + TokenUsage(
                    prompt_tokens=u.input_tokens, completion_tokens=u.output_tokens
                )
    if not seen:  # no model events (excluded, or a log flatscore exported): per-model totals
        for u in sample.model_usage.values():
            total = total + TokenUsage(
                prompt_tokens=u.input_tokens, completion_tokens=u.output_tokens
            )
    return total


def _timestamp(value: object) -> str | None:
    return None if value is None else str(value)


def _episode(sample: EvalSample, index: int, ctx: _Context) -> Episode:
    label = _label(index, sample.id, sample.epoch)
    if sample.epoch < 1:
        raise InputError("epochs count from 1", file=str(ctx.path), record=label, field="epoch")
    tools = _tool_lists(sample, ctx.ours)
    types: Counter[str] = Counter()
    messages = _messages(sample, set(tools.agent), ctx, types)
    reward, breakdown = _reward(sample, ctx, label)
    if ctx.ours and isinstance(sample.metadata.get("reward_breakdown"), dict):
        breakdown = sample.metadata["reward_breakdown"]
    metadata: dict[str, Any] = {"inspect_sample_id": sample.id, "inspect_epoch": sample.epoch}
    if types:
        metadata["inspect_tool_errors"] = dict(sorted(types.items()))
    if sample.error is not None:
        metadata["inspect_error"] = sample.error.message
    if sample.limit is not None:
        metadata["inspect_limit"] = sample.limit.type
    if ctx.ours and isinstance(sample.metadata.get("flatscore_metadata"), dict):
        metadata = sample.metadata["flatscore_metadata"]  # the episode's own, as exported
    task_id = str(sample.id)
    trial = sample.epoch - 1
    return Episode(
        episode_id=make_episode_id(ctx.study, ctx.arm, ctx.domain, task_id, trial),
        study=ctx.study,
        arm=ctx.arm,
        model=ctx.model,
        domain=ctx.domain,
        task_id=task_id,
        trial=trial,
        messages=messages,
        termination_reason=_termination(sample, ctx),
        reward=reward,
        reward_breakdown=breakdown,
        tools=tools,
        timing=Timing(
            started_at=_timestamp(sample.started_at),
            ended_at=_timestamp(sample.completed_at),
            duration_s=sample.total_time,
        ),
        usage=_usage(sample),
        source=Source(format=ctx.fmt, file=str(ctx.path), index=index, simulation_id=sample.uuid),
        metadata=metadata,
    )


def _checked_episode(sample: EvalSample, index: int, ctx: _Context) -> Episode:
    """`_episode`, with the canonical schema's own checks reported like the reader's."""
    try:
        return _episode(sample, index, ctx)
    except ValidationError as exc:
        raise _validation_error(exc, ctx.path, _label(index, sample.id, sample.epoch)) from None


# --- Public entry points ---------------------------------------------------------------------


@dataclass(frozen=True)
class InspectLogInfo:
    """What a log's header says, before any sample is read."""

    format: str
    task: str
    model: str
    status: str
    epochs: int
    arm: str | None  # set when flatscore itself exported the log
    study: str | None


def inspect_log_info(path: str | Path) -> InspectLogInfo:
    require_inspect()
    p = Path(path)
    header = read_header(p)
    meta = header.eval.metadata or {}
    arm = meta.get("flatscore_arm")
    study = meta.get("flatscore_study")
    return InspectLogInfo(
        format=FORMAT_EVAL if p.suffix == ".eval" else FORMAT_JSON,
        task=header.eval.task,
        model=header.eval.model,
        status=header.status,
        epochs=header.eval.config.epochs or 1,
        arm=arm if isinstance(arm, str) else None,
        study=study if isinstance(study, str) else None,
    )


class InspectOptions(TypedDict, total=False):
    """How an Inspect log's episodes are labelled and scored (`read_inspect`, and
    `import_inspect` passes them on); each one left out or None takes its default."""

    arm: str | None
    model: str | None
    study: str | None
    domain: str | None
    scorer: str | None
    error_map: ErrorMap | None


def read_inspect(path: str | Path, **options: Unpack[InspectOptions]) -> Iterator[Episode]:
    """Stream canonical episodes from one Inspect log.

    Defaults: arm = the log's model (its name carries the precision words the analysis reads;
    a log flatscore exported keeps its arm), model = the log's model, domain = the task,
    study = "inspect" (a log flatscore exported keeps its study), success = the first
    scorer's score. Bad input raises `InputError`
    naming file, sample and field."""
    require_inspect()
    p = Path(path)
    info = inspect_log_info(p)
    ctx = _Context(
        path=p,
        fmt=info.format,
        study=options.get("study") or info.study or DEFAULT_STUDY,
        arm=options.get("arm") or info.arm or info.model,
        model=options.get("model") or info.model,
        domain=options.get("domain") or info.task,
        scorer=options.get("scorer"),
        errors=options.get("error_map") or load_error_map(),
        ours=info.arm is not None,
    )
    for index, sample in enumerate(_samples(p)):
        yield _checked_episode(sample, index, ctx)
