"""Holm in group-sequential form never rejects a hypothesis of a comparison that has
stopped: a stopped comparison's untested hypothesis keeps its share of α, so it cannot hand
that share to the comparisons still open (`sequential.decide`)."""

from __future__ import annotations

import numpy as np

from flatscore.analysis.sequential import (
    TESTS,
    VERDICTS,
    LookStats,
    SequentialDesign,
    boundaries,
    decide,
)

DESIGN = SequentialDesign(first_look=1, look_every=1)
TASKS = 3  # looks after 1, 2 and 3 paired tasks


def _stats(**z: list[float]) -> LookStats:
    """Z statistics per look; tests not named never reject (−inf)."""
    arrays = {t: np.array(z.get(t, [-np.inf] * TASKS), dtype=float) for t in TESTS}
    return LookStats(z=arrays, counts=DESIGN.looks(TASKS), maximum=TASKS)


def test_a_stopped_comparison_hands_no_alpha_to_the_open_ones() -> None:
    level = DESIGN.levels()["amplified"]
    alone = boundaries(TASKS, DESIGN, "amplified", level)[1]  # one hypothesis open
    shared = boundaries(TASKS, DESIGN, "amplified", level / 2)[1]  # two open
    assert alone < shared
    between = (alone + shared) / 2
    # A: damage decided at the first look; its amplification statistic crosses any boundary
    # at the second look, after it stopped. B: open, its statistic between the two levels.
    stopped = _stats(damage=[10.0, 10.0, 10.0], amplified=[-np.inf, 10.0, 10.0])
    still_open = _stats(amplified=[-np.inf, between, -np.inf])
    d = decide([stopped, still_open], DESIGN)
    assert VERDICTS[int(d.verdict[0])] == "visible damage" and int(d.look[0]) == 0
    assert not d.amplified[0], "a stopped comparison's hypothesis was rejected after its stop"
    assert not d.amplified[1], "the open comparison was tested at a level the stop handed it"


def test_the_same_statistic_rejects_when_it_is_the_only_open_hypothesis() -> None:
    """The positive control of the test above: with one comparison, `between` rejects."""
    level = DESIGN.levels()["amplified"]
    alone = boundaries(TASKS, DESIGN, "amplified", level)[1]
    shared = boundaries(TASKS, DESIGN, "amplified", level / 2)[1]
    d = decide([_stats(amplified=[-np.inf, (alone + shared) / 2, -np.inf])], DESIGN)
    assert d.amplified[0]
