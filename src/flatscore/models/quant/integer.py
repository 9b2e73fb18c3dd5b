"""Integer round-to-nearest (RTN) weight formats.

- per-channel symmetric (int8): one scale per output row, levels -(2^(b-1)-1)..2^(b-1)-1.
- group-wise asymmetric (int4/int3/int2): along the input dimension, each group of
  `group_size` weights of a row gets a scale and a float offset (its minimum), levels
  0..2^b-1 — the layout of GGUF Q4_1 and HQQ. When the input width is not a multiple of the
  group size (SmolLM2: 576 = 4 x 128 + 64), the last group is ragged: it is quantized on its
  own with its own scale and offset, never skipped and never padded with zeros.
"""

from __future__ import annotations

import torch


def rtn_per_channel_symmetric(weight: torch.Tensor, bits: int = 8) -> torch.Tensor:
    qmax = 2 ** (bits - 1) - 1
    scale = (weight.abs().amax(dim=1, keepdim=True) / qmax).clamp(min=1e-12)
    return torch.round(weight / scale).clamp(-qmax, qmax) * scale


def group_bounds(width: int, group_size: int) -> list[tuple[int, int]]:
    """Column ranges of the groups; the last one is shorter when `width % group_size`."""
    return [(a, min(a + group_size, width)) for a in range(0, width, group_size)]


def rtn_asymmetric(chunk: torch.Tensor, bits: int) -> torch.Tensor:
    """Min/max RTN of each row of `chunk` onto 2^bits levels (one scale + offset per row)."""
    levels = 2**bits - 1
    lo = chunk.amin(dim=1, keepdim=True)
    hi = chunk.amax(dim=1, keepdim=True)
    scale = ((hi - lo) / levels).clamp(min=1e-12)
    return torch.round((chunk - lo) / scale).clamp(0, levels) * scale + lo


def rtn_groupwise_asymmetric(
    weight: torch.Tensor, bits: int = 4, group_size: int = 128
) -> torch.Tensor:
    out = torch.empty_like(weight)
    width = weight.shape[1]
    full = (width // group_size) * group_size
    if full:
        rows = weight[:, :full].reshape(-1, group_size)
        out[:, :full] = rtn_asymmetric(rows, bits).reshape(weight.shape[0], full)
    if full < width:  # the ragged last group
        out[:, full:] = rtn_asymmetric(weight[:, full:], bits)
    return out
