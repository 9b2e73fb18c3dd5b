"""S(K): success under every error budget, recomputed from logs (docs/analysis.md, "Error
budget and S(K)").

S(K) = share of episodes with reward 1 whose counted failed-call count is ≤ K. τ² stops an
episode when the count reaches `max_errors = M`, so logs recorded with budget M give S(K)
exactly for K ≤ M − 1 only; for K ≥ M an episode cut at M might have succeeded later.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from flatscore.analysis.facts import EpisodeFacts
from flatscore.defaults import MAX_BUDGET
from flatscore.errors import InputError

FALLBACK_DEFAULT_K = 9
"""τ²'s default max_errors = 10 corresponds to K = 9."""


def parse_budgets(text: str) -> list[int]:
    """'0-10', '0,2,5' or '0-3,9' → sorted distinct non-negative ints (bad text: InputError)."""
    budgets: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part)
        if not m:
            raise InputError(
                f"bad budget list {text!r}: expected e.g. 0-10 or 0,2,9", field="--budgets"
            )
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise InputError(f"bad budget range {part!r}: end before start", field="--budgets")
        if hi > MAX_BUDGET:
            raise InputError(
                f"bad budget {part!r}: K above {MAX_BUDGET} is not supported", field="--budgets"
            )
        budgets.update(range(lo, hi + 1))
    return sorted(budgets)


def recorded_max_errors(facts: Sequence[EpisodeFacts]) -> int | None:
    """The smallest `max_errors` the episodes ran under (None: no budget recorded). A
    recorded 0 is no budget: τ²'s orchestrators read `max_errors: 0` as "no limit" (and no
    runner of flatscore writes it)."""
    values = [f.max_errors for f in facts if f.max_errors]
    return min(values) if values else None


def unlimited(facts: Sequence[EpisodeFacts]) -> bool:
    """Some episode recorded `max_errors: 0` (no limit)."""
    return any(f.max_errors == 0 for f in facts)


def success_within_budgets(
    succeeded: np.ndarray, failures: np.ndarray, budgets: Sequence[int]
) -> np.ndarray:
    """(episodes × budgets) 0/1 matrix: episode succeeded with ≤ K counted failures."""
    k = np.asarray(budgets, dtype=np.int64)[None, :]
    return (succeeded[:, None] & (failures[:, None] <= k)).astype(np.float64)
