"""What the in-process backends share (`local`: torch, `gguf`: llama.cpp): a turn is one
request to the backend's batch engine (`flatscore.models.request_queue`), decoded token by
token on the engine thread by a `Decoding`, then parsed into a `Generation`.

A backend supplies its tensors' side: picking a token from logits (`_pick`, with the
request's own generator from `_generator`), a token's logprob with top-k
(`_token_logprob`), detokenizing (`decode`), its stop tokens and the request it builds
(`_request`). The rest — stops, `max_tokens`, cancellation, timing, usage and parsing —
is here, once, so the two kinds record a turn the same way.
"""

from __future__ import annotations

import random
import time
from abc import abstractmethod
from typing import Any

from flatscore.episode import Message, TokenLogprob, TokenUsage, TurnTiming
from flatscore.models.base import Backend, FinishReason, Generation, Sampling
from flatscore.models.chat_format import parse_assistant
from flatscore.models.request_queue import QueuedRequest, RequestQueue


class Decoding:
    """One request's decoding state, stepped by the engine thread: picks each token
    (greedy, or sampled with the request's own seed), records logprobs, and ends the turn
    at a stop token, a stop string or `max_tokens`."""

    def __init__(self, backend: EngineBackend, sampling: Sampling) -> None:
        import flatscore.models.cancel as cancel

        # The caller's cancellation signal (a served client that went away), checked on the
        # engine thread between tokens.
        self.cancelled = cancel._current.get()
        self.backend = backend
        self.sampling = sampling
        seed = sampling.seed if sampling.seed is not None else random.getrandbits(63)
        self.generator = backend._generator(seed)
        self.stops = (*sampling.stop, *backend.stop_strings)
        self.out: list[int] = []
        self.logprobs: list[TokenLogprob] = []
        self.finish: FinishReason = "length"
        self.text = ""
        self.first_token_at: float | None = None  # the end of prefill, for TurnTiming

    def step(self, logits: Any) -> int | None:
        from flatscore.models.cancel import GenerationCancelled

        if self.cancelled is not None and self.cancelled.is_set():
            raise GenerationCancelled()
        if self.first_token_at is None:
            self.first_token_at = time.perf_counter()
        b, sampling = self.backend, self.sampling
        token = b._pick(logits, sampling, self.generator)
        if token in b.stop_ids:
            self.finish = "stop"
            return None
        if sampling.logprobs:
            self.logprobs.append(b._token_logprob(logits, token, sampling.top_logprobs))
        self.out.append(token)
        self.text = b.decode(self.out)
        hits = [self.text.index(s) for s in self.stops if s in self.text]
        if hits:
            self.text, self.finish = self.text[: min(hits)], "stop"
            return None
        if len(self.out) >= sampling.max_tokens:
            return None
        return token


class EngineBackend(Backend):
    """A backend whose turns run on its batch engine (`engine`). `stop_ids` end a turn
    as tokens, `stop_strings` (besides the request's own `stop`) as text."""

    engine: RequestQueue[Any, Any]
    stop_ids: set[int]
    stop_strings: tuple[str, ...] = ()

    @abstractmethod
    def decode(self, ids: list[int]) -> str:
        """Text of generated tokens."""

    @abstractmethod
    def _generator(self, seed: int) -> Any:
        """A random generator for one request's sampling, seeded."""

    @abstractmethod
    def _pick(self, logits: Any, sampling: Sampling, generator: Any) -> int:
        """The next token: argmax when greedy, else sampled with `generator`."""

    @abstractmethod
    def _token_logprob(self, logits: Any, token: int, k: int) -> TokenLogprob:
        """`token`'s logprob and the `k` most likely tokens'."""

    @abstractmethod
    def _request(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> tuple[QueuedRequest[Any], Decoding, str]:
        """The engine request for one turn, its decoding, and the text the prompt forces
        the reply to start with (a forced tool call's opening)."""

    @property
    def encoded_tokens(self) -> int:
        """Prompt tokens actually run through the model (all requests)."""
        return self.engine.encoded_tokens

    def _generation(
        self,
        messages: list[Message],
        request: QueuedRequest[Any],
        d: Decoding,
        prefix: str,
        start: float,
    ) -> Generation:
        raw = prefix + d.text
        message = parse_assistant(raw, f"call_{len(messages)}")
        finish = d.finish
        if message.tool_calls and finish == "stop":
            finish = "tool_calls"
        end = time.perf_counter()
        latency = end - start
        usage = TokenUsage(prompt_tokens=len(request.ids), completion_tokens=len(d.out))
        first = d.first_token_at if d.first_token_at is not None else end
        timing = TurnTiming(
            prefill_s=first - start, decode_s=end - first, encoded_tokens=request.encoded
        )
        message = message.model_copy(
            update={"usage": usage, "latency_s": latency, "timing": timing}
        )
        return Generation(
            message=message,
            raw_text=raw,
            logprobs=d.logprobs if d.sampling.logprobs else None,
            usage=usage,
            latency_s=latency,
            finish_reason=finish,
            cached_tokens=len(request.ids) - request.encoded,
        )

    def generate(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> Generation:
        from flatscore.models.cancel import check_cancelled

        start = time.perf_counter()
        check_cancelled()
        request, decoding, prefix = self._request(messages, tools, sampling)
        self.engine.run(request)
        return self._generation(messages, request, decoding, prefix, start)

    async def agenerate(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> Generation:
        """Waits for the engine without holding a thread, so every episode of the arm in
        flight shares its steps (they are batched together)."""
        start = time.perf_counter()
        request, decoding, prefix = self._request(messages, tools, sampling)
        await self.engine.arun(request)
        return self._generation(messages, request, decoding, prefix, start)
