"""Parquet export of episodes as flat tables, for large-scale analysis outside flatscore.

Two tables: `episodes.parquet` (one row per episode) and `tool_calls.parquet` (one row per
tool call, agent and user side, with its result and the analysis' per-call diagnostics: the
failure channel, whether the next agent call recovered, the call's place in the error budget).
Rows are written in batches, so memory stays bounded however many episodes are exported.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import TypedDict, get_args, get_type_hints

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from flatscore.analysis.channels import (
    UNKNOWN_TOOL_LEAVES,
    ChannelRules,
    episode_classifier,
    load_rules,
)
from flatscore.episode import Episode
from flatscore.errors import InputError

EPISODES_FILE = "episodes.parquet"
TOOL_CALLS_FILE = "tool_calls.parquet"
BATCH_ROWS = 5_000


class EpisodeRow(TypedDict):
    """A row of `episodes.parquet`: its columns, in order, with their types."""

    episode_id: str
    study: str
    arm: str
    model: str
    domain: str
    task_id: str
    trial: int
    seed: int | None
    split: str | None
    termination_reason: str
    reward: float | None
    succeeded: bool
    infrastructure_error: bool
    max_errors: int | None
    errors_counted: str
    n_messages: int
    n_agent_turns: int
    n_agent_tool_calls: int
    n_user_tool_calls: int
    n_failed_agent_calls: int
    n_failed_user_calls: int
    prompt_tokens: int
    completion_tokens: int
    started_at: str | None
    ended_at: str | None
    duration_s: float | None
    tool_list_source: str
    source_format: str | None
    source_file: str | None
    source_index: int | None
    simulation_id: str | None


class ToolCallRow(TypedDict):
    """A row of `tool_calls.parquet`: its columns, in order, with their types."""

    episode_id: str
    arm: str
    model: str
    domain: str
    task_id: str
    trial: int
    call_index: int  # position among the episode's tool calls, from 0
    message_index: int
    call_id: str
    requestor: str
    name: str
    arguments: str  # JSON text of the object, or the raw unparseable string
    arguments_parsed: bool
    has_result: bool
    error: bool | None  # null when the call got no answer
    error_text: str | None  # the result text of a failed call
    channel: str | None  # failed agent call: its leaf channel (docs/analysis.md); else null
    channel_family: str | None  # unknown_tool for its four parts, else the channel
    recovered: bool | None  # failed agent call with a next agent call: did that one succeed?
    failed_call_number: int | None  # a failed call (either side): 1, 2, … in the episode


_ARROW_TYPES = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}


def arrow_schema(row: type) -> pa.Schema:
    """The parquet schema of a row type (a `TypedDict`): one nullable column per key, in
    order, so that the columns are declared once, where the rows are typed."""
    columns = []
    for name, hint in get_type_hints(row).items():
        (base,) = [t for t in get_args(hint) or (hint,) if t is not type(None)]
        columns.append((name, _ARROW_TYPES[base]))
    return pa.schema(columns)


EPISODE_SCHEMA = arrow_schema(EpisodeRow)
TOOL_CALL_SCHEMA = arrow_schema(ToolCallRow)


class ExportCounts(BaseModel):
    episodes: int = 0
    tool_calls: int = 0


def tool_call_rows(ep: Episode, rules: ChannelRules | None = None) -> list[ToolCallRow]:
    """One row per tool call in the episode, joined to its result by call id, with the
    analysis' channel of each failed agent call (`rules`: the bundled ones by default) and
    its recovery (the next agent call in the episode succeeded), as `analysis.facts` counts
    them."""
    results = ep.tool_results()
    classify = episode_classifier(ep, rules or _bundled_rules())
    rows: list[ToolCallRow] = []
    failures = 0
    for message_index, msg in enumerate(ep.messages):
        for call in msg.tool_calls:
            result = results.get(call.id)
            failed = result is not None and result.error
            failures += failed
            channel = (
                classify(call, result)
                if result is not None and result.error and call.requestor != "user"
                else None
            )
            args = call.arguments
            rows.append(
                {
                    "episode_id": ep.episode_id,
                    "arm": ep.arm,
                    "model": ep.model,
                    "domain": ep.domain,
                    "task_id": ep.task_id,
                    "trial": ep.trial,
                    "call_index": len(rows),
                    "message_index": message_index,
                    "call_id": call.id,
                    "requestor": call.requestor,
                    "name": call.name,
                    "arguments": args
                    if isinstance(args, str)
                    else json.dumps(args, sort_keys=True),
                    "arguments_parsed": call.arguments_parsed,
                    "has_result": result is not None,
                    "error": result.error if result is not None else None,
                    "error_text": result.text if result is not None and result.error else None,
                    "channel": channel,
                    "channel_family": (
                        "unknown_tool" if channel in UNKNOWN_TOOL_LEAVES else channel
                    ),
                    "recovered": None,
                    "failed_call_number": failures if failed else None,
                }
            )
    agent = [r for r in rows if r["requestor"] != "user"]  # unanswered calls too, as facts
    for row, after in pairwise(agent):
        if row["error"]:
            row["recovered"] = after["error"] is False
    return rows


@cache
def _bundled_rules() -> ChannelRules:
    return load_rules()


def episode_row(ep: Episode, calls: list[ToolCallRow]) -> EpisodeRow:
    """The episode's flat row; `calls` are its `tool_call_rows` (for the call counts)."""

    def count(requestor: str, failed: bool) -> int:
        return sum(1 for c in calls if c["requestor"] == requestor and (not failed or c["error"]))

    src = ep.source
    return {
        "episode_id": ep.episode_id,
        "study": ep.study,
        "arm": ep.arm,
        "model": ep.model,
        "domain": ep.domain,
        "task_id": ep.task_id,
        "trial": ep.trial,
        "seed": ep.seed,
        "split": ep.split,
        "termination_reason": ep.termination_reason.value,
        "reward": ep.reward,
        "succeeded": ep.succeeded,
        "infrastructure_error": ep.is_infrastructure_error,
        "max_errors": ep.error_budget.max_errors,
        "errors_counted": ep.error_budget.counted,
        "n_messages": len(ep.messages),
        "n_agent_turns": sum(1 for m in ep.messages if m.role == "assistant"),
        "n_agent_tool_calls": count("agent", failed=False),
        "n_user_tool_calls": count("user", failed=False),
        "n_failed_agent_calls": count("agent", failed=True),
        "n_failed_user_calls": count("user", failed=True),
        "prompt_tokens": ep.usage.prompt_tokens,
        "completion_tokens": ep.usage.completion_tokens,
        "started_at": ep.timing.started_at,
        "ended_at": ep.timing.ended_at,
        "duration_s": ep.timing.duration_s,
        "tool_list_source": ep.tools.source,
        "source_format": src.format if src else None,
        "source_file": src.file if src else None,
        "source_index": src.index if src else None,
        "simulation_id": src.simulation_id if src else None,
    }


class _BatchWriter:
    """A ParquetWriter that buffers rows and writes them a batch at a time."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.schema = schema
        self.writer = pq.ParquetWriter(path, schema)
        self.rows: list[Mapping[str, object]] = []

    def add(self, rows: Iterable[Mapping[str, object]]) -> None:
        self.rows.extend(rows)
        if len(self.rows) >= BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.writer.write_table(pa.Table.from_pylist(self.rows, schema=self.schema))
            self.rows = []

    def close(self) -> None:
        self.flush()
        self.writer.close()


def export_parquet(
    episodes: Iterable[Episode], out_dir: str | Path, rules: ChannelRules | None = None
) -> ExportCounts:
    """Write `episodes.parquet` and `tool_calls.parquet` into `out_dir` (created if needed;
    an existing file there is bad input, not a file-system error)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} is a file: expected a folder for the tables", field="--out")
    out.mkdir(parents=True, exist_ok=True)
    counts = ExportCounts()
    ep_writer = _BatchWriter(out / EPISODES_FILE, EPISODE_SCHEMA)
    call_writer = _BatchWriter(out / TOOL_CALLS_FILE, TOOL_CALL_SCHEMA)
    try:
        for ep in episodes:
            calls = tool_call_rows(ep, rules)
            ep_writer.add([episode_row(ep, calls)])
            call_writer.add(calls)
            counts.episodes += 1
            counts.tool_calls += len(calls)
    finally:
        ep_writer.close()
        call_writer.close()
    return counts
