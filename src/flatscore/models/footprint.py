"""What serving a local model costs in memory: the arm's weights as a checkpoint would store
them, what they occupy in this process, and the process's peak resident memory.

Fake-quantized arms keep their weights in the compute dtype (that is how the local backend
runs them), so their *resident* bytes equal the reference's; the *format* bytes are what a
real checkpoint of that format holds: each changed Linear weight at the format's bit width
plus its scales (and offsets, for asymmetric groups) at 16 bits each, every other parameter
(embeddings, norms, the tied head) as loaded. AWQ's per-input-channel scales fold into the
previous layer in real checkpoints and are not counted.
"""

from __future__ import annotations

import math
import os
import resource
import sys
from dataclasses import dataclass
from typing import Any

SCALE_BITS = 16
"""Each scale and offset is counted as an fp16 number (AWQ/GGUF checkpoints' layout)."""


@dataclass(frozen=True)
class FormatBits:
    """A Linear weight format: `bits` per weight, one scale per `group` input columns
    (None: per output row; 0: no scale), `offset` when the grid is asymmetric."""

    bits: int
    group: int | None
    offset: bool


def format_bits(arm: str) -> FormatBits | None:
    """The Linear weight format of a registered arm (None: weights as loaded)."""
    from flatscore.models.quant.arms import ARMS

    quantize = ARMS.make(arm).quantize
    if quantize is None:
        return None
    name = getattr(getattr(quantize, "func", quantize), "__name__", "")
    kw: dict[str, Any] = dict(getattr(quantize, "keywords", {}) or {})
    if name == "bf16":
        return FormatBits(16, 0, False)
    if name.startswith("fp8"):
        return FormatBits(8, None, False)
    if name == "rtn_per_channel_symmetric":
        return FormatBits(int(kw.get("bits", 8)), None, False)
    if name == "rtn_groupwise_asymmetric":
        return FormatBits(int(kw.get("bits", 4)), int(kw.get("group_size", 128)), True)
    return None


def _linear_bits(shape: tuple[int, ...], fmt: FormatBits) -> int:
    rows, cols = shape[0], math.prod(shape[1:])
    scales = 0 if fmt.group == 0 else rows * (1 if fmt.group is None else -(-cols // fmt.group))
    return rows * cols * fmt.bits + scales * SCALE_BITS * (2 if fmt.offset else 1)


@dataclass(frozen=True)
class Footprint:
    parameters: int
    weight_bytes: int
    resident_weight_bytes: int

    @property
    def bits_per_parameter(self) -> float:
        return 8 * self.weight_bytes / self.parameters if self.parameters else 0.0


def weight_footprint(model: Any, arm: str) -> Footprint:
    """Parameters, the arm's format bytes and the resident bytes of `model` (tied tensors
    counted once)."""
    from flatscore.models.quant.arms import quantizable_linears

    fmt = format_bits(arm)
    changed = {id(m.weight) for m in quantizable_linears(model).values()} if fmt else set()
    params = fmt_bits = resident = 0
    for p in model.parameters():  # each shared tensor once
        n, size = p.numel(), p.element_size()
        params += n
        resident += n * size
        if fmt is not None and id(p) in changed:
            fmt_bits += _linear_bits(tuple(p.shape), fmt)
        else:
            fmt_bits += 8 * n * size
    return Footprint(params, -(-fmt_bits // 8), resident)


def peak_rss_bytes() -> int:
    """This process's peak resident memory (Linux reports kilobytes, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def process_id() -> int:
    return os.getpid()
