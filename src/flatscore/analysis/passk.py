"""pass^k (τ²): per task C(successes, k) / C(trials, k), averaged over tasks, k = 1..min trials."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import comb


def pass_hat_k(successes: Sequence[int], trials: Sequence[int]) -> list[float]:
    """pass^1..pass^min(trials); index 0 is pass^1 (a per-task success rate, then averaged)."""
    s = np.asarray(successes, dtype=np.int64)
    n = np.asarray(trials, dtype=np.int64)
    if n.size == 0 or n.min() < 1:
        return []
    return [float(np.mean(comb(s, k) / comb(n, k))) for k in range(1, int(n.min()) + 1)]
