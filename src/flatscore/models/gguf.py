"""The `gguf` backend: a GGUF file run by llama.cpp in-process (llama-cpp-python, the
optional extra `gguf`), in the same chat format, parsing and records as the local backend.

What people deploy on CPUs is a GGUF file run by llama.cpp; this backend runs exactly such a
file (`flatscore.models.gguf_files` makes the quantized ones), so an arm is a real
deployment format rather than a simulated one. The prompt is rendered by
`flatscore.models.chat_format` (ChatML with the compact tool listing: what the embedded
agent is fine-tuned on), not by the file's own chat template, so every arm of every
backend sees the same text. Token picking is flatscore's, not llama.cpp's sampler: greedy
is the argmax of the raw logits, sampling is temperature + top-p with a per-request seed,
and logprobs are the log-softmax of the raw logits with top-k, as in the local backend.

One sequence runs at a time per arm (a lock): llama.cpp's single stream is what it does
fastest here, and concurrent episodes of an arm wait their turn. The KV cache of the last
prompt is kept, and the next prompt encodes only what follows the longest common token
prefix with it (the system turn every episode shares, or the whole previous turn of the
same conversation). Results are deterministic for a given sequence of requests; reuse can
change the last bits of logits (llama.cpp's kernels differ by batch size), so a rerun in
another order may flip a near-tied greedy token. Documented in docs/backends.md.
"""

from __future__ import annotations

import importlib
import random
import threading
import time
from typing import Any

import numpy as np

from flatscore.episode import Message, Serving, TokenLogprob, TokenUsage, TopLogprob, TurnTiming
from flatscore.models.base import (
    Backend,
    FinishReason,
    Generation,
    Sampling,
)
from flatscore.models.chat_format import (
    IM_END,
    encode_prompt,
    parse_assistant,
)
from flatscore.models.gguf_files import GgufArm, require_llama_cpp, resolve_arm

DEFAULT_CONTEXT = 8192
"""Context window (KV positions) when the file's own training context is longer."""
N_BATCH = 256
"""Prompt tokens per llama.cpp decode call (and the logits buffer's rows)."""


class GgufBackend(Backend):
    """Generation over one GGUF file with llama.cpp; `threads` are llama.cpp's threads for
    decode and prompt alike."""

    def __init__(self, arm: GgufArm, *, threads: int = 1, max_context: int | None = None) -> None:
        require_llama_cpp()
        # Typed as Any: the bindings' own types are there only where the extra is installed.
        llama_cpp: Any = importlib.import_module("llama_cpp")

        self.arm = arm
        self.loaded = arm  # read by the executor: `metadata["weights"]` = arm.description
        self.name = f"gguf:{arm.file.name}"
        self.max_context = max_context or min(arm.context_length, DEFAULT_CONTEXT)
        self.llm: Any = llama_cpp.Llama(
            model_path=str(arm.file),
            n_ctx=self.max_context,
            n_batch=N_BATCH,
            n_ubatch=N_BATCH,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )
        self._llama_cpp = llama_cpp
        self.n_vocab = int(self.llm.n_vocab())
        self._add_bos = bool(self.llm._model.add_bos_token())
        self._lock = threading.Lock()
        self.encoded_tokens = 0  # prompt tokens actually run (all calls)
        self.stop_ids = {self.llm.token_eos(), int(self.llm._model.token_eot())}
        im_end = self.llm.tokenize(IM_END.encode(), add_bos=False, special=True)
        if len(im_end) == 1:
            self.stop_ids.add(im_end[0])
        self.stop_ids.discard(-1)

    @classmethod
    def from_spec(cls, path: str, quant: str, *, threads: int = 1) -> GgufBackend:
        return cls(resolve_arm(path, quant, threads=threads), threads=threads)

    # ------------------------------------------------------------------ tokens

    def encode(self, text: str) -> list[int]:
        """Tokens of a rendered prompt: special tokens parsed, BOS as the file says."""
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=self._add_bos, special=True))

    def decode(self, ids: list[int]) -> str:
        return self.llm.detokenize(ids, special=True).decode("utf-8", errors="replace")

    def close(self) -> None:
        self.llm.close()

    def serving(self) -> Serving:
        from flatscore.models.footprint import peak_rss_bytes, process_id
        from flatscore.models.shared import loaded_backend_count

        parameters = int(self.llm._model.n_params())
        size = int(self.llm._model.size())
        return Serving(
            backend=self.name,
            parameters=parameters,
            weight_bytes=size,
            bits_per_parameter=round(8 * size / parameters, 4) if parameters else None,
            weight_format=f"gguf:{self.arm.quant}",
            resident_weight_bytes=size,
            peak_rss_bytes=peak_rss_bytes(),
            pid=process_id(),
            arms_in_process=loaded_backend_count(),
        )

    # ------------------------------------------------------------------ one step

    def _eval(self, ids: list[int]) -> np.ndarray:
        """Run `ids` after the tokens already in the KV cache; the last position's logits."""
        self.llm.eval(ids)
        ptr = self._llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).astype(np.float64)

    def _reuse(self, ids: list[int]) -> int:
        """Keep the cached KV of the longest common prefix with `ids` (at least one token is
        always run, for its logits); how many positions are kept."""
        cached = self.llm.input_ids[: self.llm.n_tokens]
        n = min(len(cached), len(ids) - 1)
        same = np.asarray(cached[:n]) == np.asarray(ids[:n])
        keep = int(n if same.all() else np.argmin(same))
        self.llm.n_tokens = keep  # eval() drops the KV cache from here on
        return keep

    @staticmethod
    def _pick(logits: np.ndarray, sampling: Sampling, rng: np.random.Generator) -> int:
        if sampling.greedy:
            return int(np.argmax(logits))
        z = logits / sampling.temperature
        p = np.exp(z - z.max())
        p /= p.sum()
        if sampling.top_p < 1.0:
            order = np.argsort(-p, kind="stable")
            sorted_p = p[order]
            outside = np.cumsum(sorted_p) - sorted_p >= sampling.top_p
            sorted_p[outside] = 0.0
            p = np.zeros_like(p)
            p[order] = sorted_p
            p /= p.sum()
        return int(rng.choice(len(p), p=p))

    def _token_logprob(self, logits: np.ndarray, token: int, k: int) -> TokenLogprob:
        m = logits.max()
        logp = logits - (m + np.log(np.exp(logits - m).sum()))
        top: list[TopLogprob] = []
        if k:
            best = np.argpartition(-logp, k)[:k]
            best = best[np.argsort(-logp[best], kind="stable")]
            top = [TopLogprob(token=self.decode([int(i)]), logprob=float(logp[i])) for i in best]
        return TokenLogprob(token=self.decode([token]), logprob=float(logp[token]), top=top)

    # ------------------------------------------------------------------ generation

    def generate(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> Generation:
        from flatscore.serve.cancel import check_cancelled

        start = time.perf_counter()
        check_cancelled()
        prompt = encode_prompt(messages, tools, sampling, self.encode, self.max_context)
        ids, prefix = prompt.ids, prompt.prefix
        seed = sampling.seed if sampling.seed is not None else random.getrandbits(63)
        rng = np.random.default_rng(seed)
        stops = (*sampling.stop, IM_END)
        out: list[int] = []
        logprobs: list[TokenLogprob] = []
        finish: FinishReason = "length"
        text = ""
        with self._lock:
            kept = self._reuse(ids)
            logits = self._eval(ids[kept:])
            self.encoded_tokens += len(ids) - kept
            first = time.perf_counter()
            while True:
                token = self._pick(logits, sampling, rng)
                if token in self.stop_ids:
                    finish = "stop"
                    break
                if sampling.logprobs:
                    logprobs.append(self._token_logprob(logits, token, sampling.top_logprobs))
                out.append(token)
                text = self.decode(out)
                hits = [text.index(s) for s in stops if s in text]
                if hits:
                    text, finish = text[: min(hits)], "stop"
                    break
                if len(out) >= sampling.max_tokens:
                    break
                check_cancelled()  # a served client that went away (GenerationCancelled)
                logits = self._eval([token])
            end = time.perf_counter()
        raw = prefix + text
        message = parse_assistant(raw, f"call_{len(messages)}")
        if message.tool_calls and finish == "stop":
            finish = "tool_calls"
        usage = TokenUsage(prompt_tokens=len(ids), completion_tokens=len(out))
        timing = TurnTiming(
            prefill_s=first - start, decode_s=end - first, encoded_tokens=len(ids) - kept
        )
        message = message.model_copy(
            update={"usage": usage, "latency_s": end - start, "timing": timing}
        )
        return Generation(
            message=message,
            raw_text=raw,
            logprobs=logprobs if sampling.logprobs else None,
            usage=usage,
            latency_s=end - start,
            finish_reason=finish,
            cached_tokens=kept,
        )
