from __future__ import annotations

import numpy as np
import pytest

from flatscore.analysis.budget import parse_budgets, success_within_budgets
from flatscore.errors import InputError


def test_parse_budgets() -> None:
    assert parse_budgets("0-3") == [0, 1, 2, 3]
    assert parse_budgets("9, 0,2-3") == [0, 2, 3, 9]
    for bad in ("x", "3-1", "-1", "1,,2"):
        with pytest.raises(InputError):
            parse_budgets(bad)


def test_success_within_budgets_by_hand() -> None:
    s = success_within_budgets(np.array([True, True, False]), np.array([0, 2, 0]), [0, 1, 2])
    assert s.tolist() == [[1, 1, 1], [0, 0, 1], [0, 0, 0]]
