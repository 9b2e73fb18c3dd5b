"""The generators' shared template runner: which entities make tasks, numbering, interleaving."""

from __future__ import annotations

from typing import Any

import pytest

from flatscore.domains.framework import Task
from flatscore.domains.generation import first_tasks, round_robin

FIELDS = {"scenario": {"requests": ["hi"], "instructions": "be a box"}, "actions": []}


def _task(template: str, n: int) -> Task:
    return Task.model_validate(
        {"id": f"{template}_{n:02d}", "domain": "box", "template": template, "split": "test"}
        | FIELDS
    )


def test_first_tasks_takes_entities_in_order_and_skips_those_that_do_not_fit() -> None:
    seen: list[tuple[int, int]] = []

    def build(entity: int, index: int) -> dict[str, Any] | None:
        seen.append((entity, index))
        return None if entity % 2 else dict(FIELDS)

    tasks = first_tasks("box", "even", range(10), 3, 0, build)
    assert tasks == [_task("even", n) for n in range(3)]
    # entity 5 does not fit; the loop stops as soon as 3 were made (6, 7, ... untouched)
    assert seen == [(0, 0), (1, 1), (2, 1), (3, 2), (4, 2)]


def test_first_tasks_numbers_from_first() -> None:
    tasks = first_tasks("box", "odd", [1, 3, 5], 2, 7, lambda e, index: dict(FIELDS))
    assert [t.id for t in tasks] == ["odd_07", "odd_08"]


def test_first_tasks_names_the_template_when_entities_run_out() -> None:
    with pytest.raises(ValueError, match="box template even: only 2 of 3 tasks"):
        first_tasks("box", "even", [0, 1, 2], 3, 0, lambda e, n: dict(FIELDS) if e != 1 else None)


def test_round_robin_interleaves_templates_of_unequal_length() -> None:
    per_template = [[_task("a", 0), _task("a", 1)], [_task("b", 0)], [_task("c", 0), _task("c", 1)]]
    assert [t.id for t in round_robin(per_template)] == ["a_00", "b_00", "c_00", "a_01", "c_01"]
