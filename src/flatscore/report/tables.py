"""A study's tables as markdown: `tables.md`, written by every report (`flatscore report`).

From an analysis (`render`): the five findings' numbers per comparison, per-channel rates per
arm, S(K) and Gap(K) at K = 0, 2, 5, 9; from a repair effect (`repair_tables`, `flatscore
repair-effect --out`): the effect on S(K) and on the repaired channels' rates. One row per
(domain, arm) or per comparison. docs/embedded-study.md pastes them, so the page's numbers
are the analysis's. The verdicts (reproduced / not reproduced) are a person's reading of
these numbers and stay in prose; nothing here judges.

Formats: rates and S(K) in percent, gaps and differences in points, `[low, high]` the 95% CI
the analysis computed (`—` where it computed none: too few paired tasks, or no value).
"""

from __future__ import annotations

from flatscore.analysis.channels import UNKNOWN_TOOL_LEAVES
from flatscore.analysis.comparison import gap_amplification
from flatscore.analysis.outputs import Interval
from flatscore.analysis.repair_effect import EffectPoint, RepairArmEffect, RepairEffectResult
from flatscore.analysis.result import AnalysisResult, ArmStats, Cell, Comparison, GapPoint
from flatscore.report.markdown_table import table_lines
from flatscore.report.terminal import pct, signed, signed_ci  # `flatscore analyze`'s formats

TIGHT_KS = (0, 2, 5)
"""The tight budgets the S(K) table shows beside the default one (the study's K = 2)."""
CHANNEL_COLUMNS = ("bad_arguments", "entity_not_found", "precondition", "other")


def interval(value: Interval) -> str:
    return signed(value.value) + signed_ci(value.ci_low, value.ci_high)


def gap_text(point: GapPoint) -> str:
    return signed(point.gap) + signed_ci(point.ci_low, point.ci_high)


def gap_at(comparison: Comparison, k: int) -> GapPoint | None:
    return next((g for g in comparison.gap if k == g.K), None)


def success_at(arm: ArmStats, k: int) -> float | None:
    return next((b.success_rate for b in arm.budget_curve if k == b.K), None)


def channel(arm: ArmStats, name: str) -> str:
    stat = arm.channels.get(name)
    return "—" if stat is None else f"{pct(stat.rate)} ({stat.count})"


def _ordered(cells: list[Cell]) -> list[Cell]:
    return sorted(cells, key=lambda c: (c.domain, c.model))


def channel_table(result: AnalysisResult) -> list[str]:
    """Per arm and domain: episodes, S(9), agent calls, each channel's rate (count)."""
    rows = []
    for cell in _ordered(result.cells):
        k = result.settings.default_K
        for arm in cell.arms:
            unknown = arm.channels.get("unknown_tool")
            leaves = [arm.channels.get(ch) for ch in UNKNOWN_TOOL_LEAVES]
            split = (
                " (" + " / ".join(str(leaf.count) for leaf in leaves if leaf) + ")"
                if unknown and unknown.count and all(leaves)
                else ""
            )
            rows.append(
                [
                    arm.arm,
                    cell.domain,
                    str(arm.episodes),
                    pct(success_at(arm, k)),
                    str(arm.agent_tool_calls),
                    channel(arm, "unknown_tool") + split,
                    *(channel(arm, name) for name in CHANNEL_COLUMNS),
                    str(arm.malformed_outputs),
                ]
            )
    header = [
        "arm",
        "domain",
        "episodes",
        f"S({result.settings.default_K}) %",
        "agent calls",
        "unknown_tool % (n) (role conf. / near miss / invented / not a name)",
        *(f"{name} % (n)" for name in CHANNEL_COLUMNS),
        "malformed turns",
    ]
    return table_lines(header, rows, "llr")


def budget_table(result: AnalysisResult) -> list[str]:
    """S(K) per arm (percent) and Gap(K) = S_ref − S_arm (points, 95% CI) at K = 0, 2, 5
    and the default K (τ²'s max_errors 10 → K = 9)."""
    ks = (*(k for k in TIGHT_KS if k < result.settings.default_K), result.settings.default_K)
    rows = []
    for cell in _ordered(result.cells):
        by_arm = {c.arm: c for c in cell.comparisons}
        for arm in cell.arms:
            comparison = by_arm.get(arm.arm)
            gaps: list[str] = []
            for k in ks:
                point = gap_at(comparison, k) if comparison else None
                gaps.append("—" if point is None else gap_text(point))
            growth = "—"
            if comparison is not None:
                small, default = gap_at(comparison, 2), gap_at(comparison, ks[-1])
                amp = gap_amplification(small, default) if small and default else None
                if amp is not None and amp.value is not None:  # positive, distinguishable gaps
                    growth = f"{amp.value:.2f}"
            rows.append(
                [cell.domain, arm.arm, *(pct(success_at(arm, k)) for k in ks), *gaps, growth]
            )
    header = [
        "domain",
        "arm",
        *(f"S({k})" for k in ks),
        *(f"Gap({k})" for k in ks),
        f"Gap(2)/Gap({ks[-1]})",
    ]
    return table_lines(header, rows, "llr")


def findings_table(result: AnalysisResult) -> list[str]:
    """The five findings' numbers per comparison (arm vs reference), in the study's terms."""
    rows = []
    for cell in _ordered(result.cells):
        ref = next((a for a in cell.arms if a.arm == cell.reference), None)
        arms = {a.arm: a for a in cell.arms}
        for comp in cell.comparisons:
            arm = arms[comp.arm]
            unknown = comp.channel_amplification.get("unknown_tool")
            amplification = "—"
            if unknown is not None:
                ratio = "—" if unknown.ratio is None else f"×{unknown.ratio:.2f}"
                bounds = (
                    f" [{unknown.ci_low:.2f}, {unknown.ci_high:.2f}]"
                    if unknown.ci_low is not None and unknown.ci_high is not None
                    else ""
                )
                rates = f"{pct(unknown.rate_ref)} → {pct(unknown.rate_arm)}"
                amplification = f"{rates}, {ratio}{bounds}"
            rho = "—" if comp.spearman_rho is None else f"{comp.spearman_rho:.2f}"
            if comp.spearman_ci_low is not None and comp.spearman_ci_high is not None:
                rho += f" [{comp.spearman_ci_low:.2f}, {comp.spearman_ci_high:.2f}]"
            names = (
                f"{rho}; novel {pct(comp.novel_fraction)}% of {comp.hallucinated_names_union}"
                if comp.hallucinated_names_union
                else "no hallucinated names"
            )
            if comp.p_adjusted is None:
                p = "p = —"
            else:  # 0.0 is an underflow of a tiny p-value, not a certainty
                p = f"p = {comp.p_adjusted:.3g}" if comp.p_adjusted > 0 else "p < 1e-300"
            small = gap_at(comp, 2)
            rows.append(
                [
                    cell.domain,
                    comp.arm,
                    str(comp.paired_tasks),
                    f"{interval(comp.success_difference)}; {p}; "
                    f"TOST {'yes' if comp.tost_equivalent else 'no'}",
                    f"{amplification}; amplified: {', '.join(comp.amplified_channels) or 'none'}",
                    names,
                    f"{pct(ref.recovery_rate if ref else None)} → {pct(arm.recovery_rate)}; "
                    f"{interval(comp.recovery_difference)}",
                    "—"
                    if small is None
                    else f"{signed(small.gap)}{signed_ci(small.ci_low, small.ci_high)} vs "
                    f"{interval(comp.success_difference)}",
                ]
            )
    header = [
        "domain",
        "arm vs ref",
        "paired tasks",
        f"1 · Gap({result.settings.default_K}) pts [unadjusted CI]; adj. p; TOST ±"
        f"{result.settings.margin_points:g}",
        "2 · unknown_tool % ref → arm, ratio [unadjusted CI]",
        "3 · Spearman ρ [CI]; novel names",
        "4 · recovery % ref → arm; diff pts [CI]",
        f"5 · Gap(2) vs Gap({result.settings.default_K}) pts",
    ]
    return table_lines(header, rows, "llrl")


def _repaired_channels(arm: RepairArmEffect) -> list[str]:
    channels = (arm.repair_config or {}).get("channels") or []
    return [str(c) for c in channels]


def _effect_point(arm: RepairArmEffect, k: int) -> EffectPoint | None:
    return next((p for p in arm.effect_by_K if k == p.K), None)


def _effect_at(arm: RepairArmEffect, k: int) -> str:
    point = _effect_point(arm, k)
    return "—" if point is None else signed(point.effect) + signed_ci(point.ci_low, point.ci_high)


def repair_tables(result: RepairEffectResult) -> list[str]:
    """The repair effect (S(K) with − without, points) per arm at K = default and 2, the
    interaction against the reference, and the repaired channels' rates with − without."""
    k = result.default_K
    effects, rates = [], []
    cells = sorted(result.cells, key=lambda c: (c.domain, c.model))
    channels: list[str] = []
    for cell in cells:
        for arm in cell.arms:
            channels += [c for c in _repaired_channels(arm) if c not in channels]
    for cell in cells:
        for arm in cell.arms:
            point = _effect_point(arm, k)
            effects.append(
                [
                    cell.domain,
                    arm.arm,
                    ", ".join(_repaired_channels(arm)) or "—",
                    str(arm.paired_tasks),
                    "—" if point is None else pct(point.success_without),
                    "—" if point is None else pct(point.success_with),
                    _effect_at(arm, k),
                    _effect_at(arm, 2),
                    "—" if arm.interaction is None else interval(arm.interaction),
                    f"{arm.repair_instructions} ({arm.episodes_repaired})",
                ]
            )
            rates.append(
                [
                    cell.domain,
                    arm.arm,
                    *(
                        interval(arm.channel_rate_effect[c])
                        if c in arm.channel_rate_effect
                        else "—"
                        for c in channels
                    ),
                ]
            )
    effect_header = [
        "domain",
        "arm",
        "repaired channels",
        "tasks",
        f"S({k}) without",
        f"S({k}) with",
        f"effect at K = {k}",
        "effect at K = 2",
        f"interaction vs ref (K = {k})",
        "repair instructions (episodes)",
    ]
    return [
        "#### Repair effect on S(K)",
        "",
        *table_lines(effect_header, effects, "lllr"),
        "",
        "#### Repaired channels' rates, with − without",
        "",
        *table_lines(["domain", "arm", *channels], rates, "llr"),
    ]


def render(result: AnalysisResult) -> str:
    sections = [
        ("Findings, numbers per comparison", findings_table(result)),
        ("Per-channel rates per arm", channel_table(result)),
        ("S(K) and Gap(K)", budget_table(result)),
    ]
    out = [f"<!-- flatscore report, tables.md: {result.episodes_read} episodes read -->"]
    for title, lines in sections:
        out += ["", f"#### {title}", "", *lines]
    return "\n".join(out) + "\n"
