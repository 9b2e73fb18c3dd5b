"""Continuous batching for the local backend: every concurrent generation request of one
arm shares each forward pass.

A 135M model decoding one sequence on a CPU is bound by per-step overhead and by reading
the weights, not by arithmetic, so one forward pass over 16 sequences costs little more
than over one. The engine packs the new tokens of every active sequence into one row
(prefill chunks and single decode tokens side by side, as vLLM and transformers' own
continuous batching do); linear layers run on the packed row, attention runs per sequence
on that sequence's own KV cache. Sequences join and leave between steps.

Why not transformers' `ContinuousBatchingManager`: it returns only the chosen token's
logprob (no top-k), seeds sampling per manager rather than per request, shares prefixes in
256-token pages (a new turn would re-encode up to 255 tokens) and is built around paged
attention kernels for GPUs. What is reused here: the model's own modules and its attention
interface (`AttentionInterface.register`), torch's SDPA.

**Batch invariance.** MKL's sgemm gives bit-identical rows for any number of rows ≥ 16
(measured; below 16 it takes other kernels). Every step is padded to at least
`MIN_ROWS` rows and attention never mixes sequences, so a sequence's tokens and logprobs do
not depend on what else is in the batch: batched equals unbatched exactly, and results do
not depend on the study's concurrency or on timing.

**Prefix cache.** Finished sequences leave their KV cache in a bounded LRU store
(`KVStore`). A new request starts from the entry sharing its longest token prefix: an
entry it fully extends (the previous turn of the same conversation) is taken over; a
partial match is copied (copy-on-write), so the entry stays for others. The prefix every
episode of a domain shares (the system turn: policy + tool schemas) is stored on its own
once per arm. Prefill is cut at that boundary and then in fixed chunks from the reused
point, so a sequence's numbers do not depend on which entry happened to be found first.

**Architectures.** Llama-style decoders (SmolLM2) and Gemma 3: its sliding-window layers
attend to the last `sliding_window` positions only (the window is applied per sequence,
as transformers' own mask does), its layer types get their own rotary embeddings, and a
final logit soft-cap is applied where the config has one.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import inspect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from flatscore.models.prefix import common_prefix
from flatscore.models.request_queue import QueuedRequest, RequestQueue

MIN_ROWS = 16  # pad every forward to at least this many rows (batch invariance, above)
IDLE_TRIM_S = 1.0  # an engine idle this long gives its freed heap back (`release_freed_memory`)
TRIM_EVERY_S = 2.0  # while running: at most this often, after a sequence freed its KV
GRACE_S = 1.0
"""Under a KV budget, a finished turn's cache counts as its conversation's for this long
before the next turn claims it (an episode submits its next turn milliseconds after the
reply). Unclaimed after that, its episode has ended."""
ATTENTION = "flatscore_ragged"
PACK_GQA = "flatscore_pack_gqa"  # model attribute: decode with `gqa_decode_attention`


# ---------------------------------------------------------------------- KV storage


@functools.cache
def _malloc_trim() -> Any:
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to call
        return None


def release_freed_memory() -> bool:
    """Give freed heap pages back to the OS (glibc's `malloc_trim`; False where there is
    none). glibc keeps the pages of freed KV buffers: KV churn like the engine's (16
    sequences growing to 300-2,500 positions, four waves) left +1,002 MiB resident after
    every cache was freed, +70 MiB after a trim (docs/benchmarks.md)."""
    trim = _malloc_trim()
    return trim is not None and bool(trim(0))


class SeqKV:
    """One sequence's KV cache: per layer, key and value buffers [1, heads, capacity, dim]
    written in place (growing by 25% when full), so a decode step copies nothing.
    transformers' DynamicCache concatenates on every step, copying the whole cache.

    A cache may continue a shared prefix (`SeqKV.on(base)`): it reads the base's positions
    and holds only its own, so the system turn every episode of a domain starts with is in
    memory once per arm, not once per sequence. Attention then sees the two joined
    (`torch.cat`, one layer at a time: the same values, a transient copy).

    `want` (positions, its base's included; 0: unknown) is the length the cache is known to
    reach: its buffers are then allocated to exactly that at once, instead of growing by
    25% (each growth a copy, and up to a quarter of the buffer never used)."""

    def __init__(self, layers: int) -> None:
        self.keys: list[torch.Tensor | None] = [None] * layers
        self.values: list[torch.Tensor | None] = [None] * layers
        self.length = 0
        self.base: SeqKV | None = None  # a shared prefix, read only
        self.offset = 0  # positions held by `base`
        self.want = 0  # the length it will reach, when known (exact allocation)

    @classmethod
    def on(cls, base: SeqKV) -> SeqKV:
        """A cache whose first `base.length` positions are `base`'s (never written)."""
        base = base.flat()
        out = cls(len(base.keys))
        out.base, out.offset, out.length = base, base.length, base.length
        return out

    @property
    def capacity(self) -> int:
        """Positions allocated by this cache itself (a shared base is counted where it is
        stored)."""
        k = self.keys[0]
        return 0 if k is None else int(k.shape[2])

    def write(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k/v [1, heads, n, dim] at positions length..length+n of `layer`; return the
        layer's keys/values so far. `length` moves on in `advance`."""
        used = self.length - self.offset
        end = used + k.shape[2]
        buf_k, buf_v = self.keys[layer], self.values[layer]
        if buf_k is None or buf_v is None or buf_k.shape[2] < end:
            exact = self.want - self.offset
            cap = exact if end <= exact else max(end + end // 4, 64)
            new_k = k.new_empty((1, k.shape[1], cap, k.shape[3]))
            new_v = v.new_empty((1, v.shape[1], cap, v.shape[3]))
            if buf_k is not None and buf_v is not None and used:
                new_k[:, :, :used] = buf_k[:, :, :used]
                new_v[:, :, :used] = buf_v[:, :, :used]
            self.keys[layer], self.values[layer] = buf_k, buf_v = new_k, new_v
        assert buf_v is not None
        buf_k[:, :, used:end] = k
        buf_v[:, :, used:end] = v
        if self.base is None:
            return buf_k[:, :, :end], buf_v[:, :, :end]
        base_k, base_v = self.base.keys[layer], self.base.values[layer]
        assert base_k is not None and base_v is not None
        return (
            torch.cat([base_k[:, :, : self.offset], buf_k[:, :, :end]], dim=2),
            torch.cat([base_v[:, :, : self.offset], buf_v[:, :, :end]], dim=2),
        )

    def advance(self, n: int) -> None:
        self.length += n

    def truncate(self, n: int) -> None:
        """Keep the first n positions (the rest is overwritten by later writes)."""
        if n < self.offset:  # cut inside the shared base: hold a copy of its first n
            plain = self.flat().copy_prefix(n)
            self.keys, self.values, self.base, self.offset = plain.keys, plain.values, None, 0
        self.length = min(self.length, n)

    def flat(self, want: int = 0) -> SeqKV:
        """This cache without a shared base (itself when it has none; else a copy, its
        buffers allocated for `want` positions when that is more than it holds)."""
        if self.base is None:
            return self
        out = SeqKV(len(self.keys))
        out.want = max(self.length, want)
        for i in range(len(self.keys)):
            out.write(i, *self._joined(i))
        out.advance(self.length)
        return out

    def _joined(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        assert self.base is not None
        base_k, base_v = self.base.keys[layer], self.base.values[layer]
        own_k, own_v = self.keys[layer], self.values[layer]
        assert base_k is not None and base_v is not None
        used = self.length - self.offset
        parts_k, parts_v = [base_k[:, :, : self.offset]], [base_v[:, :, : self.offset]]
        if own_k is not None and own_v is not None and used:
            parts_k.append(own_k[:, :, :used])
            parts_v.append(own_v[:, :, :used])
        return torch.cat(parts_k, dim=2), torch.cat(parts_v, dim=2)

    def copy_prefix(self, n: int) -> SeqKV:
        """A new cache holding a copy of the first n positions (copy-on-write); it shares
        this cache's base, if it has one and n reaches past it."""
        n = min(n, self.length)
        if self.base is not None and n < self.offset:
            return self.base.copy_prefix(n)
        out = SeqKV(len(self.keys))
        if self.base is not None:
            out.base, out.offset = self.base, self.offset
        own = n - self.offset
        for i, (k, v) in enumerate(zip(self.keys, self.values, strict=True)):
            if k is not None and v is not None and own:
                out.keys[i] = k[:, :, :own].clone()
                out.values[i] = v[:, :, :own].clone()
        out.length = n
        return out


@dataclass
class _Entry:
    ids: list[int]
    kv: SeqKV
    shared: bool  # a shared prefix: always copied, never taken
    prompt_len: int  # where the entry's prompt ends (its generated tokens follow)
    used: float = field(default_factory=time.monotonic)
    born: int = 0  # the conversation's age rank (`BatchEngine`'s budget: older ones stay)


class KVStore:
    """A bounded LRU of KV caches keyed by the token ids they hold. Bounded by the total
    capacity (positions) of the caches it keeps: `max_tokens`."""

    def __init__(self, layers: int, max_tokens: int) -> None:
        self.layers = layers
        self.max_tokens = max_tokens
        self._entries: list[_Entry] = []
        self._lock = threading.Lock()

    @property
    def tokens(self) -> int:
        with self._lock:
            return sum(e.kv.capacity for e in self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def lookup(self, ids: list[int]) -> tuple[SeqKV, int]:
        """A cache for `ids` that the caller owns, and how many of its leading positions
        are valid (at most len(ids) - 1: one token must be fed to get logits).

        Only two kinds of entry are used, so that what a request reuses does not depend on
        timing: a shared prefix that `ids` starts with (copied), and an earlier turn whose
        whole prompt `ids` extends, i.e. the same conversation (taken over; cut where the
        re-rendered reply differs from the generated tokens). A partial match with another
        conversation (say, the system turn plus a few tokens) is not used."""
        with self._lock:
            best, keep = self._best(ids)
            if best is None:
                return SeqKV(self.layers), 0
            best.used = time.monotonic()
            if not best.shared:
                self._entries.remove(best)
                best.kv.truncate(keep)
                return best.kv, keep
        if keep == best.kv.length:  # the whole shared prefix: read in place, never copied
            return SeqKV.on(best.kv), keep
        return best.kv.copy_prefix(keep), keep  # copy-on-write (outside the lock)

    def match(self, ids: list[int]) -> _Entry | None:
        """The entry `lookup(ids)` would take over now (an earlier turn of the same
        conversation), without taking it; None when it would copy a shared prefix or find
        nothing."""
        with self._lock:
            best, _ = self._best(ids)
            return best if best is not None and not best.shared else None

    def _best(self, ids: list[int]) -> tuple[_Entry | None, int]:
        """The entry `lookup` uses for `ids` and its valid positions (the caller holds the
        lock): a shared prefix `ids` starts with, or an earlier turn whose whole prompt `ids`
        extends; the longest such match."""
        best, keep = None, 0
        for entry in self._entries:
            n = min(common_prefix(entry.ids, ids), len(ids) - 1)
            usable = n == len(entry.ids) if entry.shared else n >= entry.prompt_len
            if usable and n > keep:
                best, keep = entry, n
        return best, keep

    def holds(self, entry: _Entry) -> bool:
        with self._lock:
            return any(e is entry for e in self._entries)

    def entries(self) -> list[_Entry]:
        with self._lock:
            return list(self._entries)

    def has_prefix(self, ids: list[int]) -> bool:
        """Whether `ids` is stored as a shared prefix (what `lookup` reads in place; another
        conversation's turn that starts with it is not used, so it does not count)."""
        with self._lock:
            return any(e.shared and e.ids == ids for e in self._entries)

    def _evict(self, limit: int) -> None:
        """Drop least recently used entries until at most `limit` positions are held; shared
        prefixes last (every sequence in flight reads one in place, so dropping it frees
        nothing while they run, and the next episodes would each compute it again)."""
        total = sum(e.kv.capacity for e in self._entries)
        for entry in sorted(self._entries, key=lambda e: (e.shared, e.used)):
            if total <= limit:
                break
            self._entries.remove(entry)
            total -= entry.kv.capacity

    def fit(self, limit: int, order: Callable[[_Entry], Any] | None = None) -> None:
        """Evict entries until the store holds at most `limit` positions (room for the
        sequences in flight: `BatchEngine`'s `kv_budget`): least recently used first, or
        in `order` (a sort key: lowest first; None: never evicted)."""
        with self._lock:
            if order is None:
                self._evict(limit)
                return
            total = sum(e.kv.capacity for e in self._entries)
            ranked = [(order(e), i, e) for i, e in enumerate(self._entries)]
            for *_, entry in sorted((r for r in ranked if r[0] is not None), key=_first2):
                if total <= limit:
                    break
                self._entries.remove(entry)
                total -= entry.kv.capacity

    def put(
        self,
        ids: list[int],
        kv: SeqKV,
        *,
        prompt_len: int = 0,
        shared: bool = False,
        born: int = 0,
    ) -> None:
        """Keep `kv` (holding `ids`), evicting least recently used entries over budget."""
        if not ids or kv.length < len(ids) or kv.capacity > self.max_tokens:
            return
        if shared:
            kv = kv.flat()  # others will read it as their base
        entry = _Entry(list(ids), kv, shared, prompt_len or len(ids), born=born)
        with self._lock:
            self._entries = [e for e in self._entries if e.ids != ids]
            self._entries.append(entry)
            self._evict(self.max_tokens)


def _first2(ranked: tuple[Any, int, _Entry]) -> tuple[Any, int]:
    return ranked[0], ranked[1]


# ---------------------------------------------------------------------- attention


class _RaggedKV(list[torch.Tensor]):
    """Per-sequence keys (or values) of one layer, as returned by `_Packed.update`; the
    attention function below recognises it and attends sequence by sequence."""

    def __init__(self, parts: list[torch.Tensor], packed: _Packed) -> None:
        super().__init__(parts)
        self.packed = packed


def ragged_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: Any,
    value: Any,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """SDPA, sequence by sequence when called from the engine; plain SDPA otherwise (so
    teacher forcing and training on the same model behave as with `sdpa`)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if not isinstance(key, _RaggedKV):
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    packed = key.packed
    outs = []
    start = 0
    window = kwargs.get("sliding_window")
    masks = packed.masks if window is None else packed.window_masks(int(window))
    for k, v, n, mask in zip(key, value, packed.lengths, masks, strict=True):
        q = query[:, :, start : start + n]
        if packed.pack_gqa and n == 1 and mask is None:
            out = gqa_decode_attention(q, k, v, kwargs.get("scaling", module.scaling))
        else:
            out, _ = sdpa_attention_forward(module, q, k, v, mask, **kwargs)
        outs.append(out)
        start += n
    rows = query.shape[2]
    if start < rows:  # padding rows attend to nothing
        outs.append(query.new_zeros((1, rows - start, query.shape[1], query.shape[3])))
    return torch.cat(outs, dim=1), None


def gqa_decode_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scaling: float
) -> torch.Tensor:
    """One decode token's attention with grouped KV heads: the query heads that share a KV
    head become rows of one query block ([1, kv_heads, groups, dim]), so SDPA runs one
    small matmul per KV head instead of expanding K and V to every query head. 1.6-3x
    faster per call at 300-1,500 keys on this CPU; the same math, in another summation
    order (differences ~1e-7), so only the `bf16` compute setting uses it
    (`flatscore.models.compute`): the fp32 setting's numbers stay as they were."""
    heads, dim = query.shape[1], query.shape[3]
    kv_heads = key.shape[1]
    grouped = query.reshape(1, kv_heads, heads // kv_heads, dim)
    out = torch.nn.functional.scaled_dot_product_attention(grouped, key, value, scale=scaling)
    return out.reshape(1, heads, 1, dim).transpose(1, 2)


_REGISTERED = False


def use_ragged_attention(model: Any) -> None:
    """Register the attention function (once) and switch `model` to it."""
    global _REGISTERED
    if not _REGISTERED:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(ATTENTION, ragged_attention)
        AttentionMaskInterface.register(ATTENTION, sdpa_mask)
        _REGISTERED = True
    if model.config._attn_implementation != ATTENTION:
        model.set_attn_implementation(ATTENTION)


class _Packed:
    """The cache object one packed forward pass sees: it splits each layer's new keys and
    values by sequence, writes them into each sequence's `SeqKV`, and hands attention the
    per-sequence views."""

    def __init__(self, kvs: list[SeqKV], lengths: list[int], *, pack_gqa: bool = False) -> None:
        self.kvs = kvs
        self.lengths = lengths
        self.pack_gqa = pack_gqa  # decode tokens attend with `gqa_decode_attention`
        self.pasts = [kv.length for kv in kvs]
        self.masks: list[torch.Tensor | None] = []
        for past, n in zip(self.pasts, lengths, strict=True):
            if n > 1 and past > 0:  # a prefill chunk after cached positions: causal, offset
                q = torch.arange(n)[:, None] + past
                self.masks.append((torch.arange(past + n)[None, :] <= q)[None, None])
            else:
                self.masks.append(None)  # decode (attends to all) or a first chunk (causal)
        self._window_masks: dict[int, list[torch.Tensor | None]] = {}

    def window_masks(self, window: int) -> list[torch.Tensor | None]:
        """Masks of a sliding-window layer: position q attends to positions q - window + 1
        .. q (transformers' `sliding_window_overlay`); None where the window holds them all."""
        if window not in self._window_masks:
            masks: list[torch.Tensor | None] = []
            for past, n, causal in zip(self.pasts, self.lengths, self.masks, strict=True):
                if past + n <= window:
                    masks.append(causal)
                    continue
                q = torch.arange(n)[:, None] + past
                k = torch.arange(past + n)[None, :]
                masks.append(((k <= q) & (k > q - window))[None, None])
            self._window_masks[window] = masks
        return self._window_masks[window]

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, **_: Any
    ) -> tuple[_RaggedKV, _RaggedKV]:
        keys, values = [], []
        start = 0
        for kv, n in zip(self.kvs, self.lengths, strict=True):
            k, v = kv.write(
                layer_idx,
                key_states[:, :, start : start + n],
                value_states[:, :, start : start + n],
            )
            keys.append(k)
            values.append(v)
            start += n
        return _RaggedKV(keys, self), _RaggedKV(values, self)


class EngineClosed(RuntimeError):
    """The engine was closed during a forward pass (raised between layers)."""


def _rotary_per_layer(model: Any, hidden: torch.Tensor, position_ids: torch.Tensor) -> list[Any]:
    """Each layer's rotary embedding: one for all (Llama), or one per layer type where the
    rotary module takes the type (Gemma 3: sliding and full layers use other bases)."""
    inner, n = model.model, int(model.config.num_hidden_layers)
    types = getattr(model.config, "layer_types", None)
    if types and "layer_type" in inspect.signature(inner.rotary_emb.forward).parameters:
        by_type = {t: inner.rotary_emb(hidden, position_ids, t) for t in set(types[:n])}
        return [by_type[t] for t in types[:n]]
    return [inner.rotary_emb(hidden, position_ids=position_ids)] * n


def packed_forward(
    model: Any,
    kvs: list[SeqKV],
    feeds: list[list[int]],
    min_rows: int = MIN_ROWS,
    stop: Callable[[], bool] | None = None,
) -> torch.Tensor:
    """One forward pass over every sequence's new tokens; returns fp32 logits of each
    sequence's last new token, one row per sequence. Advances every `SeqKV`. Rows are
    padded to `min_rows` (batch invariance; 1: no padding). `stop()` is asked between
    layers: True abandons the pass (`EngineClosed`; the caches are then unusable), so a
    closing engine does not wait for a long prefill on a loaded machine."""
    inner = model.model
    lengths = [len(f) for f in feeds]
    ids = [t for f in feeds for t in f]
    pos = [
        p for kv, f in zip(kvs, feeds, strict=True) for p in range(kv.length, kv.length + len(f))
    ]
    rows = max(len(ids), min_rows)
    ids += [0] * (rows - len(ids))
    pos += [0] * (rows - len(pos))
    input_ids = torch.tensor([ids])
    position_ids = torch.tensor([pos])
    packed = _Packed(kvs, lengths, pack_gqa=getattr(model, PACK_GQA, False))
    hidden = inner.embed_tokens(input_ids)
    layers = inner.layers[: model.config.num_hidden_layers]
    for layer, position_embeddings in zip(
        layers, _rotary_per_layer(model, hidden, position_ids), strict=True
    ):
        if stop is not None and stop():
            raise EngineClosed("the batch engine was closed")
        hidden = layer(
            hidden,
            attention_mask=None,
            position_ids=position_ids,
            cache=packed,
            use_cache=True,
            position_embeddings=position_embeddings,
        )
    last = torch.tensor([sum(lengths[: i + 1]) - 1 for i in range(len(lengths))])
    # Pad the head's rows too: the logits of a row must not depend on how many there are.
    picked = torch.cat([last, last.new_zeros(max(0, min_rows - len(last)))])
    logits = model.lm_head(inner.norm(hidden[0, picked]))[: len(lengths)].float()
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap:  # as the model's own forward does (Gemma 2; Gemma 3's config has none)
        logits = torch.tanh(logits / cap) * cap
    for kv, n in zip(kvs, lengths, strict=True):
        kv.advance(n)
    return logits


# ---------------------------------------------------------------------- the scheduler


@dataclass
class Request(QueuedRequest[torch.Tensor]):
    """One generation (`QueuedRequest`: its `step` runs on the engine thread after each
    forward pass that ends its pending tokens; the token picked last when it returns None
    is not fed), plus where the shared prefix ends (0: none known) and its KV cache.
    `max_new` bounds the engine's KV budget for it."""

    prefix_len: int = 0
    # engine state
    kv: SeqKV | None = None  # holds `held`
    born: int = -1  # its conversation's age rank (under a KV budget: older ones go first)
    claim: _Entry | None = None  # the store entry it will take over (its previous turn)


class BatchEngine(RequestQueue[Request, list[Request]]):
    """Runs every submitted request of one model in shared forward passes on one thread
    (`RequestQueue`: submitting, waiting and closing).

    `max_batch` bounds the sequences in flight (their KV caches are in memory at once);
    `chunk` bounds the prompt tokens one sequence feeds per step, so a long prefill does
    not stall everyone's decoding; `store_tokens` bounds the prefix cache. `kv_budget`
    (positions; None: no bound) bounds both together: a request joins only while the
    caches in flight, its prompt and its `max_new` tokens fit (one always runs), and the
    prefix store gives up its least recently used entries to make room. Results do not
    depend on it (batch invariance), only speed does.

    `batch_invariant=False` drops the padding to `MIN_ROWS` rows: a sequence running alone
    then pays for one row, not 16, but its numbers depend on what shares its passes (for
    one stream at a time: a single `flatscore serve` client; never for studies). Its
    sequences also hold the shared prefix in their own cache (`private_prefix`): one copy
    per turn instead of joining it to theirs in every layer of every step (`SeqKV.write`'s
    `torch.cat`: 12% of a lone decode step); the same numbers, more memory per sequence.
    `private_prefix=True` does the same for padded passes (a study's 16 rows: 1.17x faster
    decode steps at a 700-position system turn and 1,500 own positions,
    `python -m benchmarks shared-prefix`); each sequence's copy counts against `kv_budget`."""

    label = "batch engine"
    thread_name = "flatscore-batch"
    idle_s = IDLE_TRIM_S  # idle this long (an arm done with its episodes): `_on_idle`

    def __init__(
        self,
        model: Any,
        *,
        max_batch: int = 16,
        chunk: int = 256,
        store_tokens: int = 32_768,
        reuse: bool = True,
        kv_budget: int | None = None,
        batch_invariant: bool = True,
        private_prefix: bool | None = None,
    ) -> None:
        super().__init__()
        use_ragged_attention(model)
        self.min_rows = MIN_ROWS if batch_invariant else 1
        # See the class docstring; None: on exactly when passes are not padded.
        self.private_prefix = not batch_invariant if private_prefix is None else private_prefix
        self.model = model
        self.max_batch = max(1, max_batch)
        self.chunk = max(1, chunk)
        self.reuse = reuse
        self.kv_budget = kv_budget
        layers = int(model.config.num_hidden_layers)
        self.store = KVStore(layers, min(store_tokens, kv_budget or store_tokens))
        self._layers = layers
        self.peak_kv_tokens = 0  # KV positions held at once: in flight + prefix cache
        self.sequence_passes = 0  # sequences over all passes (/ `steps`: sequences a pass)
        self.trims = 0  # `release_freed_memory` calls: idle, or running (`_trim_if_due`)
        self.trim_every_s = TRIM_EVERY_S  # None: only when idle
        self._freed = False  # a sequence finished since the last trim
        self._births = 0  # conversations seen (their age ranks, `_conversation`)
        self._last_trim = time.monotonic()

    def clear(self) -> None:
        """Drop the prefix cache (e.g. after changing the weights)."""
        self.store.clear()

    def _release(self) -> None:
        self.store.clear()
        release_freed_memory()

    def _on_idle(self) -> None:
        """Idle a while (an arm done with its episodes): freed KV back to the OS."""
        self._trim()

    def _trim(self) -> None:
        release_freed_memory()
        self.trims += 1
        self._freed, self._last_trim = False, time.monotonic()

    def _trim_if_due(self) -> None:
        """While running: give freed heap back at most every `trim_every_s`, and only after
        a sequence finished (its KV freed). The demo's four arms run side by side to the
        end, so idle trims came too late: on its first 330 CPU-seconds this took 700 MiB
        off the resident peak at no measurable CPU cost (docs/benchmarks.md, "flatscore
        demo: memory")."""
        if self.trim_every_s is None or not self._freed:
            return
        if time.monotonic() - self._last_trim >= self.trim_every_s:
            self._trim()

    @property
    def active_tokens(self) -> int:
        """KV positions allocated by the sequences in flight."""
        return sum(r.kv.capacity for r in list(self._active) if r.kv is not None)

    # -------------------------------------------------------------- the loop

    def _need(self, request: Request) -> int:
        """KV positions `request` will have allocated by its end: its shared prefix aside
        when it reads one from the store, with it when it computes the prefix itself (before
        the prefix is stored, it is its own). Exact when `max_new` is known (`SeqKV.want`);
        else `SeqKV`'s growth: +25%, at least 64 positions."""
        if request.kv is not None:
            reads_shared = request.kv.base is not None
        else:
            prefix = request.ids[: request.prefix_len]
            reads_shared = bool(prefix) and self.reuse and self.store.has_prefix(prefix)
        shared = request.prefix_len if reads_shared else 0
        own = len(request.ids) - shared + request.max_new
        need = own if request.max_new else max(own + own // 4 + 1, 64)
        return max(need, request.kv.capacity if request.kv is not None else 0)

    def _want(self, request: Request, kv: SeqKV) -> int:
        """The length `request`'s cache will reach (`SeqKV.want`; 0: unknown, it grows): its
        prompt and every token it may generate. A sequence computing the shared prefix
        itself first holds just the prefix, which then becomes the store's entry."""
        if not request.max_new:
            return 0
        computing = kv.base is None and kv.length < request.prefix_len
        if self.reuse and request.prefix_len and computing:
            return request.prefix_len
        return len(request.ids) + request.max_new

    def _joining(self) -> list[Request]:
        """Waiting requests that join now (as many as there is room for, in slots and in
        the KV budget; in order, so a long request is not overtaken forever). A request
        whose shared prefix another sequence is computing right now waits for it, so that a
        wave of new episodes encodes their common system turn once, not once each."""
        if self.kv_budget is not None:
            return self._joining_bounded(self.kv_budget)
        room = self.max_batch - len(self._active)
        computing = self._prefixes_computing()
        joining: list[Request] = []
        waiting: list[Request] = []
        for request in self._waiting:
            prefix = tuple(request.ids[: request.prefix_len]) if request.prefix_len else ()
            if len(joining) >= room or (self.reuse and prefix and prefix in computing):
                waiting.append(request)
                continue
            joining.append(request)
            if prefix and self.reuse and not self.store.has_prefix(list(prefix)):
                computing.add(prefix)
        self._waiting = waiting
        return joining

    def _prefixes_computing(self) -> set[tuple[int, ...]]:
        """Shared prefixes a sequence in flight is encoding right now (a request that
        starts with one waits for it rather than encoding it again)."""
        return {
            tuple(r.ids[: r.prefix_len])
            for r in self._active
            if r.prefix_len and len(r.held) < r.prefix_len
        }

    def _conversation(self, request: Request) -> _Entry | None:
        """The store entry `request` will take over (its conversation's previous turn), if
        the store still holds it; found once, when the request is first seen, which also
        gives it its conversation's age rank (the entry's, else the next new one)."""
        if request.born < 0:
            entry = self.store.match(request.ids) if self.reuse else None
            request.claim = entry
            if entry is not None and entry.born > 0:
                request.born = entry.born
            else:
                self._births += 1
                request.born = self._births
        claim = request.claim
        return claim if claim is not None and self.store.holds(claim) else None

    def _eviction_order(self) -> Callable[[_Entry], Any]:
        """Under a KV budget, which store entries go first (a sort key; None: kept): turns
        of ended episodes (unclaimed past `GRACE_S`) least recently used first, then
        shared prefixes no sequence reads, then live conversations, the youngest first (an
        evicted conversation is encoded again at its next turn: the youngest is the
        shortest, and the oldest finish and free their memory). A shared prefix that
        a sequence in flight or a stored turn reads in place is kept: evicting it would
        free nothing."""
        in_use = {id(r.kv.base) for r in list(self._active) if r.kv is not None}
        in_use |= {id(e.kv.base) for e in self.store.entries()}
        claimed = {id(r.claim) for r in list(self._waiting) if r.claim is not None}
        now = time.monotonic()

        def key(entry: _Entry) -> tuple[int, float] | None:
            if entry.shared:
                return None if id(entry.kv) in in_use else (1, entry.used)
            if id(entry) not in claimed and now - entry.used > GRACE_S:
                return (0, entry.used)
            return (2, -entry.born)

        return key

    def _joining_bounded(self, budget: int) -> list[Request]:
        """`_joining` under a KV budget: the sequences in flight and the prefix store share
        `budget`. Waiting requests join oldest conversation first; one joins when its cache
        fits after taking over its previous turn's entry and evicting only what ranks below
        its conversation (`_eviction_order`: ended episodes and younger conversations; not
        a shared prefix, which a joining sequence may read in place). So a conversation is
        not evicted to make room for a younger one, which would then be evicted in turn:
        each eviction is a whole conversation encoded again. A conversation that must be
        encoded (new, or evicted) also leaves each older stored one room for its next
        turn's `max_new` tokens."""
        room = self.max_batch - len(self._active)
        claims = {id(r): self._conversation(r) for r in self._waiting}
        entries = self.store.entries()
        key = self._eviction_order()
        pool = sum(self._need(r) for r in self._active) + sum(e.kv.capacity for e in entries)
        gone: set[int] = set()  # entries taken over by joining requests, or to be evicted
        computing = self._prefixes_computing()
        joining: list[Request] = []
        waiting: list[Request] = []
        full = False
        for request in sorted(self._waiting, key=lambda r: r.born):
            prefix = tuple(request.ids[: request.prefix_len]) if request.prefix_len else ()
            if full or len(joining) >= room or (self.reuse and prefix and prefix in computing):
                waiting.append(request)
                continue
            claim = claims[id(request)]
            if claim is not None and id(claim) in gone:  # already counted as evicted
                claim = None
            after = pool + self._need(request) - (claim.kv.capacity if claim else 0)
            limit = budget
            if claim is None:  # to be encoded: leave the older conversations room to go on
                older = sum(
                    1
                    for e in entries
                    if id(e) not in gone
                    and (k := key(e)) is not None
                    and k[0] == 2
                    and e.born < request.born
                )
                limit -= older * request.max_new
            if after > limit and (self._active or joining):
                below = sorted(
                    (
                        (k, e)
                        for e in entries
                        if id(e) not in gone
                        and e is not claim
                        and (k := key(e)) is not None
                        and (k[0] == 0 or (k[0] == 2 and e.born > request.born))
                    ),
                    key=lambda ke: ke[0],
                )
                evict: list[_Entry] = []
                for _, entry in below:
                    if after <= limit:
                        break
                    evict.append(entry)
                    after -= entry.kv.capacity
                if after > limit:
                    full = True
                    waiting.append(request)
                    continue
                gone.update(id(e) for e in evict)
            if claim is not None:
                gone.add(id(claim))
            pool = after
            joining.append(request)
            if prefix and self.reuse and not self.store.has_prefix(list(prefix)):
                computing.add(prefix)
        self._waiting = waiting
        return joining

    def _fit_store(self, leaving: Request | None = None) -> None:
        """Under a KV budget: the store gets what the sequences in flight leave (`leaving`
        is finishing)."""
        if self.kv_budget is None:
            return
        # Requests finished earlier in this step are still listed, without a cache.
        reserved = sum(self._need(r) for r in self._active if r is not leaving and r.kv is not None)
        self.store.fit(max(0, self.kv_budget - reserved), order=self._eviction_order())

    def _admit(self, request: Request) -> None:
        ids = request.ids
        if self.reuse:
            kv, keep = self.store.lookup(ids)
        else:
            kv, keep = SeqKV(self._layers), 0
        want = self._want(request, kv)
        if self.private_prefix:
            kv = kv.flat(want)
        kv.want = want
        request.kv, request.held, request.pending = kv, ids[:keep], ids[keep:]
        request.encoded = len(request.pending)

    def _feed(self, request: Request) -> list[int]:
        """The tokens `request` feeds this step: its next prefill chunk (cut at the shared
        prefix boundary, then every `chunk` tokens from where the reused cache ends), or
        its one decode token."""
        assert request.kv is not None
        start = request.kv.length
        end = start + len(request.pending)
        if request.prefix_len and start < request.prefix_len < end:
            end = request.prefix_len
        end = min(end, start + self.chunk)
        return request.pending[: end - start]

    def _finish(self, request: Request, error: BaseException | None = None) -> None:
        if error is None and self.reuse and request.kv is not None and request.held:
            kv = request.kv
            if self.kv_budget is not None and kv.capacity > kv.length - kv.offset:
                # Its buffers were allocated for `max_new` tokens; a turn writes few of
                # them. Stored at its length, the rest of the budget holds other caches.
                kv = kv.copy_prefix(kv.length)
            self.store.put(
                request.held,
                kv,
                prompt_len=len(request.ids),
                born=max(request.born, 0),
            )
            request.kv = None  # its cache is the store's now: not read in place by it
            self._fit_store(leaving=request)
        request.kv = None
        self._freed = True
        super()._finish(request, error)

    def _plan(self) -> list[Request]:
        return self._joining()

    def _advance(self, joining: list[Request]) -> None:
        with torch.inference_mode():
            for request in joining:
                self._admit(request)
                self.encoded_tokens += request.encoded
            self._active.extend(joining)
            if joining:  # room for those in flight
                self._fit_store()
            self.peak_active = max(self.peak_active, len(self._active))
            self._step()
        self._trim_if_due()

    def _fail_batch(self, error: Exception) -> None:
        for r in self._active:
            self._finish(r, error)
        self._active = []

    def _step(self) -> None:
        for request in [r for r in self._active if r.cancelled]:
            self._finish(request, asyncio.CancelledError())
        active = self._active = [r for r in self._active if not r.cancelled]
        if not active:
            return
        feeds = [self._feed(r) for r in active]
        kvs = [r.kv for r in active]
        logits = packed_forward(
            self.model,
            kvs,  # type: ignore[arg-type]
            feeds,
            self.min_rows,
            stop=lambda: self._closed,
        )
        self.steps += 1
        self.sequence_passes += len(active)
        self.peak_kv_tokens = max(self.peak_kv_tokens, self.active_tokens + self.store.tokens)
        still: list[Request] = []
        for i, (request, fed) in enumerate(zip(active, feeds, strict=True)):
            request.held.extend(fed)
            request.pending = request.pending[len(fed) :]
            if request.prefix_len and len(request.held) == request.prefix_len:
                assert request.kv is not None and request.kv.length == request.prefix_len
                if self.reuse and not self.store.has_prefix(request.held):
                    # The prefix becomes the shared entry, read in place by this sequence
                    # too (or, with `private_prefix`, a copy of it).
                    shared = request.kv.flat()
                    if self.private_prefix:
                        self.store.put(
                            list(request.held), shared.copy_prefix(shared.length), shared=True
                        )
                    else:
                        request.kv = SeqKV.on(shared)
                        self.store.put(list(request.held), shared, shared=True)
                request.kv.want = self._want(request, request.kv)
            if request.pending:
                still.append(request)
                continue
            try:
                token = request.step(logits[i])
            except Exception as exc:  # a bad step fails its own request only
                self._finish(request, exc)
                continue
            if token is None:
                self._finish(request)
            else:
                request.pending = [token]
                still.append(request)
        self._active = still
