"""A backend for any OpenAI-compatible chat-completions server (vLLM, SGLang, llama.cpp
server, OpenAI, `flatscore serve`).

Retries (tenacity) with exponential backoff and jitter, or the server's Retry-After, on
timeouts, connection errors, 429, 5xx and unreadable 200 bodies; never on other 4xx (those
are our bug or a context overflow, and retrying cannot help). One pooled HTTP client per
backend (an `httpx.Client`, and an `httpx.AsyncClient` per event loop) keeps connections to
the endpoint alive across requests; `close()` closes them. The API key is read from an
environment variable at request time and goes only into the Authorization header: never
into the cache key, logs or episodes.
"""

from __future__ import annotations

import asyncio
import os
import random
import shlex
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import httpx
from pydantic import Field
from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from flatscore.episode import Message, Serving, TokenUsage
from flatscore.models.base import Backend, BackendError, ContextWindowExceeded, Generation, Sampling
from flatscore.models.cache import ResponseCache
from flatscore.models.chat_format import render_call
from flatscore.models.wire import (
    calls_from_wire,
    endpoint_timing,
    logprobs_from_wire,
    request_message_to_wire,
)
from flatscore.store.redaction import register_secret
from flatscore.study.backend import Endpoint
from flatscore.study.server import ServedBy

_CONTEXT_HINTS = ("context length", "context_length", "maximum context", "too many tokens")


class OpenAIConfig(Endpoint):
    """Connection settings of one backend: the endpoint's, its URL and served model."""

    base_url: str = "http://127.0.0.1:8000/v1"
    model: str
    backoff_s: float = Field(1.0, ge=0)
    max_backoff_s: float = Field(30.0, ge=0)
    cache_path: Path | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict)
    served_by: ServedBy | None = Field(
        None, description="the server flatscore started for this arm (`server:` arms)"
    )


class OpenAIBackend(Backend):
    def __init__(self, config: OpenAIConfig) -> None:
        self.config = config
        self.name = f"openai:{config.model}"
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        self.cache = ResponseCache(config.cache_path) if config.cache_path else None
        self._sync_slots = threading.BoundedSemaphore(config.endpoint_concurrency)
        self._sync_client: httpx.Client | None = None
        self._client_lock = threading.Lock()
        # one semaphore and one client per event loop: asyncio objects cannot cross loops
        self._per_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[asyncio.Semaphore, httpx.AsyncClient]
        ] = weakref.WeakKeyDictionary()

    def _limits(self) -> httpx.Limits:
        n = self.config.endpoint_concurrency
        return httpx.Limits(max_connections=n, max_keepalive_connections=n)

    def _client(self) -> httpx.Client:
        """The backend's pooled client (thread-safe; created on first use)."""
        with self._client_lock:
            if self._sync_client is None:
                self._sync_client = httpx.Client(
                    timeout=self.config.timeout_s, limits=self._limits()
                )
            return self._sync_client

    def _loop_state(self) -> tuple[asyncio.Semaphore, httpx.AsyncClient]:
        """This event loop's request slots and pooled async client."""
        loop = asyncio.get_running_loop()
        if loop not in self._per_loop:
            client = httpx.AsyncClient(timeout=self.config.timeout_s, limits=self._limits())
            self._per_loop[loop] = (asyncio.Semaphore(self.config.endpoint_concurrency), client)
        return self._per_loop[loop]

    # ------------------------------------------------------------------ request/response

    def request_body(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [request_message_to_wire(m) for m in messages],
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens,
        }
        if tools:
            body["tools"] = tools
            body["tool_choice"] = sampling.tool_choice
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if sampling.logprobs:
            body["logprobs"] = True
            if sampling.top_logprobs:
                body["top_logprobs"] = sampling.top_logprobs
        body.update(self.config.extra_body)
        return body

    def _headers(self) -> dict[str, str]:
        env = self.config.api_key_env
        key = os.environ.get(env) if env else None
        register_secret(key)  # masked in every error, cache entry and episode from now on
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _cache_request(self, body: dict[str, Any], sampling: Sampling) -> dict[str, Any] | None:
        """The cache key's request, or None when the answer is not reproducible (sampling
        without a seed: caching would make every trial identical)."""
        if self.cache is None or (not sampling.greedy and sampling.seed is None):
            return None
        served = self.config.served_by
        # a server flatscore started listens on another port each run: key by what it serves
        url = self.url if served is None else shlex.join(_without_port(served.command))
        return {"url": url, "body": body}

    @staticmethod
    def _check(response: httpx.Response) -> dict[str, Any]:
        """The JSON body of a successful response, or the classified error."""
        status = response.status_code
        if status == 429:
            raise BackendError("rate limited (429)", kind="rate_limit", status=status)
        if status == 408:
            raise BackendError("request timeout (408)", kind="timeout", status=status)
        if status >= 500:
            # the body says why (llama.cpp's server: the validation error that refused it)
            text = " ".join(response.text[:300].split())
            raise BackendError(
                f"server error {status}: {text}" if text else f"server error {status}",
                kind="server_error",
                status=status,
            )
        if status >= 400:
            text = response.text[:500]
            if any(h in text.lower() for h in _CONTEXT_HINTS):
                raise ContextWindowExceeded(f"{status}: {text}")
            raise BackendError(f"client error {status}: {text}", kind="client_error", status=status)
        try:
            body = response.json()
            choice = body["choices"][0]
            if not isinstance(choice["message"], dict):
                raise TypeError("message is not an object")
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise BackendError(
                f"unreadable response body: {exc!s:.200}", kind="invalid_response", status=status
            ) from exc
        return dict(body)

    @staticmethod
    def to_generation(body: dict[str, Any], latency_s: float, cached: bool) -> Generation:
        choice = body["choices"][0]
        wire = choice["message"]
        extra = choice.get("flatscore") or {}
        content = wire.get("content")
        calls = calls_from_wire(wire.get("tool_calls"))
        raw_text = extra.get("raw_text")
        if raw_text is None:
            raw_text = "\n".join(([content] if content else []) + [render_call(c) for c in calls])
        malformed = bool(extra.get("malformed")) or (not content and not calls)
        raw_usage = body.get("usage") or {}
        usage = TokenUsage(
            prompt_tokens=int(raw_usage.get("prompt_tokens") or 0),
            completion_tokens=int(raw_usage.get("completion_tokens") or 0),
        )
        message = Message(
            role="assistant",
            content=raw_text if malformed else content,
            tool_calls=[] if malformed else calls,
            malformed=malformed,
            usage=usage,
            latency_s=latency_s,
            timing=endpoint_timing(body.get("timings")),
        )
        finish = choice.get("finish_reason")
        return Generation(
            message=message,
            raw_text=raw_text,
            logprobs=logprobs_from_wire(choice.get("logprobs")),
            usage=usage,
            latency_s=latency_s,
            finish_reason=finish if finish in ("stop", "length", "tool_calls") else "stop",
            cached=cached,
        )

    def _read(self, response: httpx.Response) -> dict[str, Any]:
        """The body of a successful response; a failure keeps the server's Retry-After."""
        try:
            return self._check(response)
        except BackendError as error:
            error.retry_after = response.headers.get("retry-after")
            raise

    @staticmethod
    def _transport_error(exc: httpx.TransportError) -> BackendError:
        if isinstance(exc, httpx.TimeoutException):
            return BackendError(f"timeout: {exc!r:.200}", kind="timeout")
        return BackendError(f"connection: {exc!r:.200}", kind="connection")

    def _wait(self, state: RetryCallState) -> float:
        """Seconds before the next attempt: the server's Retry-After when it sent one (capped),
        else exponential backoff with jitter."""
        error = state.outcome.exception() if state.outcome is not None else None
        retry_after = getattr(error, "retry_after", None)
        if retry_after:
            try:
                return min(float(retry_after), self.config.max_backoff_s)
            except ValueError:
                pass
        base = self.config.backoff_s * 2 ** (state.attempt_number - 1)
        return min(self.config.max_backoff_s, base) * random.uniform(0.5, 1.0)

    def _policy(self) -> dict[str, Any]:
        """The retry policy: retryable `BackendError`s only; the last error is raised."""
        return {
            "stop": stop_after_attempt(self.config.max_retries + 1),
            "retry": retry_if_exception(lambda e: isinstance(e, BackendError) and e.retryable),
            "wait": self._wait,
            "reraise": True,
        }

    def _prepare(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> tuple[dict[str, Any], dict[str, Any] | None, Generation | None]:
        """The request body, its cache key (None: not cacheable) and a cached answer."""
        body = self.request_body(messages, tools, sampling)
        key = self._cache_request(body, sampling)
        if key is not None and self.cache is not None and (hit := self.cache.get(key)):
            return body, key, self.to_generation(hit[0], hit[1], cached=True)
        return body, key, None

    # ------------------------------------------------------------------ sync

    def generate(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> Generation:
        body, key, hit = self._prepare(messages, tools, sampling)
        if hit is not None:
            return hit
        with self._sync_slots:
            data, latency = Retrying(**self._policy())(self._post, body)
        return self._finish(key, data, latency)

    def _post(self, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """One attempt: the response body and its latency, or a classified `BackendError`."""
        start = time.perf_counter()
        try:
            response = self._client().post(self.url, json=body, headers=self._headers())
        except httpx.TransportError as exc:  # timeouts included
            raise self._transport_error(exc) from exc
        return self._read(response), time.perf_counter() - start

    def _finish(
        self, key: dict[str, Any] | None, data: dict[str, Any], latency: float
    ) -> Generation:
        generation = self.to_generation(data, latency, cached=False)
        if key is not None and self.cache is not None:
            self.cache.put(key, data, latency)
        return generation

    # ------------------------------------------------------------------ async

    async def agenerate(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> Generation:
        body, key, hit = self._prepare(messages, tools, sampling)
        if hit is not None:
            return hit
        slots, client = self._loop_state()
        async with slots:
            result: tuple[dict[str, Any], float] = await AsyncRetrying(**self._policy())(
                self._apost, client, body
            )
        data, latency = result
        return self._finish(key, data, latency)

    async def _apost(
        self, client: httpx.AsyncClient, body: dict[str, Any]
    ) -> tuple[dict[str, Any], float]:
        """`_post`, asynchronously."""
        start = time.perf_counter()
        try:
            response = await client.post(self.url, json=body, headers=self._headers())
        except httpx.TransportError as exc:  # timeouts included
            raise self._transport_error(exc) from exc
        return self._read(response), time.perf_counter() - start

    def serving(self) -> Serving | None:
        """For a server flatscore started: which server, its version and command line."""
        served = self.config.served_by
        if served is None:
            return None
        return Serving(
            backend=self.name,
            server=served.kind,
            server_version=served.version,
            server_command=list(served.command),
            pid=served.pid,
        )

    def close(self) -> None:
        """Close the pooled clients (and the cache). An async client whose event loop is
        still open is closed on it; one whose loop is closed lost its connections with it."""
        with self._client_lock:
            if self._sync_client is not None:
                self._sync_client.close()
                self._sync_client = None
        for loop, (_, client) in list(self._per_loop.items()):
            if not loop.is_closed() and not loop.is_running():
                loop.run_until_complete(client.aclose())
        self._per_loop.clear()
        if self.cache is not None:
            self.cache.close()


def _without_port(command: tuple[str, ...]) -> list[str]:
    """A server's command line without its port (the value after `--port`)."""
    out = list(command)
    for i, arg in enumerate(out[:-1]):
        if arg == "--port":
            out[i + 1] = "PORT"
    return out
