"""The balanced subset (`--balanced`): only the (domain, task, trial) every arm has.

A study cut short (or still running) has arms at different points; comparing them on
everything each has mixes episodes one arm has and another lacks. Balanced, every arm of a
cell covers the same episodes, trial paired with trial: the largest part of the study on
which the comparison is like for like. Per cell (domain × model): the arms of one model are
compared with each other, so one model's missing domain does not empty another's.

For the repair effect (`repair_pairs`), the arms are the repaired ones and their plain twins
(`ref+repair` and `ref`): a repair pass of one trial on some tasks is paired with exactly
those episodes of the main study, not with its other trials.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence

from flatscore.analysis.repair_effect import base_arm, is_repaired
from flatscore.episode import Episode

Key = tuple[str, int]  # (task, trial) within a cell


def balanced(
    episodes: Sequence[Episode], arm_of: Callable[[Episode], Hashable] = lambda ep: ep.arm
) -> list[Episode]:
    """The episodes whose (task, trial) every arm (`arm_of`) of their (domain, model) cell
    has, in the order given."""
    keys: dict[tuple[str, str], dict[Hashable, set[Key]]] = defaultdict(lambda: defaultdict(set))
    for ep in episodes:
        keys[(ep.domain, ep.model)][arm_of(ep)].add((ep.task_id, ep.trial))
    common = {cell: set.intersection(*arms.values()) for cell, arms in keys.items()}
    return [ep for ep in episodes if (ep.task_id, ep.trial) in common[(ep.domain, ep.model)]]


def repair_pairs(episodes: Sequence[Episode]) -> list[Episode]:
    """The repaired arms and their plain twins, balanced: for every (domain, task, trial)
    that each repaired arm and each plain arm behind one has, both episodes. An arm is
    (its label without `+repair`, repaired or not), as the repair effect groups them; plain
    arms without a repaired twin are left out."""
    twins = {(ep.model, base_arm(ep.arm)) for ep in episodes if is_repaired(ep)}
    kept = [ep for ep in episodes if (ep.model, base_arm(ep.arm)) in twins]
    return balanced(kept, arm_of=lambda ep: (base_arm(ep.arm), is_repaired(ep)))
