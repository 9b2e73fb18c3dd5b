"""Building a domain's data files (`python -m tools.regenerate <name>`): the
template runner both generators share, and the writer of `db.json` and `tasks.json`."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import zip_longest
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from flatscore.domains.framework import Task

E = TypeVar("E")
T = TypeVar("T")


def first_tasks(
    domain: str,
    template: str,
    entities: Iterable[E],
    count: int,
    first: int,
    build: Callable[[E, int], dict[str, Any] | None],
) -> list[Task]:
    """Exactly `count` tasks of one template numbered from `first`, one per entity in order:
    `build(entity, index)` gives the fields of the template's task number `index` (its id,
    domain, template and a provisional split are set here) or None when the entity does not
    fit it (both generators instantiate their templates this way; a shortfall is a
    generator bug)."""
    tasks: list[Task] = []
    for entity in entities:
        if len(tasks) == count:
            break
        index = first + len(tasks)
        fields = build(entity, index)
        if fields is not None:
            task_id = f"{template}_{index:02d}"
            tasks.append(Task(id=task_id, domain=domain, template=template, split="test", **fields))
    if len(tasks) < count:
        raise ValueError(f"{domain} template {template}: only {len(tasks)} of {count} tasks")
    return tasks


def fill_templates(
    rng: random.Random,
    templates: Sequence[tuple[str, T]],
    entities: Callable[[], list[E]],
    counts: Mapping[str, int],
    instantiate: Callable[[str, T, list[E], int, int], list[Task]],
    first: Mapping[str, int] | None = None,
) -> list[list[Task]]:
    """The one template runner of both generators: for each template in order, a fresh
    entity list shuffled by `rng`, then `instantiate(template, make, entities, first, count)`
    makes `counts[template]` tasks numbered from `first[template]` (default 0). Returns the
    tasks per template (`round_robin` interleaves them)."""
    per_template: list[list[Task]] = []
    for template, make in templates:
        pool = entities()
        rng.shuffle(pool)
        start = (first or {}).get(template, 0)
        per_template.append(instantiate(template, make, pool, start, counts[template]))
    return per_template


def round_robin(per_template: Sequence[Sequence[Task]]) -> list[Task]:
    """The templates' tasks interleaved (first of each, then second of each, ...), so that
    any prefix of the list covers the templates evenly."""
    return [t for row in zip_longest(*per_template) for t in row if t is not None]


def write_domain_data(directory: Path, db: BaseModel, tasks: Sequence[BaseModel]) -> None:
    """Write a generated domain's `db.json` and `tasks.json` (both generators' last step)."""
    (directory / "db.json").write_text(db.model_dump_json(indent=1) + "\n", encoding="utf-8")
    rows = [t.model_dump(mode="json") for t in tasks]
    (directory / "tasks.json").write_text(
        json.dumps(rows, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
