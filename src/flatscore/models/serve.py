"""An OpenAI-compatible HTTP server over the local backend (`flatscore serve`), so that
τ²-bench and other harnesses can evaluate in-process precision arms.

Starlette + uvicorn: small, well kept, and async, so a slow generation (run in a worker
thread; the backend serializes them) never blocks `/v1/models` or health checks. Served
choices carry one extra field, `flatscore: {malformed, raw_text}`, which other clients
ignore and flatscore's `openai` backend reads to keep the malformed-output channel exact.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from flatscore.models.base import Backend, BackendError, Generation, Sampling
from flatscore.models.wire import logprobs_to_wire, message_from_wire, message_to_wire

DEFAULT_MAX_TOKENS = 512


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": None}}, status)


def sampling_from_request(body: dict[str, Any]) -> Sampling:
    """OpenAI request fields -> Sampling (OpenAI's defaults: temperature 1, top_p 1)."""
    stop = body.get("stop") or ()
    return Sampling(
        temperature=float(
            body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0
        ),
        top_p=float(body.get("top_p") or 1.0),
        max_tokens=int(
            body.get("max_completion_tokens") or body.get("max_tokens") or DEFAULT_MAX_TOKENS
        ),
        seed=body.get("seed"),
        stop=(stop,) if isinstance(stop, str) else tuple(stop),
        logprobs=bool(body.get("logprobs", False)),
        top_logprobs=int(body.get("top_logprobs") or 0),
        tool_choice=body.get("tool_choice") or "auto",
    )


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


def create_app(backend: Backend, model_name: str) -> Starlette:
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
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            if body.get("stream"):
                return _error(400, "streaming is not supported; send stream=false")
            if int(body.get("n") or 1) != 1:
                return _error(400, "only n=1 is supported")
            raw_messages = body.get("messages")
            if not isinstance(raw_messages, list) or not raw_messages:
                raise ValueError("'messages' must be a non-empty list")
            messages = [message_from_wire(m) for m in raw_messages]
            tools = body.get("tools") or []
            sampling = sampling_from_request(body)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return _error(400, f"invalid request: {exc}")
        try:
            generation = await anyio.to_thread.run_sync(backend.generate, messages, tools, sampling)
        except BackendError as exc:
            if exc.kind == "context_window_exceeded":
                return _error(400, f"maximum context length exceeded: {exc}")
            return _error(500, str(exc), "server_error")
        return JSONResponse(completion_body(generation, model_name))

    async def health(_request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
        ]
    )
