"""Floating-point weight formats: bf16 and fp8 e4m3 (per-output-channel scale)."""

from __future__ import annotations

import torch

FP8_E4M3_MAX = 448.0


def bf16(weight: torch.Tensor) -> torch.Tensor:
    """Round-trip through bfloat16 (8 mantissa bits, round-to-nearest-even)."""
    return weight.to(torch.bfloat16).to(weight.dtype)


def fp8_e4m3(weight: torch.Tensor) -> torch.Tensor:
    """fp8 e4m3 with one fp32 scale per output channel (row), as vLLM's FP8 checkpoints:
    each row is scaled so its largest magnitude maps to 448, the format's maximum."""
    amax = weight.abs().amax(dim=1, keepdim=True).clamp(min=1e-12)
    scale = amax / FP8_E4M3_MAX
    q = (weight / scale).to(torch.float8_e4m3fn)
    return q.to(weight.dtype) * scale
