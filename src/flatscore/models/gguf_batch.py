"""Several sequences of one GGUF arm in each llama.cpp decode call: the `gguf` backend's
batch engine.

llama.cpp decodes a 135M model on a CPU bound by per-call overhead and by reading the
weights, so one `llama_decode` over 16 sequences costs little more than over one (the
bindings' raw batches: 94-118 tok/s at 16 sequences vs 43-67 for one stream, measured on 2 cores).
Each sequence in flight is a llama.cpp sequence id with its own KV stream
(`kv_unified=False`): attention reads only that sequence's cells. A unified cache would let
sequences share cells, but every token would then attend over the cells of all of them
(masked), which at 16 sequences of ~1,000 positions costs several times the weights.

llama.cpp splits a batch of several streams into micro-batches of consecutive sequence ids
(`split_equal`), so the sequences in flight hold the lowest ids: a request joins at the
lowest free id, and when one leaves, the highest moves down into its place (its KV copied
with the state API: only its own cells).

**Prefix cache.** A finished sequence leaves its KV behind as host-memory state
(`llama_state_seq_get_data`: its cells only, 23 KB per position for SmolLM2 in f16), in a
bounded LRU store. A new request restores the entry sharing its longest token prefix (the
previous turn of its conversation, or another episode's system turn) and trims what
follows (`llama_memory_seq_rm`): it encodes only the tokens after the common prefix.
Episodes that start together share their system turn the same way: a waiting request whose
prompt shares at least `MIN_SHARED` more tokens with a prompt being encoded right now than
with the store waits until that prompt is done, which then goes to the store for it.

**Batch invariance.** Token picking is the caller's (`step`, on the raw logits, with the
request's own seed). A row's bits depend on one thing in a call: llama.cpp's CPU flash
attention computes a sequence's rows with a tiled kernel once the call holds 64 or more of
its positions (`GGML_FA_TILE_Q`), and with a row-by-row kernel below that; the two give
other bits. Below 64 rows a position's KV and logits are the same bits whatever call
computes them (one token per call, chunks of 2-63, other sequences alongside: measured
max |Δ| = 0 on Q4_0, Q4_1 and Q8_0; 0.79-1.21 at 64; docs/benchmarks.md). So a prompt feeds at
most `ONE_CHUNK_ROWS` tokens per call, and a sequence's KV is a function of its tokens
alone: a generation gives the same tokens and logprobs, bit for bit, alone, with others,
from a restored prefix (another episode's or its own earlier turn), and across a context
that grew (tests/models/test_gguf_batch.py). The price is prompt speed: 63-token chunks
took ~1.2x the CPU of 256-token ones. Each step runs one token of every sequence in one
shared call and each prompt's next chunk in a call of its own. Measured at one thread,
for Q4_0, Q4_1 and Q8_0, with flash attention on. Not for the K-quants (Q4_K_M): their
repacked kernels give a row other bits for most row counts, so those arms depend on the
batch (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import ctypes
import struct
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from flatscore.models.prefix import common_prefix
from flatscore.models.request_queue import QueuedRequest, RequestQueue


@dataclass
class GgufRequest(QueuedRequest[np.ndarray]):
    """One generation (`QueuedRequest`) and, while in flight, its llama.cpp sequence id."""

    # engine state
    seq: int = -1


STATE_PREFIX = 8
"""Bytes llama.cpp's sequence state starts with before the KV cache's part (llama-cpp-python
0.3.36's llama.cpp: kept as they are)."""

ONE_CHUNK_ROWS = 63
"""The most positions of one sequence a call computes: llama.cpp's CPU flash attention
switches to its tiled kernel, whose rows have other bits, at 64 (`GGML_FA_TILE_Q`)."""

MIN_SHARED = 32
"""A waiting request waits for a prompt being encoded only when it would reuse at least this
many more of its tokens (shorter shared heads are not worth the wait)."""


def portable_state(state: bytes, streams: int) -> bytes:
    """One sequence's llama.cpp state (`llama_state_seq_get_data`: a prefix, the context's
    stream count, then per stream a cell count and, where not zero, its cells; one
    sequence's cells are in one stream) without the stream count: the prefix, then the one
    non-empty stream's cell count and cells (b"": no cells, or a layout not recognised).
    llama.cpp refuses state saved with another stream count, and the context grows."""
    offset = STATE_PREFIX
    if len(state) < offset + 4 or struct.unpack_from("<I", state, offset)[0] != streams:
        return b""
    offset += 4
    for s in range(streams):
        (cells,) = struct.unpack_from("<I", state, offset)
        if cells:
            end = len(state) - 4 * (streams - s - 1)  # the empty streams after it
            return state[:STATE_PREFIX] + state[offset:end]
        offset += 4
    return b""


class StateStore:
    """Finished sequences' KV as llama.cpp state bytes, LRU, bounded in positions."""

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self._entries: OrderedDict[tuple[int, ...], bytes] = OrderedDict()

    @property
    def tokens(self) -> int:
        return sum(len(k) for k in self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def _longest(self, ids: list[int]) -> tuple[tuple[int, ...], int]:
        best: tuple[int, ...] = ()
        keep = 0
        for key in self._entries:
            n = min(common_prefix(key, ids), len(ids) - 1)
            if n > keep:
                best, keep = key, n
        return best, keep

    def lookup(self, ids: list[int]) -> tuple[tuple[int, ...], int]:
        """The entry sharing the longest prefix with `ids` and that length (≤ len(ids)-1:
        at least one token always runs, for its logits); ((), 0) when none shares any."""
        best, keep = self._longest(ids)
        if best:
            self._entries.move_to_end(best)
        return best, keep

    def covered(self, ids: list[int]) -> int:
        """How many tokens of `ids` a `lookup` would restore (the LRU order left alone)."""
        return self._longest(ids)[1]

    def get(self, key: tuple[int, ...]) -> bytes:
        return self._entries[key]

    def put(self, ids: list[int], state: bytes) -> None:
        key = tuple(ids)
        if len(key) > self.max_tokens:
            return
        for old in [k for k in self._entries if len(k) <= len(key) and key[: len(k)] == k]:
            del self._entries[old]  # superseded: the same conversation, one turn earlier
        self._entries[key] = state
        while self.tokens > self.max_tokens:
            self._entries.popitem(last=False)


class GgufBatchEngine(RequestQueue[GgufRequest, int]):
    """Runs every submitted request of one GGUF model in shared `llama_decode` calls on one
    thread (`RequestQueue`: submitting, waiting and closing). `slots` sequences in flight
    at most, each a KV stream of `context` positions that llama.cpp allocates (and clears:
    resident) up front, slots × context × the model's bytes per position. The context
    starts with one stream and is remade with twice as many (up to `slots`) when more
    requests want to run: the sequences in flight move into it with their KV (state saved
    and restored: bit for bit, the module's docstring), so nobody drains or starts over, and
    the prefix cache stays. Memory follows the concurrency actually asked for; at most
    log2(slots) remakes per arm. `chunk` bounds the prompt tokens one sequence feeds per
    call (at most `ONE_CHUNK_ROWS`); `store_tokens` bounds the prefix cache (host memory).

    `_active` is by sequence id (`_active[i].seq == i`); `steps` counts the shared calls
    (one token of every sequence in flight), `calls` every `llama_decode`, `shared` the
    prompts stored early for requests that waited on them."""

    label = "gguf batch engine"
    thread_name = "flatscore-gguf"

    def __init__(
        self,
        llama_cpp: Any,
        model: Any,
        *,
        n_vocab: int,
        slots: int,
        context: int,
        threads: int,
        chunk: int = ONE_CHUNK_ROWS,
        store_tokens: int = 32_768,
    ) -> None:
        super().__init__()
        self._lib = llama_cpp
        self._model = model
        self._threads = threads
        self.max_slots = max(1, slots)
        self.context = context
        self.chunk = max(1, min(chunk, ONE_CHUNK_ROWS))
        self.slots = 0
        self.ctx: Any = None
        self.mem: Any = None
        self.batch: Any = None
        self.budget = 0
        self.n_vocab = n_vocab
        self.store = StateStore(store_tokens)
        self._clear = False
        self.calls = 0  # llama_decode calls, prompt chunks included
        self.moves = 0
        self.grown = 0
        self.shared = 0
        self._finished: list[tuple[GgufRequest, BaseException | None]] = []
        self._make(1)

    def clear(self) -> None:
        """Drop the prefix cache (the next request encodes its whole prompt)."""
        with self._cond:
            self._clear = True  # done by the engine thread, which owns the store
            if not self._thread_alive():
                self.store.clear()
                self._clear = False

    def _release(self) -> None:
        if self.ctx is not None:
            self._lib.llama_batch_free(self.batch)
            self._lib.llama_free(self.ctx)
            self.ctx = None
        self.store.clear()

    # -------------------------------------------------------------- KV state

    def _make(self, slots: int) -> None:
        """(Re)create the llama.cpp context with `slots` KV streams; the sequences in flight
        keep their ids and KV (saved from the old context, restored into the new one)."""
        lib = self._lib
        moving = [(r, self._save(r.seq)) for r in self._active if r.held]
        if self.ctx is not None:
            lib.llama_batch_free(self.batch)
            lib.llama_free(self.ctx)
            self.ctx = None
        self.slots = slots
        self.budget = max(self.chunk, slots)  # tokens per decode call
        self.ctx = self.new_context(slots * self.context, self.budget, slots)
        self.mem = lib.llama_get_memory(self.ctx)
        self.batch = lib.llama_batch_init(self.budget, 0, 1)
        for request, state in moving:
            self._restore(request.seq, state)

    def new_context(self, positions: int, batch: int, streams: int) -> Any:
        """A llama.cpp context on this engine's model, set as every call here needs it:
        `streams` KV streams of their own over `positions` in all, `batch` tokens per call,
        the engine's threads. The caller frees it (`llama_free`)."""
        lib = self._lib
        params = lib.llama_context_default_params()
        params.n_ctx = positions
        params.n_batch = params.n_ubatch = batch
        params.n_seq_max = streams
        params.kv_unified = False
        # Flash attention: a row's attention has the same bits in a call of any size below
        # 64 rows (in a single stream without it, a one-row call gives other bits).
        params.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_ENABLED
        params.n_threads = params.n_threads_batch = self._threads
        params.no_perf = True
        ctx = lib.llama_init_from_model(self._model, params)
        if ctx is None:
            raise RuntimeError("llama.cpp could not create a context (memory for the KV?)")
        return ctx

    def _save(self, seq: int) -> bytes:
        """`seq`'s cells as llama.cpp state, without the stream count it was saved with
        (`_restore` writes the current one): a cell count and the cells."""
        size = self._lib.llama_state_seq_get_size(self.ctx, seq)
        buf = (ctypes.c_uint8 * size)()
        n = self._lib.llama_state_seq_get_data(self.ctx, buf, size, seq)
        return portable_state(bytes(buf)[:n], self.slots)

    def _restore(self, seq: int, state: bytes) -> None:
        self._lib.llama_memory_seq_rm(self.mem, seq, -1, -1)
        if not state:
            return
        head, cells = state[:STATE_PREFIX], state[STATE_PREFIX:]
        full = head + struct.pack("<I", self.slots) + cells + bytes(4 * (self.slots - 1))
        buf = (ctypes.c_uint8 * len(full)).from_buffer_copy(full)
        if self._lib.llama_state_seq_set_data(self.ctx, buf, len(full), seq) == 0:
            raise RuntimeError(f"llama.cpp could not restore a cached KV into sequence {seq}")

    def _admit(self, request: GgufRequest, seq: int) -> None:
        ids = request.ids
        key, keep = self.store.lookup(ids)
        if keep:
            self._restore(seq, self.store.get(key))
        self._lib.llama_memory_seq_rm(self.mem, seq, keep, -1)
        request.seq, request.held, request.pending = seq, ids[:keep], ids[keep:]
        request.encoded = len(request.pending)
        self.encoded_tokens += request.encoded

    def _leave(self, request: GgufRequest, error: BaseException | None = None) -> None:
        """`request` is done: its KV to the store, its sequence id freed, and the highest
        sequence in flight moved down into it (ids in flight stay 0..n-1)."""
        seq = request.seq
        assert seq < 0 or self._active[seq] is request
        if self.ctx is not None and error is None and request.held:
            self.store.put(request.held, self._save(seq))
        if seq >= 0:
            last = self._active[-1]
            if self.ctx is not None:
                self._lib.llama_memory_seq_rm(self.mem, seq, -1, -1)
                if last is not request:
                    self._restore(seq, self._save(last.seq))
                    self._lib.llama_memory_seq_rm(self.mem, last.seq, -1, -1)
                    self.moves += 1
            if last is not request:
                self._active[seq] = last
                last.seq = seq
            self._active.pop()
        request.seq = -1
        self._finish(request, error)

    # -------------------------------------------------------------- the loop

    def _plan(self) -> int:
        """The streams wanted: one per request in flight or waiting, up to `max_slots`."""
        if self._clear:
            self.store.clear()
            self._clear = False
        return min(self.max_slots, len(self._active) + len(self._waiting))

    def _advance(self, want: int) -> None:
        if want > self.slots:  # more requests than streams: twice as many, none drained
            self._make(min(self.max_slots, max(want, 2 * self.slots)))
            self.grown += 1
        with self._cond:
            joining = self._joining()
        for request in joining:
            self._active.append(request)
            self._admit(request, len(self._active) - 1)
        self.peak_active = max(self.peak_active, len(self._active))
        self._step()

    def _joining(self) -> list[GgufRequest]:
        """(Under the lock.) Waiting requests that join now, in order, as many as there are
        free streams; one that would reuse `MIN_SHARED` more tokens of a prompt being encoded
        (in flight, or joining now) than of the store waits for it instead."""
        room = self.slots - len(self._active)
        encoding = [r.ids for r in self._active if len(r.held) < len(r.ids)]
        joining: list[GgufRequest] = []
        waiting: list[GgufRequest] = []
        for request in self._waiting:
            if len(joining) >= room or self._reuses(request, encoding):
                waiting.append(request)
                continue
            joining.append(request)
            encoding.append(request.ids)
        self._waiting = waiting
        return joining

    def _reuses(self, request: GgufRequest, prompts: list[list[int]]) -> bool:
        """Whether `request` would reuse `MIN_SHARED` more tokens of one of `prompts` than
        of the store."""
        ids = request.ids
        covered = self.store.covered(ids)
        return any(
            min(common_prefix(p, ids), len(ids) - 1) >= covered + MIN_SHARED for p in prompts
        )

    def _encoded(self, request: GgufRequest) -> None:
        """`request`'s prompt is done: to the store now, when a waiting request would reuse
        it (it stays there, superseded by the sequence's KV when it leaves)."""
        with self._cond:
            wanted = any(self._reuses(w, [request.ids]) for w in self._waiting)
        if wanted:
            self.store.put(request.held, self._save(request.seq))
            self.shared += 1

    def _fail_batch(self, error: Exception) -> None:
        for r in list(reversed(self._active)):
            self._leave(r, error)

    def _decode(self, feeds: list[tuple[GgufRequest, list[int]]]) -> None:
        """One `llama_decode` of `feeds` (sequence ids ascending and consecutive); each
        request whose prompt ends in it gets its next token picked."""
        b = self.batch
        b.n_tokens = 0
        outputs: list[tuple[GgufRequest, int]] = []
        for request, fed in feeds:
            pos0 = len(request.held)
            for k, token in enumerate(fed):
                j = b.n_tokens
                b.token[j] = token
                b.pos[j] = pos0 + k
                b.n_seq_id[j] = 1
                b.seq_id[j][0] = request.seq
                last = k == len(fed) - 1 and len(fed) == len(request.pending)
                b.logits[j] = last
                if last:
                    outputs.append((request, j))
                b.n_tokens += 1
        rc = self._lib.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed ({rc})")
        self.calls += 1
        for request, fed in feeds:
            request.held.extend(fed)
            request.pending = request.pending[len(fed) :]
            if fed and len(request.held) == len(request.ids):
                self._encoded(request)
        for request, j in outputs:
            ptr = self._lib.llama_get_logits_ith(self.ctx, j)
            logits = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).astype(np.float64)
            try:
                picked = request.step(logits)
            except Exception as exc:  # a bad step fails its own request only
                self._finished.append((request, exc))
                continue
            if picked is None:
                self._finished.append((request, None))
            else:
                request.pending = [picked]

    def _step(self) -> None:
        """One token of every sequence in flight in one shared call (decode tokens, and the
        next prompt token of those still encoding), then each prompt's next chunk in a call
        of its own (batch invariance: the module's docstring)."""
        for request in [r for r in reversed(self._active) if r.cancelled]:
            self._leave(request, asyncio.CancelledError())
        for request in list(reversed(self._active)):
            if len(request.held) + len(request.pending) > self.context:
                self._leave(request)  # its KV stream is full: the turn ends (`length`)
        if not self._active:
            return
        self._finished = []
        self.steps += 1
        self._decode([(r, r.pending[:1]) for r in self._active])
        for request in list(self._active):
            if len(request.pending) >= 2:
                self._decode([(request, request.pending[: self.chunk])])
        for request, error in sorted(self._finished, key=lambda f: -f[0].seq):
            self._leave(request, error)
