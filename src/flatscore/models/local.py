"""The local backend: a causal LM in-process with torch (fp32 compute, or bf16 linears:
`flatscore.models.compute`), any precision arm.

Every generation request goes to the backend's batch engine (`flatscore.models.batching`):
concurrent requests of one arm share each forward pass (continuous batching), and each
sequence keeps its own KV cache. An episode's conversation only grows, so each turn's
prompt starts with the previous turn's prompt + output: the engine's prefix cache encodes
only the tokens after the longest common token prefix with a cached sequence, and the
system turn every episode of a domain shares is encoded once per arm. Results do not
depend on what else is in the batch (tested: batched = unbatched, token for token).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flatscore import defaults
from flatscore.episode import Message, Serving, TokenLogprob, TopLogprob
from flatscore.errors import InputError
from flatscore.models.base import Sampling
from flatscore.models.batching import BatchEngine, Request, release_freed_memory
from flatscore.models.chat_format import IM_END, encode_conversation, encode_prompt, render
from flatscore.models.embedded import LoadedModel
from flatscore.models.engine_backend import Decoding, EngineBackend
from flatscore.models.footprint import Footprint
from flatscore.models.prefix import common_prefix
from flatscore.models.quant.calibration import CalibrationSource

MIN_SHARED_PREFIX = 32  # shorter system turns are not worth a cache entry of their own


def kv_bytes_per_position(model: Any) -> int:
    """Bytes one position of the KV cache takes: keys and values of every layer, fp32."""
    config = model.config
    heads = int(getattr(config, "num_key_value_heads", None) or config.num_attention_heads)
    dim = int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)
    return int(config.num_hidden_layers) * 2 * heads * dim * 4


@dataclass
class Transcript:
    """A tokenized conversation for teacher forcing: `agent_mask[i]` is True when token i
    was written by the agent; `message_index[i]` is its message (-1 outside agent turns)."""

    ids: list[int]
    agent_mask: list[bool]
    message_index: list[int]


class LocalBackend(EngineBackend):
    """Generation, logprobs and teacher forcing over a loaded model (see `load_model`).

    `max_batch`: sequences decoded together (their KV caches are in memory at once);
    `cache_tokens`: the prefix cache's budget in KV positions (SmolLM2-135M: 46 KB each
    in fp32); `kv_memory_mb`: the most memory the KV caches of the sequences in flight and
    the prefix cache hold together (None: bounded by `max_batch` and `cache_tokens` only;
    `BatchEngine`'s `kv_budget`); `batch_invariant=False`: passes are not padded to 16
    rows, so one sequence alone runs faster but numbers depend on the batch (one stream at
    a time only); `private_prefix`: see `BatchEngine`; `reuse_kv=False` encodes every
    prompt in full (for comparisons)."""

    engine: BatchEngine
    # The end of a turn even where `<|im_end|>` is not one token (a base whose tokenizer
    # does not know ChatML, e.g. Gemma: the adapter learns to write it as plain text).
    stop_strings = (IM_END,)

    def __init__(
        self,
        loaded: LoadedModel,
        *,
        arm: str = "ref",
        max_batch: int = defaults.MAX_BATCH,
        cache_tokens: int = 32_768,
        kv_memory_mb: float | None = defaults.KV_MEMORY_MB,
        batch_invariant: bool = True,
        private_prefix: bool | None = None,
        reuse_kv: bool = True,
        max_context: int | None = None,
    ) -> None:
        self.loaded = loaded
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self.arm = arm
        self.name = f"local:{loaded.name}@{arm}"
        self.reuse_kv = reuse_kv
        self.max_context = max_context or int(
            getattr(self.model.config, "max_position_embeddings", 8192)
        )
        budget = None
        if kv_memory_mb is not None:
            budget = max(1, int(kv_memory_mb * 2**20) // kv_bytes_per_position(self.model))
        self.engine = BatchEngine(
            self.model,
            max_batch=max_batch,
            store_tokens=cache_tokens,
            reuse=reuse_kv,
            kv_budget=budget,
            batch_invariant=batch_invariant,
            private_prefix=private_prefix,
        )
        self._prefix_lengths: dict[str, list[int]] = {}
        self._footprint: Footprint | None = None
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
        compute: str = "fp32",
        adapter: str | None = None,
        **kwargs: Any,
    ) -> LocalBackend:
        """Load `model` (see `load_model`; `adapter` merged into it), apply precision arm
        `arm` to its weights, then the `compute` setting (`flatscore.models.compute`).
        Calibrated arms (int4-awq) use `calibration` (default: the bundled transcripts)."""
        from flatscore.models.compute import apply_compute
        from flatscore.models.embedded import cache_dir, load_model
        from flatscore.models.quant.arms import ARMS, apply_arm
        from flatscore.models.quant.calibration import bundled_calibration, token_sequences

        if arm not in ARMS:
            raise InputError(f"unknown arm {arm!r}; known: {', '.join(ARMS.names())}", field="arm")
        loaded = load_model(model, adapter)
        sequences = None
        if ARMS.make(arm).awq:
            source = calibration or bundled_calibration
            sequences = token_sequences(loaded.tokenizer, source())
        apply_arm(loaded.model, arm, sequences, awq_cache=cache_dir() / "awq")
        apply_compute(loaded.model, compute)
        # Loading's transients (the state dict, the adapter merge, the arm's per-layer
        # copies) are freed by now, but glibc keeps their pages until trimmed.
        release_freed_memory()
        return cls(loaded, arm=arm, **kwargs)

    # ------------------------------------------------------------------ tokens

    def encode(self, text: str) -> list[int]:
        return list(encode_conversation(self.tokenizer, text)["input_ids"])

    def decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids))  # a str already; typed Any

    def clear_cache(self) -> None:
        """Drop every cached KV (e.g. after changing the weights). Not done between
        episodes: the prefix cache is shared by every episode in flight (their previous
        turns, the system turn) and its budget evicts what is no longer used."""
        self.engine.clear()

    def close(self) -> None:
        self.engine.close()

    def serving(self) -> Serving:
        """The arm's weight footprint (computed once) and the process's peak memory now."""
        from flatscore.models.backends import loaded_backend_count
        from flatscore.models.footprint import peak_rss_bytes, process_id, weight_footprint

        if self._footprint is None:
            self._footprint = weight_footprint(self.model, self.arm)
        f = self._footprint
        return Serving(
            backend=self.name,
            parameters=f.parameters,
            weight_bytes=f.weight_bytes,
            bits_per_parameter=round(f.bits_per_parameter, 4),
            weight_format=self.arm,
            resident_weight_bytes=f.resident_weight_bytes,
            peak_rss_bytes=peak_rss_bytes(),
            pid=process_id(),
            arms_in_process=loaded_backend_count(),
        )

    def _shared_prefix(self, messages: list[Message], tools: list[dict[str, Any]]) -> list[int]:
        """The tokens of the system turn (policy + tool listing): every episode of a domain
        starts with them, so the engine keeps them cached once per arm."""
        head = messages[:1] if messages and messages[0].role == "system" else []
        text = render(head, tools, add_generation_prompt=False).text
        ids = self._prefix_lengths.get(text)
        if ids is None:
            ids = self.encode(text)
            if len(self._prefix_lengths) > 64:
                self._prefix_lengths.clear()
            self._prefix_lengths[text] = ids
        return ids

    # ------------------------------------------------------------------ generation

    def _generator(self, seed: int) -> Any:
        import torch

        return torch.Generator().manual_seed(seed)

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

    def _request(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> tuple[Request, Decoding, str]:
        prompt = encode_prompt(messages, tools, sampling, self.encode, self.max_context)
        ids, offered, prefix = prompt.ids, prompt.offered, prompt.prefix
        shared = common_prefix(self._shared_prefix(messages, offered), ids)
        decoding = Decoding(self, sampling)
        request = Request(
            ids=ids,
            step=decoding.step,
            prefix_len=shared if MIN_SHARED_PREFIX <= shared < len(ids) else 0,
            max_new=sampling.max_tokens,
        )
        return request, decoding, prefix

    # ------------------------------------------------------------------ teacher forcing

    def transcript(self, messages: list[Message], tools: list[dict[str, Any]]) -> Transcript:
        """Tokenize a finished conversation, marking the agent-written tokens."""
        rendered = render(messages, tools, add_generation_prompt=False)
        enc = encode_conversation(self.tokenizer, rendered.text, offsets=True)
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
        with torch.inference_mode():
            hidden = self.model.model(input_ids=torch.tensor([ids])).last_hidden_state[0]
            rows = hidden[torch.tensor(targets, dtype=torch.long) - 1]
            return self.model.lm_head(rows).float()
