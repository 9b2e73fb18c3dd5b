"""bf16 and fp8 e4m3 weight round-trips."""

from __future__ import annotations

import torch

from flatscore.quant.floats import FP8_E4M3_MAX, bf16, fp8_e4m3


def test_bf16_relative_error_per_element_is_at_most_half_an_ulp() -> None:
    w = torch.randn(64, 128, generator=torch.Generator().manual_seed(0))
    q = bf16(w)
    assert q.dtype == torch.float32
    assert bool(((q - w).abs() <= w.abs() * 2**-8 + 1e-30).all())  # 8-bit significand
    rel = float((q - w).norm() / w.norm())
    assert 5e-4 < rel < 3e-3


def test_fp8_per_channel_scale_keeps_each_row_maximum() -> None:
    w = torch.randn(32, 64, generator=torch.Generator().manual_seed(1))
    w[0] *= 100  # one row with a huge range must not hurt the others (per-row scales)
    q = fp8_e4m3(w)
    assert torch.allclose(q.abs().amax(dim=1), w.abs().amax(dim=1), rtol=1e-6)
    scale = w.abs().amax(dim=1, keepdim=True) / FP8_E4M3_MAX
    normal = (w / scale).abs() >= 2**-6  # e4m3 normal range: 3-bit mantissa, half-ulp 2^-4
    assert bool(((q - w).abs()[normal] <= (w.abs() * 2**-4)[normal] * 1.0001).all())
    for row in range(32):
        rel = float((q[row] - w[row]).norm() / w[row].norm())
        assert 0.005 < rel < 0.05


def test_fp8_error_sits_between_bf16_and_int4() -> None:
    from flatscore.quant.integer import rtn_groupwise_asymmetric

    w = torch.randn(128, 576, generator=torch.Generator().manual_seed(2))

    def err(q: torch.Tensor) -> float:
        return float((q - w).norm() / w.norm())

    assert err(bf16(w)) < err(fp8_e4m3(w)) < err(rtn_groupwise_asymmetric(w, 4, 128))
