"""The chat-completions request `flatscore serve` accepts, validated strictly (pydantic).

OpenAI's schema, field by field: every documented request field is known (those that do not
change what a local model generates are accepted and ignored), unknown fields are refused,
and types are strict — `"8"`, `8.7` and `true` are not a `max_tokens`. Ranges follow
OpenAI's and are listed in docs/backends.md. Anything else is a 400 in OpenAI's error shape,
naming the field (`param`), before a single token is generated.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from flatscore.episode import Message
from flatscore.models.base import Sampling
from flatscore.models.wire import message_from_wire
from flatscore.store.inputs import parse_json_bytes

DEFAULT_MAX_TOKENS = 512
MAX_MESSAGES = 4096
MAX_TOOLS = 128
INT64 = 2**63


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class TextPart(_Strict):
    type: Literal["text"]
    text: str


Content = str | list[TextPart]


class FunctionCall(_Strict):
    name: str
    arguments: str


class WireToolCall(_Strict):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class SystemMessage(_Strict):
    role: Literal["system", "developer"]
    content: Content
    name: str | None = None


class UserMessage(_Strict):
    role: Literal["user"]
    content: Content
    name: str | None = None


class AssistantMessage(_Strict):
    role: Literal["assistant"]
    content: Content | None = None
    tool_calls: list[WireToolCall] | None = None
    name: str | None = None
    refusal: str | None = None

    @model_validator(mode="after")
    def _content_or_calls(self) -> AssistantMessage:
        if self.content is None and not self.tool_calls:
            raise ValueError("an assistant message needs content or tool_calls")
        return self


class ToolMessage(_Strict):
    role: Literal["tool"]
    content: Content
    tool_call_id: str


RequestMessage = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]


class FunctionDef(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolDef(_Strict):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(_Strict):
    name: str


class NamedToolChoice(_Strict):
    type: Literal["function"]
    function: NamedFunction


class StreamOptions(_Strict):
    include_usage: bool | None = None


class ChatRequest(_Strict):
    """OpenAI's `POST /v1/chat/completions` body."""

    model: str
    messages: list[RequestMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    tools: list[ToolDef] | None = Field(None, max_length=MAX_TOOLS)
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    temperature: float | None = Field(None, ge=0.0, le=2.0, allow_inf_nan=False)
    top_p: float | None = Field(None, ge=0.0, le=1.0, allow_inf_nan=False)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    n: int | None = Field(None, ge=1, le=1)
    stream: Literal[False] | None = None
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = Field(None, max_length=4)
    seed: int | None = Field(None, ge=-INT64, le=INT64 - 1)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0, allow_inf_nan=False)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0, allow_inf_nan=False)
    logit_bias: dict[str, int] | None = Field(None, max_length=0)
    response_format: dict[str, Any] | None = None
    user: str | None = None
    metadata: dict[str, str] | None = None
    store: bool | None = None
    service_tier: str | None = None
    reasoning_effort: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ChatRequest:
        names = {t.function.name for t in self.tools or []}
        choice = self.tool_choice
        if isinstance(choice, NamedToolChoice) and choice.function.name not in names:
            raise ValueError(f"tool_choice names {choice.function.name!r}, which is not in tools")
        if choice == "required" and not names:
            raise ValueError("tool_choice 'required' needs tools")
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs needs logprobs: true")
        if self.response_format not in (None, {"type": "text"}):
            raise ValueError("only response_format {'type': 'text'} is supported")
        return self

    def sampling(self) -> Sampling:
        """Decoding settings, with OpenAI's defaults (temperature 1, top_p 1). `top_p: 0`
        keeps only the most likely token, i.e. greedy decoding."""
        temperature = 1.0 if self.temperature is None else self.temperature
        top_p = 1.0 if self.top_p is None else self.top_p
        if top_p == 0.0:
            temperature, top_p = 0.0, 1.0
        max_tokens = self.max_completion_tokens or self.max_tokens or DEFAULT_MAX_TOKENS
        stop = self.stop or ()
        choice = self.tool_choice or "auto"
        return Sampling(
            temperature=temperature,
            top_p=top_p,
            max_tokens=max_tokens,
            seed=self.seed,
            stop=(stop,) if isinstance(stop, str) else tuple(stop),
            logprobs=bool(self.logprobs),
            top_logprobs=self.top_logprobs or 0,
            tool_choice=choice if isinstance(choice, str) else choice.model_dump(),
        )

    def flatscore_messages(self) -> list[Message]:
        return [message_from_wire(m.model_dump(exclude_none=True)) for m in self.messages]

    def tool_dicts(self) -> list[dict[str, Any]]:
        return [t.model_dump(exclude_none=True) for t in self.tools or []]


class RequestError(ValueError):
    """A request that fails validation: the message and the offending field (OpenAI `param`)."""

    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status


def _param(loc: tuple[int | str, ...]) -> str | None:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in {"system", "developer", "user", "assistant", "tool"} or "[" in part:
            continue  # discriminator and union-member tags, not field names
        elif part in {"str", "int", "float", "bool", "list[TextPart]", "NamedToolChoice"}:
            continue
        else:
            out += f".{part}" if out else part
    return out or None


def parse_chat_request(body: bytes) -> ChatRequest:
    """Bytes → a validated ChatRequest, or a RequestError (400) saying what is wrong."""
    try:
        data = parse_json_bytes(body)
    except ValueError as exc:
        raise RequestError(f"the body is not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise RequestError("the body must be a JSON object")
    if data.get("stream") is True:
        raise RequestError("streaming is not supported; send stream=false", "stream")
    if isinstance(data.get("n"), int) and not isinstance(data["n"], bool) and data["n"] > 1:
        raise RequestError("only n=1 is supported", "n")
    try:
        request = ChatRequest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        param = _param(tuple(first["loc"]))
        message = str(first["msg"]).removeprefix("Value error, ")
        raise RequestError(f"{param}: {message}" if param else message, param) from None
    return request
