"""The gap after a stop in words (`report.sequential_text`): beside a comparison decided
before its maximum, summary.md and report.html give the gap at the stop with its repeated
interval and, where the run itself stopped it, say that the fixed-design estimates are
conditional on stopping; nothing of it beside a comparison still open."""

from __future__ import annotations

import re

import pytest

from flatscore.analysis.analyze import analyze
from flatscore.analysis.channels import load_rules
from flatscore.analysis.result import AnalysisResult
from flatscore.analysis.sequential_power import CoupledPair
from flatscore.analysis.settings import AnalysisSettings
from flatscore.report.html import render_html
from flatscore.report.markdown import render_summary
from flatscore.report.sequential_text import conditional_text, coupling_source, sequential_line
from sequential_model import recorded_run

OPTIONS = AnalysisSettings(reference="ref", bootstrap=100, sequential=True)


def _run(stop_at: int | None) -> tuple[AnalysisResult, list]:
    """Arm `q` (a 30-point gap; its files end at `stop_at`, None: every task) and arm `open`
    (no gap, 10 tasks read: no planned look reached)."""
    episodes = recorded_run({"q": (0.3, stop_at), "open": (0.0, 10)})
    return analyze(episodes, OPTIONS), episodes


@pytest.fixture(scope="module")
def stopped() -> tuple[AnalysisResult, list]:
    full, _ = _run(None)
    q = next(c for c in full.cells[0].comparisons if c.arm == "q")
    assert q.sequential is not None and q.sequential.tasks < 48
    return _run(q.sequential.tasks)


def _points(x: float) -> str:
    return f"{100 * x:+.1f}"


def _blocks(summary: str) -> dict[str, str]:
    """Each comparison's bullet of summary.md, by arm."""
    return {
        m.group(1): m.group(0)
        for m in re.finditer(r"- \*\*(\w+) vs ref:.*?(?=\n- \*\*|\n\n)", summary, re.S)
    }


def test_a_stopped_comparison_names_its_gap_at_the_stop_and_the_label(
    stopped: tuple[AnalysisResult, list],
) -> None:
    analysis, episodes = stopped
    by_arm = {c.arm: c for c in analysis.cells[0].comparisons}
    q, still_open = by_arm["q"].sequential, by_arm["open"].sequential
    assert q is not None and q.decided and q.after_stop is not None
    assert still_open is not None and not still_open.decided and still_open.after_stop is None
    a = q.after_stop
    gap = (
        f"gap at the stop: {_points(a.gap)} points, repeated 95% CI "
        f"[{_points(a.ci_low)}, {_points(a.ci_high)}] (accounts for stopping)"
    )
    label = "fixed-design estimates of this comparison are conditional on stopping"
    assert gap in sequential_line(q) and label in conditional_text(q)
    assert "the gap away from 0" in conditional_text(q)  # a damage stop: the gap overstated
    assert "gap at the stop" not in sequential_line(still_open)
    assert conditional_text(still_open) == ""

    blocks = _blocks(render_summary(analysis))
    md_gap = gap.replace("[", "\\[").replace("]", "\\]")
    assert md_gap in blocks["q"] and label in blocks["q"]
    assert (
        "gap at the stop" not in blocks["open"] and "conditional on stopping" not in blocks["open"]
    )

    page = render_html(analysis, episodes, load_rules())
    heads = dict(re.findall(r"<h4>(\w+) vs ref:.*?</h4>\s*<ul>(.*?)</ul>", page, re.S))
    assert gap in heads["q"] and label in heads["q"] and 'class="after-stop"' in heads["q"]
    assert "gap at the stop" not in heads["open"] and "after-stop" not in heads["open"]


def test_a_run_that_holds_every_task_has_the_gap_but_no_label() -> None:
    """The fixed design then reads every task the run has: not conditional on the stop."""
    analysis, _ = _run(None)
    q = next(c for c in analysis.cells[0].comparisons if c.arm == "q").sequential
    assert q is not None and q.after_stop is not None
    assert q.after_stop.fixed_design == "all tasks"
    assert "gap at the stop" in sequential_line(q) and conditional_text(q) == ""
    assert "conditional on stopping" not in render_summary(analysis)


def test_where_the_pilots_coupling_came_from_in_words() -> None:
    """`flatscore power --sequential`'s last line: the pair the coupling was estimated on,
    or independent trials where the pilot has no arm beside its reference."""
    pair = CoupledPair(arm="int4", reference="bf16", model="qwen", domain="retail")
    assert coupling_source(pair) == "int4 against bf16 in qwen / retail"
    assert coupling_source(None) == "no arm beside the reference in the pilot: independent trials"
