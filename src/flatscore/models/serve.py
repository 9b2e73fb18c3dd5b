"""An OpenAI-compatible HTTP server over the local backend (`flatscore serve`), so that
τ²-bench and other harnesses can evaluate in-process precision arms.

Starlette + uvicorn: small, well kept, and async, so a slow generation (run in a worker
thread; the backend serializes them) never blocks `/v1/models` or health checks. Served
choices carry one extra field, `flatscore: {malformed, raw_text}`, which other clients
ignore and flatscore's `openai` backend reads to keep the malformed-output channel exact.

Requests are validated strictly (`serve_request`), only loopback clients and no web page
may call (`serve_guard`), and a generation stops when its client disconnects.
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

from flatscore.models.base import Backend, BackendError, Generation
from flatscore.models.serve_guard import (
    EXCEPTION_HANDLERS,
    GuardConfig,
    ServeGuard,
    error_response,
    run_until_disconnect,
)
from flatscore.models.serve_request import RequestError, parse_chat_request
from flatscore.models.wire import logprobs_to_wire, message_to_wire

_error = error_response


def completion_body(generation: Generation, model: str) -> dict[str, Any]:
    message = generation.message
    wire = message_to_wire(message)
    if message.malformed:
        wire = {"role": "assistant", "content": generation.raw_text}
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
                "finish_reason": generation.finish_reason,
                "flatscore": {"malformed": message.malformed, "raw_text": generation.raw_text},
            }
        ],
        "usage": {
            "prompt_tokens": generation.usage.prompt_tokens,
            "completion_tokens": generation.usage.completion_tokens,
            "total_tokens": generation.usage.prompt_tokens + generation.usage.completion_tokens,
        },
    }


def create_app(backend: Backend, model_name: str, guard: GuardConfig | None = None) -> Starlette:
    """The app; `guard` says who may call it (default: loopback only, no API key)."""

    async def models(_request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {"id": model_name, "object": "model", "created": 0, "owned_by": "flatscore"}
                ],
            }
        )

    async def chat(request: Request) -> JSONResponse:
        try:
            body = parse_chat_request(await request.body())
            messages, tools = body.flatscore_messages(), body.tool_dicts()
            sampling = body.sampling()
        except RequestError as exc:
            return _error(exc.status, f"invalid request: {exc.message}", param=exc.param)
        try:
            generation = await run_until_disconnect(
                request, lambda: backend.generate(messages, tools, sampling)
            )
        except BackendError as exc:
            if exc.kind == "context_window_exceeded":
                return _error(400, f"maximum context length exceeded: {exc}")
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
