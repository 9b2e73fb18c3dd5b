"""The local backend: a causal LM in-process with torch (fp32 compute), any precision arm.

An episode's conversation only grows, so each turn's prompt starts with the previous
turn's prompt + output. The backend keeps a few KV caches ("slots") and re-encodes only the
tokens after the longest common token prefix; the result is the same as a full re-encode
(tested), at a fraction of the prefill cost.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from flatscore.episode import Message, TokenLogprob, TokenUsage, TopLogprob
from flatscore.errors import InputError
from flatscore.models.base import (
    Backend,
    ContextWindowExceeded,
    FinishReason,
    Generation,
    Sampling,
)
from flatscore.models.cancel import check_cancelled
from flatscore.models.chat_format import forced_prefix, parse_assistant, render
from flatscore.models.embedded import LoadedModel
from flatscore.quant.calibration import CalibrationSource


@dataclass
class _Slot:
    """One KV cache and the token ids it holds."""

    cache: Any
    ids: list[int] = field(default_factory=list)
    used: float = 0.0


@dataclass
class Transcript:
    """A tokenized conversation for teacher forcing: `agent_mask[i]` is True when token i
    was written by the agent; `message_index[i]` is its message (-1 outside agent turns)."""

    ids: list[int]
    agent_mask: list[bool]
    message_index: list[int]


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class LocalBackend(Backend):
    """Generation, logprobs and teacher forcing over a loaded model (see `load_model`)."""

    def __init__(
        self,
        loaded: LoadedModel,
        *,
        arm: str = "ref",
        kv_slots: int = 4,
        reuse_kv: bool = True,
        max_context: int | None = None,
    ) -> None:
        self.loaded = loaded
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self.arm = arm
        self.name = f"local:{loaded.name}@{arm}"
        self.reuse_kv = reuse_kv
        self.kv_slots = max(1, kv_slots)
        self.max_context = max_context or int(
            getattr(self.model.config, "max_position_embeddings", 8192)
        )
        self._slots: list[_Slot] = []
        self.encoded_tokens = 0  # prompt tokens actually run through the model (all calls)
        self._lock = threading.Lock()
        self.stop_ids = {
            i
            for i in (
                self.tokenizer.convert_tokens_to_ids("<|im_end|>"),
                self.tokenizer.eos_token_id,
            )
            if isinstance(i, int) and i >= 0 and i != self.tokenizer.unk_token_id
        }

    @classmethod
    def from_spec(
        cls,
        model: str = "embedded",
        arm: str = "ref",
        calibration: CalibrationSource | None = None,
        **kwargs: Any,
    ) -> LocalBackend:
        """Load `model` (see `load_model`) and apply precision arm `arm` to its weights.
        Calibrated arms (int4-awq) use `calibration` (default: the bundled transcripts)."""
        from flatscore.models.embedded import cache_dir, load_model
        from flatscore.quant.arms import ARMS, apply_arm
        from flatscore.quant.calibration import bundled_calibration, token_sequences

        if arm not in ARMS:
            raise InputError(f"unknown arm {arm!r}; known: {', '.join(ARMS)}", field="arm")
        loaded = load_model(model)
        sequences = None
        if ARMS[arm].awq:
            source = calibration or bundled_calibration
            sequences = token_sequences(loaded.tokenizer, source())
        apply_arm(loaded.model, arm, sequences, awq_cache=cache_dir() / "awq")
        return cls(loaded, arm=arm, **kwargs)

    # ------------------------------------------------------------------ tokens

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def reset(self) -> None:
        """Drop every KV cache (e.g. after changing the weights)."""
        with self._lock:
            self._slots.clear()

    def _slot_for(self, ids: list[int]) -> tuple[_Slot, int]:
        """The slot sharing the longest prefix with `ids` (or a fresh/evicted one) and the
        number of its tokens that can be kept."""
        from transformers import DynamicCache

        best, keep = None, 0
        if self.reuse_kv:
            for slot in self._slots:
                n = _common_prefix(slot.ids, ids)
                if n > keep:
                    best, keep = slot, n
        if best is None:
            if len(self._slots) < self.kv_slots:
                best = _Slot(DynamicCache(config=self.model.config))
                self._slots.append(best)
            else:
                best = min(self._slots, key=lambda s: s.used)
                best.cache, best.ids = DynamicCache(config=self.model.config), []
        # At least one token must be fed to get next-token logits.
        keep = min(keep, len(ids) - 1)
        return best, keep

    def _prefill(self, ids: list[int]) -> tuple[_Slot, Any, int]:
        """Feed the prompt, reusing a cached prefix; returns the slot, the last position's
        logits, and how many prompt tokens were actually encoded."""
        import torch

        slot, keep = self._slot_for(ids)
        if keep == 0 and slot.ids:
            from transformers import DynamicCache

            slot.cache, slot.ids = DynamicCache(config=self.model.config), []
        elif keep < len(slot.ids):
            slot.cache.crop(keep - len(slot.ids))  # transformers 5: negative = tokens to drop
            slot.ids = slot.ids[:keep]
        new = ids[keep:]
        out = self.model(
            input_ids=torch.tensor([new]),
            cache=slot.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        slot.ids = list(ids)
        slot.used = time.monotonic()
        self.encoded_tokens += len(new)
        return slot, out.logits[0, -1].float(), len(new)

    def _step(self, slot: _Slot, token: int) -> Any:
        import torch

        out = self.model(input_ids=torch.tensor([[token]]), cache=slot.cache, use_cache=True)
        slot.ids.append(token)
        return out.logits[0, -1].float()

    # ------------------------------------------------------------------ generation

    @staticmethod
    def _pick(logits: Any, sampling: Sampling, generator: Any) -> int:
        import torch

        if sampling.greedy:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / sampling.temperature, dim=-1)
        if sampling.top_p < 1.0:
            sorted_p, order = torch.sort(probs, descending=True)
            outside = torch.cumsum(sorted_p, dim=-1) - sorted_p >= sampling.top_p
            sorted_p[outside] = 0.0
            probs = torch.zeros_like(probs).scatter(0, order, sorted_p)
        return int(torch.multinomial(probs, 1, generator=generator))

    def _token_logprob(self, logits: Any, token: int, k: int) -> TokenLogprob:
        import torch

        logp = torch.log_softmax(logits, dim=-1)
        top: list[TopLogprob] = []
        if k:
            values, indices = torch.topk(logp, k)
            top = [
                TopLogprob(token=self.tokenizer.decode([int(i)]), logprob=float(v))
                for v, i in zip(values, indices, strict=True)
            ]
        return TokenLogprob(
            token=self.tokenizer.decode([token]), logprob=float(logp[token]), top=top
        )

    def generate(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> Generation:
        import torch

        start = time.perf_counter()
        offered = [] if sampling.tool_choice == "none" else tools
        prefix = forced_prefix(sampling.tool_choice) if offered else ""
        ids = self.encode(render(messages, offered).text + prefix)
        if len(ids) + sampling.max_tokens > self.max_context:
            raise ContextWindowExceeded(
                f"prompt of {len(ids)} tokens + max_tokens {sampling.max_tokens} exceeds the "
                f"context window of {self.max_context}"
            )
        seed = sampling.seed if sampling.seed is not None else random.getrandbits(63)
        generator = torch.Generator().manual_seed(seed)
        out: list[int] = []
        logprobs: list[TokenLogprob] = []
        finish: FinishReason = "length"
        text = ""
        with self._lock, torch.inference_mode():
            check_cancelled()  # the client may have left while we waited for the lock
            slot, logits, _ = self._prefill(ids)
            for step in range(sampling.max_tokens):
                check_cancelled()
                token = self._pick(logits, sampling, generator)
                if token in self.stop_ids:
                    finish = "stop"
                    break
                if sampling.logprobs:
                    logprobs.append(self._token_logprob(logits, token, sampling.top_logprobs))
                out.append(token)
                text = self.tokenizer.decode(out)
                hits = [text.index(s) for s in sampling.stop if s in text]
                if hits:
                    text, finish = text[: min(hits)], "stop"
                    break
                if step + 1 < sampling.max_tokens:
                    logits = self._step(slot, token)
        raw = prefix + (text if out else "")
        message = parse_assistant(raw, f"call_{len(messages)}")
        if message.tool_calls and finish == "stop":
            finish = "tool_calls"
        latency = time.perf_counter() - start
        usage = TokenUsage(prompt_tokens=len(ids), completion_tokens=len(out))
        message = message.model_copy(update={"usage": usage, "latency_s": latency})
        return Generation(
            message=message,
            raw_text=raw,
            logprobs=logprobs if sampling.logprobs else None,
            usage=usage,
            latency_s=latency,
            finish_reason=finish,
        )

    # ------------------------------------------------------------------ teacher forcing

    def transcript(self, messages: list[Message], tools: list[dict[str, Any]]) -> Transcript:
        """Tokenize a finished conversation, marking the agent-written tokens."""
        rendered = render(messages, tools, add_generation_prompt=False)
        enc = self.tokenizer(rendered.text, add_special_tokens=False, return_offsets_mapping=True)
        owner = [-1] * len(enc["input_ids"])
        spans = rendered.agent_spans
        j = 0
        for i, (s, _e) in enumerate(enc["offset_mapping"]):
            while j < len(spans) and spans[j].end <= s:
                j += 1
            if j < len(spans) and spans[j].start <= s < spans[j].end:
                owner[i] = spans[j].message_index
        return Transcript(
            ids=list(enc["input_ids"]),
            agent_mask=[o >= 0 for o in owner],
            message_index=owner,
        )

    def teacher_force(self, ids: list[int], targets: list[int] | None = None) -> Any:
        """Logits (fp32 tensor, one row per target) predicting `ids[t]` for each target
        position t (default: every position 1..n-1), in one forward pass."""
        import torch

        if targets is None:
            targets = list(range(1, len(ids)))
        if any(t < 1 or t >= len(ids) for t in targets):
            raise ValueError("targets must lie in 1..len(ids)-1")
        with self._lock, torch.inference_mode():
            hidden = self.model.model(input_ids=torch.tensor([ids])).last_hidden_state[0]
            rows = hidden[torch.tensor(targets, dtype=torch.long) - 1]
            return self.model.lm_head(rows).float()
