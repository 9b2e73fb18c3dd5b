"""bf16 and fp8 e4m3 weight round-trips."""

from __future__ import annotations

import torch

from flatscore.models.quant.floats import FP8_E4M3_MAX, bf16, fp8_e4m3, fp8_e4m3_per_token


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
    from flatscore.models.quant.integer import rtn_groupwise_asymmetric

    w = torch.randn(128, 576, generator=torch.Generator().manual_seed(2))

    def err(q: torch.Tensor) -> float:
        return float((q - w).norm() / w.norm())

    assert err(bf16(w)) < err(fp8_e4m3(w)) < err(rtn_groupwise_asymmetric(w, 4, 128))


def test_fp8_per_token_known_answers() -> None:
    # Row 0's max is 448 (scale 1): the e4m3 grid itself. 0.1 = 1.6 x 2^-4 rounds to
    # 1.625 x 2^-4 (3 mantissa bits); 3.3 = 1.65 x 2 rounds to 1.625 x 2 = 3.25; 17 to 16.
    # Row 1 is row 0 times 2 (scale 2): the same values times 2. Row 2 is all zeros.
    x = torch.tensor(
        [
            [448.0, 0.1, -3.3, 17.0],
            [896.0, 0.2, -6.6, 34.0],
            [0.0, 0.0, 0.0, 0.0],
        ]
    )
    q = fp8_e4m3_per_token(x)
    assert torch.equal(q[0], torch.tensor([448.0, 0.1015625, -3.25, 16.0]))
    assert torch.equal(q[1], 2 * q[0])
    assert torch.equal(q[2], torch.zeros(4))


def test_fp8_per_token_scales_each_row_on_its_own() -> None:
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 7, 64, generator=g)
    x[0, 0] *= 1000  # one huge token must not coarsen the others
    q = fp8_e4m3_per_token(x)
    for t in range(7):
        assert torch.equal(q[1, t], fp8_e4m3_per_token(x[1, t : t + 1])[0])
    rel = (q - x).norm(dim=-1) / x.norm(dim=-1)
    assert bool((rel < 0.05).all()) and bool((rel > 0.005).all())
    assert torch.allclose(q.abs().amax(dim=-1), x.abs().amax(dim=-1), rtol=1e-6)  # row max kept
