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

Several episodes of an arm run at a time (`flatscore.models.gguf_batch`): each is a
llama.cpp sequence with its own KV stream, and every sequence in flight shares each
`llama_decode` call; a request reuses the cached KV of the longest token prefix it shares
with an earlier one (the previous turn of its conversation, or another episode's system
turn) and encodes only what follows. How many run at once (`max_batch`) is bounded by the
KV memory (`kv_memory_mb`): llama.cpp allocates each sequence's `max_context` positions up
front. Picks are per request (own seed), so an episode's tokens do not depend on the
others' picks, and for Q4_0, Q4_1 and Q8_0 files its logits do not either: the
engine keeps every call in llama.cpp's kernels whose bits do not depend on the call
(`flatscore.models.gguf_batch`), so an episode gives the same tokens and logprobs alone, in
a batch, or from a cached prefix. K-quant files depend on the batch in the last bits, which
flips a greedy token only at a near-tie. Measured in docs/benchmarks.md.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from flatscore import defaults
from flatscore.episode import Message, Serving, TokenLogprob, TopLogprob
from flatscore.models.base import Sampling
from flatscore.models.chat_format import IM_END, encode_prompt
from flatscore.models.engine_backend import Decoding, EngineBackend
from flatscore.models.gguf_batch import ONE_CHUNK_ROWS, GgufBatchEngine, GgufRequest
from flatscore.models.gguf_files import GgufArm, require_llama_cpp, resolve_arm

DEFAULT_CONTEXT = 4096
"""KV positions per sequence in studies (built-in domains' episodes stay under ~2,000)
when the file's own training context is longer."""
SERVE_CONTEXT = 8192
"""KV positions per sequence for `flatscore serve --kind gguf` (τ²'s policies alone are
3-4k tokens)."""


class GgufBackend(EngineBackend):
    """Generation over one GGUF file with llama.cpp; `threads` are llama.cpp's threads for
    decode and prompt alike. `max_batch` sequences in flight at most, fewer when their KV
    (`max_context` positions each, f16) would exceed `kv_memory_mb`."""

    engine: GgufBatchEngine
    stop_strings = (IM_END,)  # the end of a turn even where it is not one token

    def __init__(
        self,
        arm: GgufArm,
        *,
        threads: int = 1,
        max_context: int | None = None,
        max_batch: int = defaults.MAX_BATCH,
        kv_memory_mb: float | None = defaults.KV_MEMORY_MB,
    ) -> None:
        require_llama_cpp()
        # Typed as Any: the bindings' own types are there only where the extra is installed.
        llama_cpp: Any = importlib.import_module("llama_cpp")

        self.arm = arm
        self.loaded = arm  # read by the executor: `metadata["weights"]` = arm.description
        self.name = f"gguf:{arm.file.name}"
        self.max_context = max_context or min(arm.context_length, DEFAULT_CONTEXT)
        # The model and its tokenizer; its own context (one small stream) is never decoded.
        self.llm: Any = llama_cpp.Llama(
            model_path=str(arm.file),
            n_ctx=64,
            n_batch=64,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )
        model = self.llm._model.model
        self.kv_bytes_per_position = kv_bytes_per_position(llama_cpp, model)
        slots = max_batch
        if kv_memory_mb is not None:
            per_sequence = self.max_context * self.kv_bytes_per_position
            slots = min(max_batch, int(kv_memory_mb * 2**20 // per_sequence))
        self.max_batch = max(1, slots)
        self.n_vocab = int(self.llm.n_vocab())
        self.engine = GgufBatchEngine(
            llama_cpp,
            model,
            n_vocab=self.n_vocab,
            slots=self.max_batch,
            context=self.max_context,
            threads=threads,
        )
        self._add_bos = bool(self.llm._model.add_bos_token())
        self.stop_ids = {self.llm.token_eos(), int(self.llm._model.token_eot())}
        im_end = self.llm.tokenize(IM_END.encode(), add_bos=False, special=True)
        if len(im_end) == 1:
            self.stop_ids.add(im_end[0])
        self.stop_ids.discard(-1)

    @classmethod
    def from_spec(cls, path: str, quant: str, *, threads: int = 1, **options: Any) -> GgufBackend:
        """The backend of `path` at `quant` (`resolve_arm`); `options` as the constructor's
        (`max_context`, `max_batch`, `kv_memory_mb`)."""
        return cls(resolve_arm(path, quant, threads=threads), threads=threads, **options)

    def clear_cache(self) -> None:
        """Forget cached prefixes: the next request encodes its whole prompt."""
        self.engine.clear()

    # ------------------------------------------------------------------ tokens

    def encode(self, text: str) -> list[int]:
        """Tokens of a rendered prompt: special tokens parsed, BOS as the file says."""
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=self._add_bos, special=True))

    def decode(self, ids: list[int]) -> str:
        return self.llm.detokenize(ids, special=True).decode("utf-8", errors="replace")

    def close(self) -> None:
        self.engine.close()
        self.llm.close()

    def serving(self) -> Serving:
        from flatscore.models.backends import loaded_backend_count
        from flatscore.models.footprint import peak_rss_bytes, process_id

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

    def _generator(self, seed: int) -> Any:
        return np.random.default_rng(seed)

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

    def _request(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> tuple[GgufRequest, Decoding, str]:
        prompt = encode_prompt(messages, tools, sampling, self.encode, self.max_context)
        decoding = Decoding(self, sampling)
        request = GgufRequest(ids=prompt.ids, step=decoding.step, max_new=sampling.max_tokens)
        return request, decoding, prompt.prefix

    # ------------------------------------------------------------------ teacher forcing

    def teacher_force(self, ids: list[int], targets: list[int] | None = None) -> np.ndarray:
        """Logits (float32, one row per target) predicting `ids[t]` for each target position t
        (default: every position 1..n-1), as `LocalBackend.teacher_force` gives them: in a
        context of its own (the engine's is untouched), in chunks of `ONE_CHUNK_ROWS`, so a
        row has the bits a generation sees at that position."""
        lib = self.engine._lib
        if targets is None:
            targets = list(range(1, len(ids)))
        if any(t < 1 or t >= len(ids) for t in targets):
            raise ValueError("targets must lie in 1..len(ids)-1")
        wanted = {t - 1 for t in targets}
        ctx = self.engine.new_context(len(ids), ONE_CHUNK_ROWS, 1)
        batch = lib.llama_batch_init(ONE_CHUNK_ROWS, 0, 1)
        rows: dict[int, np.ndarray] = {}
        try:
            for start in range(0, len(ids), ONE_CHUNK_ROWS):
                chunk = ids[start : start + ONE_CHUNK_ROWS]
                batch.n_tokens = len(chunk)
                for j, token in enumerate(chunk):
                    batch.token[j], batch.pos[j], batch.n_seq_id[j] = token, start + j, 1
                    batch.seq_id[j][0], batch.logits[j] = 0, start + j in wanted
                if lib.llama_decode(ctx, batch) != 0:
                    raise RuntimeError("llama_decode failed while teacher-forcing")
                for j in range(len(chunk)):
                    if start + j in wanted:
                        ptr = lib.llama_get_logits_ith(ctx, j)
                        rows[start + j] = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()
        finally:
            lib.llama_batch_free(batch)
            lib.llama_free(ctx)
        return (
            np.stack([rows[t - 1] for t in targets])
            if targets
            else np.zeros((0, self.n_vocab), np.float32)
        )


def kv_bytes_per_position(llama_cpp: Any, model: Any) -> int:
    """KV bytes one position takes in every layer (f16 keys and values)."""
    layers = int(llama_cpp.llama_model_n_layer(model))
    heads = int(llama_cpp.llama_model_n_head(model))
    kv_heads = int(llama_cpp.llama_model_n_head_kv(model))
    head_dim = int(llama_cpp.llama_model_n_embd(model)) // heads
    return layers * 2 * kv_heads * head_dim * 2
