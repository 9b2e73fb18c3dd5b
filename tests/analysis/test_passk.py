from __future__ import annotations

import pytest

from flatscore.analysis.passk import pass_hat_k


def test_pass_hat_k_by_hand() -> None:
    # Task A 3/4, task B 1/4, task C 4/4.
    got = pass_hat_k([3, 1, 4], [4, 4, 4])
    assert got[0] == pytest.approx((3 / 4 + 1 / 4 + 1) / 3)
    assert got[1] == pytest.approx((3 / 6 + 0 + 1) / 3)  # C(3,2)/C(4,2) = 3/6
    assert got[2] == pytest.approx((1 / 4 + 0 + 1) / 3)  # C(3,3)/C(4,3) = 1/4
    assert got[3] == pytest.approx((0 + 0 + 1) / 3)
    assert len(got) == 4


def test_pass_hat_k_uneven_trials_and_empty() -> None:
    assert len(pass_hat_k([1, 2], [2, 3])) == 2  # k up to the smallest trial count
    assert pass_hat_k([], []) == []


def test_pass_hat_k_weights_tasks_not_episodes() -> None:
    """Task A solved 1/1, task B 2/4: pass^1 = (1 + 0.5) / 2 = 0.75 (per-task means, then
    averaged), not 3/5 = 0.6 (episodes pooled)."""
    assert pass_hat_k([1, 2], [1, 4]) == [pytest.approx(0.75)]
