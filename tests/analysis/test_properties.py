"""Invariants that hold for any episode set (hypothesis)."""

from __future__ import annotations

import itertools
import random

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from analysis_builders import episode
from flatscore.analysis.analyze import AnalysisOptions, analyze

NAMES = ["get_user", "get_order", "foo", "bar", "baz", "toggle_airplane_mode"]
OUTCOMES = ["ok", "fail", "fail", None, "bad_arguments", "precondition"]

calls = st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(OUTCOMES)), max_size=6)
spec = st.tuples(
    calls,
    st.booleans(),
    st.integers(0, 1),
    st.sampled_from(["user_stop", "max_steps", "too_many_errors"]),
)


@st.composite
def studies(draw: st.DrawFn) -> list:
    """Two arms over the same tasks; the number of trials differs between tasks (and between
    arms), so task weighting is exercised: pass^1 = success rate only holds task-weighted."""
    n_tasks = draw(st.integers(1, 5))
    trials = {(arm, t): draw(st.integers(1, 4)) for arm in ("bf16", "int4") for t in range(n_tasks)}
    eps = []
    for arm in ("bf16", "int4"):
        for t in range(n_tasks):
            for k in range(trials[(arm, t)]):
                c, ok, mal, term = draw(spec)
                eps.append(episode(arm, f"t{t}", k, c, success=ok, malformed=mal, termination=term))
    return eps


OPTS = AnalysisOptions(bootstrap=100, budgets=[0, 1, 2, 3, 5, 12])
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(studies())
def test_budget_curve_monotone_and_rates_bounded(eps: list) -> None:
    r = analyze(eps, OPTS)
    for arm in r.cells[0].arms:
        s = [p.success_rate for p in arm.budget_curve]
        assert all(a <= b for a, b in itertools.pairwise(s))
        for p in arm.budget_curve:
            if arm.max_failed_calls <= p.K:
                assert p.success_rate == arm.success_rate
        rates = [arm.success_rate, arm.recovery_rate, arm.episode_recovery_rate, *s, *arm.pass_k]
        rates += [c.rate for c in arm.channels.values()]
        assert all(x is None or 0.0 <= x <= 1.0 for x in rates)
        assert arm.pass_k[0] == arm.success_rate or abs(arm.pass_k[0] - arm.success_rate) < 1e-12
        assert (
            arm.channels["unknown_tool"].count
            == arm.channels["role_confusion"].count + arm.channels["invented"].count
        )
    for c in r.cells[0].comparisons:
        for g in c.gap:
            assert -1.0 <= g.gap <= 1.0


@FAST
@given(studies())
def test_arm_against_itself(eps: list) -> None:
    copy = [e.model_copy(update={"arm": "bf16-copy"}) for e in eps if e.arm == "bf16"]
    r = analyze(
        [e for e in eps if e.arm == "bf16"] + copy, OPTS.model_copy(update={"reference": "bf16"})
    )
    c = r.cells[0].comparisons[0]
    assert all(g.gap == 0.0 for g in c.gap)
    # The score interval never collapses to [0, 0]: it is symmetric around the zero gap.
    assert all(g.ci_low < 0.0 < g.ci_high for g in c.gap)
    assert all(abs(g.ci_low + g.ci_high) < 1e-9 for g in c.gap)
    assert c.novel_fraction in (None, 0.0)
    assert c.spearman_rho in (None, 1.0) or abs(c.spearman_rho - 1.0) < 1e-12
    names = r.cells[0].arms[0].hallucinated_names
    if len(set(names.values())) >= 2:
        assert c.spearman_rho is not None and abs(c.spearman_rho - 1.0) < 1e-12
    assert c.p_value == 1.0 and not c.significant
    assert c.verdict in ("no damage detected", "inconclusive")
    assert (c.verdict == "no damage detected") == (c.gap_default.ci_high <= 0.075)


@FAST
@given(studies(), st.randoms(use_true_random=False))
def test_order_independence(eps: list, rnd: random.Random) -> None:
    shuffled = list(eps)
    rnd.shuffle(shuffled)
    assume(shuffled != eps)
    assert analyze(eps, OPTS).model_dump_json() == analyze(shuffled, OPTS).model_dump_json()
