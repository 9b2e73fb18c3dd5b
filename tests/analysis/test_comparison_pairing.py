"""The comparison's verdict direction and its paired task bootstrap (analysis/comparison.py)."""

from __future__ import annotations

import numpy as np
import pytest

from analysis_builders import episode
from flatscore.analysis.analyze import AnalysisOptions, analyze
from flatscore.report.analysis_text import worded


def test_a_significant_gain_is_never_visible_damage() -> None:
    """An arm that solves every task the reference solves half of is significantly *better*:
    not "visible damage" (which needs a drop), and the reason says it is a gain."""
    eps = []
    for t in range(60):
        eps.append(episode("bf16", f"t{t}", 0, [("get_user", "ok")], success=t % 2 == 0))
        eps.append(episode("int4", f"t{t}", 0, [("get_user", "ok")], success=True))
    r = worded(analyze(eps, AnalysisOptions(bootstrap=200)))
    c = r.cells[0].comparisons[0]
    assert c.significant and c.gap_default.gap == pytest.approx(-0.5)
    assert c.verdict != "visible damage" and r.cells[0].verdict != "visible damage"
    assert "significant gain" in (c.verdict_reason or "")


def test_the_bootstrap_pairs_the_arms_on_one_task_draw() -> None:
    """Tasks of very different lengths (1 to 60 agent calls) and an arm that makes exactly one
    extra call in every episode: the paired difference is +1 call in every resample, so its
    interval is [1, 1]. Resampling the two arms apart would mix long and short tasks and
    give an interval tens of calls wide (the unpaired one computed here)."""
    eps = []
    for t in range(60):
        calls = [("get_user", "ok")] * (t + 1)
        eps.append(episode("bf16", f"t{t}", 0, calls))
        eps.append(episode("int4", f"t{t}", 0, [*calls, ("get_order", "ok")]))
    r = analyze(eps, AnalysisOptions(bootstrap=1000, seed=3))
    diff = r.cells[0].comparisons[0].trajectory_difference["agent_tool_calls"]
    assert diff.value == pytest.approx(1.0)
    assert diff.ci_low is not None and diff.ci_high is not None
    paired_width = diff.ci_high - diff.ci_low
    rng = np.random.default_rng(0)
    lengths = np.arange(1, 61, dtype=float)
    draws = rng.integers(0, 60, (2, 1000, 60))
    unpaired = (lengths[draws[1]] + 1).mean(axis=1) - lengths[draws[0]].mean(axis=1)
    unpaired_width = float(np.subtract(*np.quantile(unpaired, [0.975, 0.025])))
    assert unpaired_width > 10
    assert paired_width < 0.01 * unpaired_width


def test_verdict_reasons_format_p_like_the_headlines() -> None:
    """One p-value format everywhere: `adjusted p < 0.001`, never `adjusted p = 1.4e-18`."""
    from flatscore.report.verdicts import pval

    eps = []
    for t in range(60):
        eps.append(episode("bf16", f"t{t}", 0, [("get_user", "ok")], success=True))
        eps.append(episode("int4", f"t{t}", 0, [("get_user", "ok")], success=t % 4 == 0))
    c = worded(analyze(eps, AnalysisOptions(bootstrap=200))).cells[0].comparisons[0]
    assert c.verdict == "visible damage" and c.p_adjusted is not None
    assert pval(c.p_adjusted) == "< 0.001"
    assert "adjusted p < 0.001" in (c.verdict_reason or "")
    assert "e-" not in (c.verdict_reason or "")
