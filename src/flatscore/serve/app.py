"""An OpenAI-compatible HTTP server over the local backend (`flatscore serve`), so that
τ²-bench and other harnesses can evaluate in-process precision arms.

Starlette + uvicorn: small, well kept, and async, so a slow generation (run in a worker
thread; the backend serializes them) never blocks `/v1/models` or health checks. Served
choices carry one extra field, `flatscore: {malformed, raw_text}`, which other clients
ignore and flatscore's `openai` backend reads to keep the malformed-output channel exact.

Concurrent requests share the local backend's forward passes (its batch engine), and a
request that extends a recently served conversation reuses its KV cache (automatic prefix
caching; reused prompt tokens are reported as OpenAI's
`usage.prompt_tokens_details.cached_tokens`).

Requests are validated strictly (`flatscore.serve.request`), only loopback clients and no web page
may call (`flatscore.serve.guard`), and a generation stops when its client disconnects.

What an OpenAI client may rely on (τ²-bench through litellm does):
- tool-call `arguments` are always a JSON object's text: output whose arguments do not
  parse goes back as plain text, marked malformed (as vLLM's tool parsers do);
- tool-call ids are random (`call_<24 hex>`), so they never collide between the agent's and
  the user simulator's calls in one conversation;
- a context overflow is a 400 with OpenAI's `code: "context_length_exceeded"` and wording,
  which litellm maps to `ContextWindowExceededError`; without `max_tokens` the reply may use
  up to `DEFAULT_MAX_TOKENS`, or what is left of the window when less.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from flatscore.episode import Message
from flatscore.models.base import Backend, BackendError, Generation, Sampling
from flatscore.models.wire import logprobs_to_wire, message_to_wire
from flatscore.serve.guard import (
    EXCEPTION_HANDLERS,
    GuardConfig,
    ServeGuard,
    error_response,
    run_until_disconnect,
)
from flatscore.serve.request import DEFAULT_MAX_TOKENS, RequestError, parse_chat_request

_error = error_response


def context_overflow(backend: Backend, detail: str) -> JSONResponse:
    """OpenAI's answer to a prompt that does not fit (litellm recognises both the code and
    the wording as `ContextWindowExceededError`)."""
    window = getattr(backend, "max_context", None)
    size = f" is {window} tokens" if isinstance(window, int) else " was exceeded"
    message = (
        f"This model's maximum context length{size}. However, {detail}. "
        "Please reduce the length of the messages or completion."
    )
    return _error(400, message, param="messages", code="context_length_exceeded")


def new_call_id() -> str:
    """A tool-call id unique across requests (OpenAI's `call_…` shape)."""
    return f"call_{uuid.uuid4().hex[:24]}"


def fitting_max_tokens(
    backend: Backend, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
) -> int:
    """`max_tokens` for a request that gave none: `DEFAULT_MAX_TOKENS`, or what is left of
    the context window when less (at least 1, so a full window is still refused)."""
    window = getattr(backend, "max_context", None)
    encode = getattr(backend, "encode", None)
    if not isinstance(window, int) or encode is None:
        return DEFAULT_MAX_TOKENS
    from flatscore.models.chat_format import forced_prefix, render

    offered = [] if sampling.tool_choice == "none" else tools
    prefix = forced_prefix(sampling.tool_choice) if offered else ""
    prompt = len(encode(render(messages, offered).text + prefix))
    return max(1, min(DEFAULT_MAX_TOKENS, window - prompt))


def completion_body(generation: Generation, model: str) -> dict[str, Any]:
    message = generation.message
    if any(not c.arguments_parsed for c in message.tool_calls):
        # Never emit arguments a client cannot parse: the turn goes back as text, marked.
        message = Message(role="assistant", content=generation.raw_text, malformed=True)
    message = message.model_copy(
        update={
            "tool_calls": [c.model_copy(update={"id": new_call_id()}) for c in message.tool_calls]
        }
    )
    wire = message_to_wire(message)
    finish = generation.finish_reason
    if message.malformed:
        wire = {"role": "assistant", "content": generation.raw_text}
        finish = "stop" if finish == "tool_calls" else finish
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": wire,
                "logprobs": logprobs_to_wire(generation.logprobs)
                if generation.logprobs is not None
                else None,
                "finish_reason": finish,
                "flatscore": {"malformed": message.malformed, "raw_text": generation.raw_text},
            }
        ],
        "usage": {
            "prompt_tokens": generation.usage.prompt_tokens,
            "completion_tokens": generation.usage.completion_tokens,
            "total_tokens": generation.usage.prompt_tokens + generation.usage.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": generation.cached_tokens},
        },
    }


def create_app(backend: Backend, model_name: str, guard: GuardConfig | None = None) -> Starlette:
    """The app; `guard` says who may call it (default: loopback only, no API key)."""

    # What plays the model (file, format, hash), for the episodes of a client that records
    # it (flatscore's τ² runs); other clients ignore the extra field.
    weights = getattr(getattr(backend, "loaded", None), "description", None)

    async def models(_request: Request) -> JSONResponse:
        entry: dict[str, Any] = {
            "id": model_name,
            "object": "model",
            "created": 0,
            "owned_by": "flatscore",
        }
        if isinstance(weights, str):
            entry["flatscore"] = {"weights": weights}
        return JSONResponse({"object": "list", "data": [entry]})

    async def chat(request: Request) -> JSONResponse:
        try:
            body = parse_chat_request(await request.body())
            messages, tools = body.flatscore_messages(), body.tool_dicts()
            sampling = body.sampling()
        except RequestError as exc:
            return _error(exc.status, f"invalid request: {exc.message}", param=exc.param)
        given = body.max_completion_tokens or body.max_tokens

        def generate() -> Generation:
            fitted = sampling
            if not given:
                fit = fitting_max_tokens(backend, messages, tools, sampling)
                fitted = sampling.model_copy(update={"max_tokens": fit})
            return backend.generate(messages, tools, fitted)

        try:
            generation = await run_until_disconnect(request, generate)
        except BackendError as exc:
            if exc.kind == "context_window_exceeded":
                return context_overflow(backend, str(exc))
            return _error(500, str(exc), "server_error")
        if generation is None:  # the client disconnected; nobody reads this
            return _error(499, "client closed the request")
        return JSONResponse(completion_body(generation, model_name))

    async def health(_request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
        ],
        middleware=[Middleware(ServeGuard, config=guard or GuardConfig())],
        exception_handlers=EXCEPTION_HANDLERS,
    )
