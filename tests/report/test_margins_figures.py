"""The margin and repair figures: SVG, deterministic, labels escaped."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flatscore.analysis.margins import margin_distribution, summarize_arm, token_margins
from flatscore.analysis.margins_result import MarginsResult
from flatscore.analysis.repair_effect import EffectPoint, Interval, RepairArmEffect, RepairCell
from flatscore.report.margins_figures import flip_curve_figure, repair_effect_figure


def margins() -> MarginsResult:
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(40, 6))
    arm = ref + rng.normal(scale=0.3, size=ref.shape)
    m = token_margins(ref, arm)
    decision = np.arange(40) % 5 == 0
    edges = [0.0, 0.5, 1.0, 2.0, float("inf")]
    return MarginsResult(
        model="tiny",
        model_description="fixture",
        runs=[],
        transcripts_arm="bf16",
        reference_arm="ref",
        episodes=["e"],
        agent_tokens=40,
        decision_tokens=int(decision.sum()),
        edges=[0.0, 0.5, 1.0, 2.0, None],
        reference_agent_margins=margin_distribution(m.ref_margin, edges),
        reference_decision_margins=margin_distribution(m.ref_margin[decision], edges),
        arms=[summarize_arm("<script>int4", m, decision, [], edges)],
    )


def test_flip_curve_figure() -> None:
    svg = flip_curve_figure("m1", margins())
    assert svg.startswith("<svg") and "<script>" not in svg and "&lt;script&gt;int4" in svg
    assert svg == flip_curve_figure("m1", margins())


def repair_cell() -> RepairCell:
    arm = RepairArmEffect(
        arm="int4",
        paired_tasks=4,
        episodes_without=4,
        episodes_with=4,
        repair_instructions=2,
        episodes_repaired=2,
        repair_config=None,
        effect=Interval(value=0.5, ci_low=0.0, ci_high=1.0),
        effect_by_K=[
            EffectPoint(
                K=k, success_without=0.25, success_with=0.75, effect=0.5, ci_low=0.0, ci_high=1.0
            )
            for k in (0, 9)
        ],
        channel_rate_effect={},
        test="exact McNemar",
        p_value=0.5,
    )
    return RepairCell(model="m", domain="retail", reference="bf16", arms=[arm])


def test_repair_effect_figure() -> None:
    cell = repair_cell()
    svg = repair_effect_figure("r1", cell)
    assert svg.startswith("<svg") and "int4" in svg and svg == repair_effect_figure("r1", cell)


def test_report_shows_margins_and_repair_sections_only_when_present(tmp_path: Path) -> None:
    from report_episodes import study

    from flatscore.analysis.analyze import AnalysisOptions, analyze
    from flatscore.analysis.channels import load_rules
    from flatscore.analysis.repair_effect import RepairEffectResult
    from flatscore.report.html import render_html

    episodes = study()
    analysis = analyze(episodes, AnalysisOptions(bootstrap=200))
    plain = render_html(analysis, episodes, load_rules())
    assert 'id="margins"' not in plain and 'id="repair"' not in plain

    analysis.margins = margins()
    analysis.repair = RepairEffectResult(
        default_K=9, budgets=[0, 9], count="all", bootstrap=200, seed=0, confidence=0.95,
        cells=[repair_cell()],
    )  # fmt: skip
    page = render_html(analysis, episodes, load_rules())
    for section in ("margins", "repair"):
        assert f'id="{section}"' in page and f'href="#{section}"' in page
    assert "&lt;script&gt;int4" in page and "<script>int4" not in page
