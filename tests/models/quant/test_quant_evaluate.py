"""Known answers for top-1 agreement and KL."""

from __future__ import annotations

import math

import pytest
import torch

from flatscore.models.quant.evaluate import agreement


def test_identical_logits_agree_fully_with_zero_kl() -> None:
    logits = torch.randn(5, 11, generator=torch.Generator().manual_seed(0))
    a = agreement(logits, logits + 3.0)  # a constant shift changes nothing
    assert a.positions == 5 and a.top1_agreement == 1.0 and a.mean_kl == pytest.approx(0, abs=1e-6)


def test_known_kl_and_flip() -> None:
    ref = torch.log(torch.tensor([[0.5, 0.5], [0.9, 0.1]]))
    arm = torch.log(torch.tensor([[0.5, 0.5], [0.2, 0.8]]))
    a = agreement(ref, arm)
    kl_row2 = 0.9 * math.log(0.9 / 0.2) + 0.1 * math.log(0.1 / 0.8)
    assert a.top1_agreement == 0.5  # row 1 ties -> argmax index 0 for both; row 2 flips
    assert a.mean_kl == pytest.approx(kl_row2 / 2, rel=1e-5)


def test_shape_mismatch_is_refused() -> None:
    with pytest.raises(ValueError):
        agreement(torch.zeros(2, 3), torch.zeros(3, 3))


def test_a_tally_over_two_transcripts_is_the_agreement_of_them_together() -> None:
    """`Tally` (the fidelity table's counter) sums transcripts: the same agreement and KL as
    `agreement` on all rows at once, and the reference margin of each flipped position."""
    import numpy as np

    from flatscore.models.quant.evaluate import Tally

    ref = np.log(np.array([[0.5, 0.5], [0.9, 0.1], [0.6, 0.4]], dtype=np.float32))
    arm = np.log(np.array([[0.5, 0.5], [0.2, 0.8], [0.3, 0.7]], dtype=np.float32))
    tally = Tally()
    tally.add(ref[:2], arm[:2])
    tally.add(ref[2:], arm[2:])
    whole = agreement(torch.from_numpy(ref), torch.from_numpy(arm))
    got = tally.agreement
    assert got.positions == 3 and got.top1_agreement == pytest.approx(1 / 3)
    assert got.mean_kl == pytest.approx(whole.mean_kl, rel=1e-5)
    assert tally.flip_margins == pytest.approx([math.log(9), math.log(1.5)], rel=1e-5)
