"""Which tasks of the built-in domains an every-task check reads: every task in the slow tier
(~8 s of CPU for retail's 166 with the oracle), every fourth task in the fast suite (each
template still represented). Parametrize a test over `EVERY_TASK` as (domain, stride) and
read `domain.tasks()[::stride]`."""

from __future__ import annotations

import pytest

EVERY_TASK = [
    pytest.param("retail", 1, id="retail-all", marks=pytest.mark.slow),
    pytest.param("telecom", 1, id="telecom-all", marks=pytest.mark.slow),
    pytest.param("retail", 4, id="retail-every-4th"),
    pytest.param("telecom", 4, id="telecom-every-4th"),
]
