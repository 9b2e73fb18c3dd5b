"""S(K): success under every error budget, recomputed from logs (docs/analysis.md, "Error
budget and S(K)").

S(K) = share of episodes with reward 1 whose counted failed-call count is ≤ K. τ² stops an
episode when the count reaches `max_errors = M`, so logs recorded with budget M give S(K)
exactly for K ≤ M − 1 only; for K ≥ M an episode cut at M might have succeeded later.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from flatscore.analysis.facts import EpisodeFacts
from flatscore.defaults import DEFAULT_K, MAX_BUDGET, CountMode
from flatscore.errors import InputError

RangeProblem = Callable[[str, tuple[int, int] | None], str | None]
"""What is wrong with one part of a range list (the part as written, its bounds or None when
it is neither a number nor a range), or None."""


def parse_ranges(text: str, problem: RangeProblem, field: str) -> list[int]:
    """'0-10', '0,2,5' or '0-3,9' → the sorted distinct ints they name; the first part
    `problem` finds fault with is an InputError naming `field` (each caller its own words
    and bounds: `parse_budgets`, `flatscore.analysis.trials.parse_trials`)."""
    values: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part)
        bounds = (int(m.group(1)), int(m.group(2) or m.group(1))) if m else None
        message = problem(part, bounds)
        if message is not None:
            raise InputError(message, field=field)
        assert bounds is not None
        values.update(range(bounds[0], bounds[1] + 1))
    return sorted(values)


def parse_budgets(text: str) -> list[int]:
    """'0-10', '0,2,5' or '0-3,9' → sorted distinct non-negative ints (bad text: InputError)."""

    def problem(part: str, bounds: tuple[int, int] | None) -> str | None:
        if bounds is None:
            return f"bad budget list {text!r}: expected e.g. 0-10 or 0,2,9"
        if bounds[1] < bounds[0]:
            return f"bad budget range {part!r}: end before start"
        if bounds[1] > MAX_BUDGET:
            return f"bad budget {part!r}: K above {MAX_BUDGET} is not supported"
        return None

    return parse_ranges(text, problem, "budgets")


def recorded_max_errors(facts: Sequence[EpisodeFacts]) -> int | None:
    """The smallest `max_errors` the episodes ran under (None: no budget recorded). A
    recorded 0 is no budget: τ²'s orchestrators read `max_errors: 0` as "no limit" (and no
    runner of flatscore writes it)."""
    values = [f.max_errors for f in facts if f.max_errors]
    return min(values) if values else None


def unlimited(facts: Sequence[EpisodeFacts]) -> bool:
    """Some episode recorded `max_errors: 0` (no limit)."""
    return any(f.max_errors == 0 for f in facts)


KSource = Literal["recorded", "unlimited", "default"]
"""Where the default K came from (`default_budget`; the report says it in words)."""


def default_budget(facts: Sequence[EpisodeFacts], count: CountMode) -> tuple[int, KSource]:
    """The analysis's default error budget K and where it comes from: the smallest recorded
    `max_errors` − 1 (S(K) is exact below it); with only "no limit" recorded, the episodes'
    own largest failed-call count; with no budget recorded, τ²'s default (`DEFAULT_K`)."""
    recorded = recorded_max_errors(facts)
    if recorded is not None:
        return recorded - 1, "recorded"
    if unlimited(facts):
        return min(max((f.failed_calls(count) for f in facts), default=0), MAX_BUDGET), "unlimited"
    return DEFAULT_K, "default"


def budgets_with(budgets: Sequence[int] | None, k: int) -> list[int]:
    """The budgets S(K) is computed at: those asked for (default 0..K), and K."""
    return sorted(set(budgets if budgets is not None else range(k + 1)) | {k})


def success_within_budgets(
    succeeded: np.ndarray, failures: np.ndarray, budgets: Sequence[int]
) -> np.ndarray:
    """(episodes × budgets) 0/1 matrix: episode succeeded with ≤ K counted failures."""
    k = np.asarray(budgets, dtype=np.int64)[None, :]
    return (succeeded[:, None] & (failures[:, None] <= k)).astype(np.float64)
