"""A backend for any OpenAI-compatible chat-completions server (vLLM, SGLang, llama.cpp
server, OpenAI, `flatscore serve`).

Retries with exponential backoff on timeouts, connection errors, 429, 5xx and unreadable
200 bodies; never on other 4xx (those are our bug or a context overflow, and retrying
cannot help). The API key is read from an environment variable at request time and goes
only into the Authorization header: never into the cache key, logs or episodes.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from flatscore.episode import Message, TokenUsage
from flatscore.models.base import Backend, BackendError, ContextWindowExceeded, Generation, Sampling
from flatscore.models.cache import ResponseCache
from flatscore.models.chat_format import render_call
from flatscore.models.wire import calls_from_wire, logprobs_from_wire, message_to_wire
from flatscore.secrets import register_secret

_CONTEXT_HINTS = ("context length", "context_length", "maximum context", "too many tokens")


class OpenAIConfig(BaseModel):
    """Connection settings. `api_key_env` names the variable holding the key (None: no key)."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = "http://127.0.0.1:8000/v1"
    model: str
    api_key_env: str | None = "OPENAI_API_KEY"
    timeout_s: float = Field(120.0, gt=0)
    max_retries: int = Field(4, ge=0)
    backoff_s: float = Field(1.0, ge=0)
    max_backoff_s: float = Field(30.0, ge=0)
    concurrency: int = Field(8, ge=1)
    cache_path: Path | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict)


class OpenAIBackend(Backend):
    def __init__(self, config: OpenAIConfig) -> None:
        self.config = config
        self.name = f"openai:{config.model}"
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        self.cache = ResponseCache(config.cache_path) if config.cache_path else None
        self._sync_slots = threading.BoundedSemaphore(config.concurrency)
        # one semaphore per event loop: asyncio primitives cannot cross loops
        self._async_slots: dict[int, asyncio.Semaphore] = {}

    # ------------------------------------------------------------------ request/response

    def request_body(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [message_to_wire(m) for m in messages],
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
        return {"url": self.url, "body": body}

    @staticmethod
    def _check(response: httpx.Response) -> dict[str, Any]:
        """The JSON body of a successful response, or the classified error."""
        status = response.status_code
        if status == 429:
            raise BackendError("rate limited (429)", kind="rate_limit", status=status)
        if status == 408:
            raise BackendError("request timeout (408)", kind="timeout", status=status)
        if status >= 500:
            raise BackendError(f"server error {status}", kind="server_error", status=status)
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

    def _outcome(
        self, response: httpx.Response | httpx.HTTPError
    ) -> dict[str, Any] | tuple[BackendError, str | None]:
        """One attempt's result, shared by the sync and async paths: the response body, or
        the classified error with the server's Retry-After header."""
        if isinstance(response, httpx.TimeoutException):
            return BackendError(f"timeout: {response!r:.200}", kind="timeout"), None
        if isinstance(response, httpx.HTTPError):
            return BackendError(f"connection: {response!r:.200}", kind="connection"), None
        try:
            return self._check(response)
        except BackendError as error:
            return error, response.headers.get("retry-after")

    def _retry_delay(self, attempt: int, failure: tuple[BackendError, str | None]) -> float:
        """Seconds to wait before the next attempt; raises the error when it is final."""
        error, retry_after = failure
        if not error.retryable or attempt == self.config.max_retries:
            raise error
        if retry_after:
            try:
                return min(float(retry_after), self.config.max_backoff_s)
            except ValueError:
                pass
        base = min(self.config.max_backoff_s, self.config.backoff_s * 2**attempt)
        return base * random.uniform(0.5, 1.0)

    # ------------------------------------------------------------------ sync

    def generate(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> Generation:
        body = self.request_body(messages, tools, sampling)
        key = self._cache_request(body, sampling)
        if key is not None and self.cache is not None and (hit := self.cache.get(key)):
            return self.to_generation(hit[0], hit[1], cached=True)
        with self._sync_slots, httpx.Client(timeout=self.config.timeout_s) as client:
            for attempt in range(self.config.max_retries + 1):
                start = time.perf_counter()
                response: httpx.Response | httpx.HTTPError
                try:
                    response = client.post(self.url, json=body, headers=self._headers())
                except httpx.TransportError as exc:  # timeouts included
                    response = exc
                outcome = self._outcome(response)
                if isinstance(outcome, dict):
                    return self._finish(key, outcome, time.perf_counter() - start)
                time.sleep(self._retry_delay(attempt, outcome))
        raise AssertionError("unreachable")

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
        body = self.request_body(messages, tools, sampling)
        key = self._cache_request(body, sampling)
        if key is not None and self.cache is not None and (hit := self.cache.get(key)):
            return self.to_generation(hit[0], hit[1], cached=True)
        loop = id(asyncio.get_running_loop())
        slots = self._async_slots.setdefault(loop, asyncio.Semaphore(self.config.concurrency))
        async with slots, httpx.AsyncClient(timeout=self.config.timeout_s) as client:
            for attempt in range(self.config.max_retries + 1):
                start = time.perf_counter()
                response: httpx.Response | httpx.HTTPError
                try:
                    response = await client.post(self.url, json=body, headers=self._headers())
                except httpx.TransportError as exc:  # timeouts included
                    response = exc
                outcome = self._outcome(response)
                if isinstance(outcome, dict):
                    return self._finish(key, outcome, time.perf_counter() - start)
                await asyncio.sleep(self._retry_delay(attempt, outcome))
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
