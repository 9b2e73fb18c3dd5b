"""Integer RTN formats change weights by the expected amount, on small random tensors."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flatscore.models.quant.integer import (
    group_bounds,
    rtn_groupwise_asymmetric,
    rtn_per_channel_symmetric,
)


def rel_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def test_group_bounds_handles_the_ragged_last_group() -> None:
    assert group_bounds(576, 128) == [(0, 128), (128, 256), (256, 384), (384, 512), (512, 576)]
    assert group_bounds(1536, 128)[-1] == (1408, 1536)
    assert group_bounds(64, 128) == [(0, 64)]


def test_int8_error_is_at_most_half_a_step_per_element() -> None:
    w = torch.randn(64, 96, generator=torch.Generator().manual_seed(0))
    q = rtn_per_channel_symmetric(w, 8)
    step = w.abs().amax(dim=1, keepdim=True) / 127
    assert bool(((q - w).abs() <= step / 2 + 1e-7).all())
    # each row takes at most 255 distinct values, and its extreme is kept exactly
    assert all(len(torch.unique(row)) <= 255 for row in q)
    assert torch.allclose(q.abs().amax(dim=1), w.abs().amax(dim=1))
    # Gaussian weights: uniform rounding noise of a step ~ (3.5 sigma)/127 -> ~0.8%
    assert 0.004 < rel_error(q, w) < 0.012


@given(
    st.integers(1, 3),
    st.integers(1, 300),
    st.sampled_from([2, 3, 4]),
    st.sampled_from([32, 64, 128]),
)
@settings(max_examples=40, deadline=None)
def test_groupwise_levels_and_bounds(rows: int, width: int, bits: int, group: int) -> None:
    w = torch.randn(rows, width, generator=torch.Generator().manual_seed(width))
    q = rtn_groupwise_asymmetric(w, bits, group)
    for a, b in group_bounds(width, group):
        chunk, qc = w[:, a:b], q[:, a:b]
        for r in range(rows):
            assert len(torch.unique(qc[r])) <= 2**bits
            lo, hi = chunk[r].min(), chunk[r].max()
            step = (hi - lo) / (2**bits - 1)
            assert bool(((qc[r] - chunk[r]).abs() <= step / 2 + 1e-5).all())
            assert torch.isclose(qc[r].min(), lo, atol=1e-6)  # the offset is the group min


def test_ragged_last_group_gets_its_own_range() -> None:
    """If the last 64 columns were pooled with (or padded into) another group, their large
    range would wreck the small weights, or vice versa; on their own both stay exact-ish."""
    w = torch.randn(8, 576, generator=torch.Generator().manual_seed(1)) * 0.01
    w[:, 512:] *= 1000
    q = rtn_groupwise_asymmetric(w, 4, 128)
    assert rel_error(q[:, :512], w[:, :512]) < 0.15
    assert rel_error(q[:, 512:], w[:, 512:]) < 0.15


def test_error_grows_as_bits_shrink_with_expected_magnitudes() -> None:
    w = torch.randn(256, 576, generator=torch.Generator().manual_seed(2))
    errors = {b: rel_error(rtn_groupwise_asymmetric(w, b, 128), w) for b in (2, 3, 4, 8)}
    assert errors[8] < errors[4] < errors[3] < errors[2]
    # Gaussian, 128-groups span ~5.2 sigma: step/sqrt(12)/sigma ~ 0.10 (4 bits), 0.21, 0.5
    assert 0.07 < errors[4] < 0.13
    assert 0.15 < errors[3] < 0.27
    assert 0.35 < errors[2] < 0.65
    assert errors[4] > rel_error(rtn_groupwise_asymmetric(w, 4, 32), w)  # finer groups help


def test_same_grid_as_q4_1_blocks_reproduces_them_exactly() -> None:
    """Weights already on a Q4_1 grid (blocks of 32, q*d + m, q in 0..15) survive int4-g32
    unchanged but not int4-g128: the report must say which grid an arm uses."""
    g = torch.Generator().manual_seed(3)
    d = torch.rand(16, 576 // 32, 1, generator=g) * 0.01 + 0.001
    m = torch.randn(16, 576 // 32, 1, generator=g) * 0.01
    q = torch.randint(0, 16, (16, 576 // 32, 32), generator=g)
    q[..., 0], q[..., 1] = 0, 15  # every block uses its full range, as Q4_1's quantizer does
    w = (q * d + m).reshape(16, 576)
    assert rel_error(rtn_groupwise_asymmetric(w, 4, 32), w) < 1e-5
    assert rel_error(rtn_groupwise_asymmetric(w, 4, 128), w) > 0.02


def test_quantizing_twice_changes_nothing_more() -> None:
    w = torch.randn(32, 200, generator=torch.Generator().manual_seed(4))
    once = rtn_groupwise_asymmetric(w, 4, 64)
    assert rel_error(rtn_groupwise_asymmetric(once, 4, 64), once) < 1e-5
    int8 = rtn_per_channel_symmetric(w, 8)
    assert rel_error(rtn_per_channel_symmetric(int8, 8), int8) < 1e-6
