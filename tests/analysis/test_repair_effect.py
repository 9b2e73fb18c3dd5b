"""Repair effect and the precision × repair interaction: hand-computed numbers, the bootstrap
checked against a plain loop over the same resamples, and invariants."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from analysis_builders import episode, repaired
from flatscore.agents.repair import REPAIR_SUFFIX as AGENT_SUFFIX
from flatscore.analysis.notices import Notice
from flatscore.analysis.paired_score import paired_difference_interval
from flatscore.analysis.repair_effect import (
    REPAIR_SUFFIX,
    RepairEffectResult,
    base_arm,
    has_repair_runs,
    is_repaired,
    repair_effects,
)
from flatscore.analysis.settings import AnalysisSettings
from flatscore.episode import Episode
from flatscore.report.effect_tables import repair_table

OK = ("get_user", "ok")
BAD = ("lookup", "unknown_tool")


def study() -> list[Episode]:
    eps = []
    for arm in ("bf16", "bf16+repair"):  # reference: repair changes nothing
        for t in ("t0", "t1", "t2"):
            eps.append(episode(arm, t, calls=[OK]))
        eps.append(episode(arm, "t3", success=False))
    eps += [
        episode("int4", "t0", calls=[BAD, OK]),
        episode("int4", "t1", calls=[BAD, BAD, BAD], success=False),
        episode("int4", "t2", calls=[("cancel_x", "unknown_tool")], success=False),
        episode("int4", "t3", success=False),
    ]
    # int4 with repair: labelled "int4" too, recognised by its metadata alone
    eps += [
        repaired(episode("int4", "t0", calls=[BAD, OK])),
        repaired(episode("int4", "t1", calls=[BAD, OK])),
        repaired(episode("int4", "t2", calls=[OK])),
        repaired(episode("int4", "t3", success=False)),
    ]
    return eps


@pytest.fixture(scope="module")
def result() -> RepairEffectResult:
    return repair_effects(study(), AnalysisSettings(bootstrap=2000, seed=3))


def test_detection_and_labels() -> None:
    from flatscore.analysis import result
    from flatscore.analysis.repair_effect import CHANNELS, Interval

    assert REPAIR_SUFFIX == AGENT_SUFFIX
    assert CHANNELS == result.CHANNELS  # kept in step without importing result
    assert Interval.model_fields.keys() == result.Interval.model_fields.keys()
    eps = study()
    assert [is_repaired(e) for e in eps].count(True) == 8
    assert has_repair_runs(eps) and not has_repair_runs(eps[:4] + eps[8:12])
    assert base_arm("int4+repair") == "int4" and base_arm("int4") == "int4"
    # repair turns alone (no metadata, plain label) are enough
    assert is_repaired(repaired(episode("int4", "t0", calls=[BAD, OK]), flag_in_metadata=False))


def test_hand_computed_effects(result: RepairEffectResult) -> None:
    assert result.default_K == 9 and result.budgets == list(range(10))
    [cell] = result.cells
    assert cell.reference == "bf16"
    ref, q = cell.arms
    assert (ref.arm, q.arm) == ("bf16", "int4")
    # reference: identical with and without repair
    # (no difference on 4 tasks: the score interval is ±49 points, z²/(4 + z²), not [0, 0])
    assert ref.effect.value == 0 and ref.effect.ci_high == pytest.approx(0.490, abs=1e-3)
    assert ref.effect.ci_low == pytest.approx(-ref.effect.ci_high)
    assert ref.interaction is None and ref.p_value == 1.0
    # int4: S(9) 1/4 → 3/4
    k9 = q.effect_by_K[9]
    assert (k9.success_without, k9.success_with, k9.effect) == (0.25, 0.75, 0.5)
    assert q.effect.value == 0.5
    # S(0): without: no episode succeeded with 0 failures; with: t2 only
    assert (q.effect_by_K[0].success_without, q.effect_by_K[0].success_with) == (0.0, 0.25)
    # unknown_tool rate: 5/6 → 2/5
    assert q.channel_rate_effect["unknown_tool"].value == pytest.approx(2 / 5 - 5 / 6)
    assert q.channel_rate_effect["invented"].value == pytest.approx(2 / 5 - 5 / 6)
    assert q.channel_rate_effect["bad_arguments"].value == 0
    assert q.interaction is not None and q.interaction.value == 0.5
    # 2 discordant tasks (fewer than 6: the score test), both in favour of repair → Z = 2/√2
    assert q.test.startswith("paired test (t, or McNemar's score)")
    assert q.p_value == pytest.approx(2 * norm.sf(2 / np.sqrt(2)))
    assert q.repair_instructions == 2 and q.episodes_repaired == 2
    assert q.repair_config == {"channels": ["unknown_tool"], "attempts": 3}
    assert ref.repair_instructions == 0 and ref.repair_config is None
    assert (q.paired_tasks, q.episodes_with, q.episodes_without) == (4, 4, 4)


def test_intervals_are_score_intervals_and_no_bootstrap_on_4_tasks(
    result: RepairEffectResult,
) -> None:
    """Success effects use the paired interval on per-task differences; with 4 tasks
    the channel-rate effects get no bootstrap interval, and a warning says so."""
    q = result.cells[0].arms[1]
    lo, hi = paired_difference_interval(np.array([0, 1, 1, 0.0]))
    assert (q.effect.ci_low, q.effect.ci_high) == pytest.approx((lo, hi))
    assert q.effect.ci_low < 0.5 < q.effect.ci_high  # type: ignore[operator]
    # interaction per task = (with − without)_int4 − (with − without)_bf16 = [0, 1, 1, 0]
    assert q.interaction is not None
    assert (q.interaction.ci_low, q.interaction.ci_high) == pytest.approx(
        tuple(2 * x for x in paired_difference_interval(np.array([0, 0.5, 0.5, 0.0])))
    )
    assert q.channel_rate_effect["unknown_tool"].ci_low is None
    few = Notice(kind="repair_few_tasks", count=4, minimum=AnalysisSettings().bootstrap_min_tasks)
    assert few in result.cells[0].notices  # words: the report's (tests/report/test_warning_text)


def test_unmatched_runs_warn_and_table_renders(result: RepairEffectResult) -> None:
    lone = repair_effects(
        [repaired(episode("int4", "t0", calls=[BAD, OK]))], AnalysisSettings(bootstrap=100)
    )
    assert lone.cells == [] and lone.notices == [
        Notice(kind="repair_unmatched", model="m", domain="retail")
    ]
    table = repair_table(result)
    assert "| m | retail | int4 | 4 | 25.0 | 75.0 | +50.0 [" in table
    assert "bf16 (ref)" in table


@settings(max_examples=25, deadline=None)
@given(st.lists(st.booleans(), min_size=2, max_size=8), st.randoms(use_true_random=False))
def test_no_difference_means_zero_effect_and_order_free(
    outcomes: list[bool], rnd: random.Random
) -> None:
    eps = []
    for arm in ("int8", "int8+repair", "bf16", "bf16+repair"):
        for i, ok in enumerate(outcomes):
            eps.append(episode(arm, f"t{i}", calls=[OK], success=ok))
    a = repair_effects(eps, AnalysisSettings(bootstrap=200))
    shuffled = list(eps)
    rnd.shuffle(shuffled)
    b = repair_effects(shuffled, AnalysisSettings(bootstrap=200))
    assert a == b
    for effect in a.cells[0].arms:
        iv = effect.effect
        assert iv.value == 0 and iv.ci_low == pytest.approx(-iv.ci_high) and iv.ci_high > 0
        assert all(-1 <= p.effect <= 1 for p in effect.effect_by_K)
    assert a.cells[0].arms[1].interaction.value == 0  # type: ignore[union-attr]
