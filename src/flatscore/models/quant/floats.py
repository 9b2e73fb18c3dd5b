"""Floating-point formats: bf16 and fp8 e4m3 weights (per-output-channel scale), and fp8
e4m3 activations quantized per token at run time (the W8A8 arm)."""

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


def fp8_e4m3_per_token(x: torch.Tensor) -> torch.Tensor:
    """Activations as vLLM's dynamic FP8 path quantizes them before each FP8 matmul: one
    scale per token (row, the last dimension), computed from that row's own maximum at run
    time, e4m3 values (saturating at 448). A row's result never depends on the other rows,
    so batching does not change it."""
    amax = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-12)
    scale = amax / FP8_E4M3_MAX
    q = (x / scale).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(torch.float8_e4m3fn)
    return q.to(x.dtype) * scale
