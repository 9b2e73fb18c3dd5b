"""report.html: one self-contained, deterministic, script-safe page.

Safety model (model-generated text is hostile by assumption):
- every value goes through jinja2 with autoescape on; plots are SVG written by
  `flatscore.report.svg`, which escapes every label;
- transcripts travel as JSON inside `<script type="application/json">` with `<`, `>` and `&`
  written as `\\u003c` etc., so no text can close the script element; the page's own script
  renders them with `textContent` only. A payload over `COMPRESS_ABOVE` (a study of
  thousands of episodes) travels gzip-compressed in base64 instead, which has no `<` at all,
  and the page unpacks it with the browser's `DecompressionStream`: the embedded study's
  4,560 transcripts are ~30 MB of JSON, too large to commit or to open comfortably;
- a Content-Security-Policy allows exactly the page's own script (by hash), no network, no
  other script: if escaping ever failed, injected markup still could not run.

Deterministic: same analysis + episodes → same bytes (no timestamp unless one is passed).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

import flatscore.report.plots as plots
from flatscore.analysis.channels import ChannelRules
from flatscore.analysis.result import (
    CHANNELS,
    AnalysisResult,
    Cell,
    Comparison,
)
from flatscore.episode import Episode
from flatscore.report.analysis_text import worded
from flatscore.report.first_screen import first_screen
from flatscore.report.html_text import Footnotes, markdown_table, prose
from flatscore.report.reproduction import Banner
from flatscore.report.sequential_text import after_stop_sentences
from flatscore.report.terminal import channel_change
from flatscore.report.transcripts import browser_payload, cell_key
from flatscore.report.verdicts import (
    CHANNEL_WORDS,
    REACH,
    TONE,
    cell_reason,
    cell_verdict,
    floor_size,
    headlines,
    pct,
    pts,
    pval,
    ratio,
    verdict_text,
)

SECTIONS: tuple[tuple[str, str], ...] = (
    ("verdicts", "Verdicts"),
    ("budget", "Error budget S(K)"),
    ("channels", "Failure channels"),
    ("invariance", "Failure-set invariance"),
    ("recovery", "Recovery & length"),
    ("passk", "pass^k"),
    ("statistics", "Statistics"),
    ("risk", "Risk screen"),
    ("transcripts", "Transcripts"),
    ("method", "Method"),
)
"""The sections every report has; `repair` and `margins` are added when the analysis has them."""

OPTIONAL_SECTIONS: dict[str, str] = {
    "repair": "Repair effect",
    "margins": "Logit margins",
    "cost": "Cost",
}


def _sections(analysis: AnalysisResult) -> list[tuple[str, str]]:
    extra = [(k, v) for k, v in OPTIONAL_SECTIONS.items() if getattr(analysis, k) is not None]
    at = [s for s, _ in SECTIONS].index("transcripts")
    return [*SECTIONS[:at], *extra, *SECTIONS[at:]]


def _optional_figures(analysis: AnalysisResult) -> dict[str, Any]:
    """Repair-effect and margin figures and tables (markdown text shown as preformatted)."""
    from flatscore.report.effect_tables import margins_table, repair_table
    from flatscore.report.margins_figures import flip_curve_figure, repair_effect_figure

    out: dict[str, Any] = {"repair_svgs": [], "repair_table": None, "margins_svg": None}
    if analysis.repair is not None:
        out["repair_svgs"] = [
            Markup(repair_effect_figure(f"repair-{i}", cell))
            for i, cell in enumerate(analysis.repair.cells)
        ]
        out["repair_table"] = repair_table(analysis.repair)
    if analysis.margins is not None:
        out["margins_svg"] = Markup(flip_curve_figure("margins", analysis.margins))
        out["margins_table"] = margins_table(analysis.margins)
    if analysis.cost is not None:
        from flatscore.report.cost_figures import cost_figure
        from flatscore.report.cost_text import cost_table

        out["cost_svg"] = Markup(cost_figure("cost", analysis))
        out["cost_table"] = cost_table(analysis)
    return out


def json_for_script(data: Any) -> Markup:
    """JSON that is safe inside a `<script>` element: nothing in it can end the element or
    start markup, and it stays valid JSON (the escapes only ever occur inside strings)."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    for raw, escaped in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e")):
        text = text.replace(raw, escaped)
    return Markup(text)


COMPRESS_ABOVE = 2_000_000
"""Bytes of transcript JSON above which the page carries it gzip-compressed (see above): the
demo's and most studies' reports stay plain JSON, readable with any tool."""


def transcript_data(payload: Any, compress_above: int | None = None) -> tuple[str, Markup]:
    """(encoding, text) of the transcript payload for the page's data element: `json`, or
    `gzip+base64` when the JSON is larger than `compress_above` bytes (`COMPRESS_ABOVE` by
    default). Deterministic: the gzip header carries no time or name."""
    text = json_for_script(payload)
    if len(text) <= (COMPRESS_ABOVE if compress_above is None else compress_above):
        return "json", text
    packed = gzip.compress(text.encode("ascii"), compresslevel=9, mtime=0)
    return "gzip+base64", Markup(base64.b64encode(packed).decode("ascii"))


def _num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _ci(iv: object, scale: str = "pts") -> str:
    """' [lo, hi]' of an object with ci_low / ci_high, in points (`pts`), ratios or plain
    numbers; nothing when there is no interval (too few tasks for a bootstrap)."""
    lo, hi = getattr(iv, "ci_low", None), getattr(iv, "ci_high", None)
    if lo is None:
        return ""
    show = {"pts": pts, "ratio": ratio, "num": _num}[scale]
    return f" [{show(lo)}, {'no upper bound' if hi is None else show(hi)}]"


def _change(amp: object) -> str:
    """×ratio, or `new: 0 → x%` for a channel the reference never failed in."""
    r = getattr(amp, "ratio", None)
    if r is None and getattr(amp, "count_ref", 0) == 0 and getattr(amp, "count_arm", 0) > 0:
        return f"new: 0 → {pct(getattr(amp, 'rate_arm', None))}"
    return ratio(r)


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("flatscore.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(pts=pts, pct=pct, ratio=ratio, p=pval, num=_num, ci=_ci, change=_change)
    env.filters.update(prose=prose, mdtable=markdown_table, verdict=verdict_text)
    return env


def _gap_band(c: Comparison) -> plots.Band:
    return plots.Band(
        label=c.arm,
        x=[g.K for g in c.gap],
        y=[g.gap for g in c.gap],
        low=[g.ci_low for g in c.gap],
        high=[g.ci_high for g in c.gap],
    )


def _arm_band(cell: Cell, index: int) -> plots.Band:
    arm = cell.arms[index]
    points = arm.budget_curve
    lows = [p.ci_low for p in points]
    highs = [p.ci_high for p in points]
    has_ci = all(v is not None for v in lows + highs) and bool(points)
    return plots.Band(
        label=arm.arm,
        x=[p.K for p in points],
        y=[p.success_rate for p in points],
        low=lows if has_ci else None,
        high=highs if has_ci else None,
    )


def _floor_panels(cell: Cell) -> list[plots.FloorPanel]:
    """ρ and novel share at the floor's size (interval = floor + the excess CI), the
    failed-call ratio and Gap(K_small) against ± the reference-vs-reference floor."""
    cs = [c for c in cell.comparisons if c.noise_floor is not None and c.noise_floor.splits]
    if not cs:
        return []
    arms = [c.arm for c in cs]
    d = [c.noise_floor.diagnostics for c in cs if c.noise_floor is not None]
    k = cs[0].gap_amplification.k_small
    panels = []
    for key, title, scale, limits in (
        ("spearman_rho", "ρ (half the trials)", 1.0, (-1.0, 1.0)),
        ("novel_fraction", "novel share, % (half)", 100.0, (0.0, 100.0)),
    ):
        floor = d[0][key].floor

        def shift(x: float | None, f: float | None = floor, s: float = scale) -> float | None:
            return None if x is None or f is None else s * (f + x)

        panels.append(
            plots.FloorPanel(
                title=title,
                arms=arms,
                values=[shift(x[key].arm_half, 0.0) for x in d],
                low=[shift(x[key].ci_low) for x in d],
                high=[shift(x[key].ci_high) for x in d],
                floor=None if floor is None else scale * floor,
                limits=limits,
            )
        )

    def around_one(x: float | None) -> tuple[float, float] | None:
        return None if x is None else (1 / x, x)

    def around_zero(x: float | None) -> tuple[float, float] | None:
        return None if x is None else (-100 * x, 100 * x)

    fc = d[0]["failed_calls"]
    panels.append(
        plots.FloorPanel(
            title="failed calls, arm ÷ ref",
            arms=arms,
            values=[x["failed_calls"].arm for x in d],
            band=around_one(fc.floor_full_trials),
            reach=around_one(fc.reach_full_trials()),
            log=True,
        )
    )
    gaps = [x.get(f"gap.K{k}") for x in d]
    g = gaps[0]
    panels.append(
        plots.FloorPanel(
            title=f"Gap(K={k}), points",
            arms=arms,
            values=[None if x is None or x.arm is None else 100 * x.arm for x in gaps],
            band=None if g is None else around_zero(g.floor_full_trials),
            reach=None if g is None else around_zero(g.reach_full_trials()),
        )
    )
    return panels


def _floor_sizes(cell: Cell) -> str:
    """The end of the floor figure's caption: the floors its grey bands show, with their
    standard errors, and what the lighter band means (only where there is one)."""
    cs = [c for c in cell.comparisons if c.noise_floor is not None and c.noise_floor.splits]
    if not cs or cs[0].noise_floor is None:
        return "."
    d, k = cs[0].noise_floor.diagnostics, cs[0].gap_amplification.k_small
    shown = [
        (what, f)
        for what, f in (
            ("failed calls", d.get("failed_calls")),
            (f"Gap(K={k})", d.get(f"gap.K{k}")),
        )
        if f is not None and f.floor_full_trials is not None
    ]
    if not shown:
        return "."
    sizes = ", ".join(f"{what} {floor_size(f)}" for what, f in shown)
    if not any(f.reach_full_trials() is not None for _, f in shown):
        return f": {sizes}."
    return (
        f", with the floor's task-bootstrap standard error (SE): {sizes}. The lighter band "
        f"widens the floor by {REACH}: an arm outside it is beyond the floor."
    )


def _ordered_arms(cell: Cell) -> list[int]:
    """Arm indices, reference first (it gets the first colour in every plot)."""
    ref = [i for i, a in enumerate(cell.arms) if a.arm == cell.reference]
    return ref + [i for i, a in enumerate(cell.arms) if a.arm != cell.reference]


def _cell_context(index: int, cell: Cell, analysis: AnalysisResult) -> dict[str, Any]:
    """Everything one cell's sections show, numbers pre-formatted by the template filters."""
    settings = analysis.settings
    order = _ordered_arms(cell)
    arms = [cell.arms[i] for i in order]
    small_k = cell.comparisons[0].gap_amplification.k_small if cell.comparisons else None
    budget_svg = plots.budget_figure(
        f"budget-{index}",
        [_arm_band(cell, i) for i in order],
        [_gap_band(c) for c in cell.comparisons],
        settings.default_K,
        small_k,
    )
    shown_channels = [ch for ch in CHANNELS if any(ch in a.channels for a in arms)]
    rates = plots.GroupedBars(
        categories=shown_channels,
        series={
            a.arm: [
                (a.channels[ch].rate or 0.0) if ch in a.channels else 0.0 for ch in shown_channels
            ]
            for a in arms
        },
    )
    intervals: dict[str, Sequence[plots.Interval]] = {}
    for c in cell.comparisons:
        rows = [
            plots.Interval(
                label=ch,
                value=amp.ratio,
                low=amp.ci_low,
                high=amp.ci_high,
                note=channel_change(amp) or "no failures in either arm",
            )
            for ch in shown_channels
            if (amp := c.channel_amplification.get(ch)) is not None
        ]
        total = c.failed_calls
        if total is not None:  # is there more failure at all? (after the channels)
            rows.append(
                plots.Interval(
                    label="all failed calls",
                    value=total.ratio,
                    low=total.ci_low,
                    high=total.ci_high,
                    note=channel_change(total) or "no failed calls in either arm",
                )
            )
        intervals[c.arm] = rows
    channels_svg = plots.channel_figure(f"channels-{index}", rates, intervals)
    ref_arm = next((a for a in arms if a.arm == cell.reference), arms[0] if arms else None)
    rank_svgs: list[str | None] = []
    for j, c in enumerate(cell.comparisons):
        arm = next((a for a in arms if a.arm == c.arm), None)
        if not (ref_arm and ref_arm.hallucinated_names) and not (arm and arm.hallucinated_names):
            rank_svgs.append(None)  # one line in the page instead of an empty plot
            continue
        rank_svgs.append(
            plots.rank_figure(
                f"rank-{index}-{j}",
                ref_arm.hallucinated_names if ref_arm else {},
                arm.hallucinated_names if arm else {},
                c.reference,
                c.arm,
                c.spearman_rho,
                c.novel_fraction,
            )
        )
    panels = _floor_panels(cell)
    floor_svg = plots.floor_figure(f"floor-{index}", panels) if panels else None
    passk_svg = plots.passk_figure(
        f"passk-{index}",
        [plots.Band(label=a.arm, x=list(range(1, len(a.pass_k) + 1)), y=a.pass_k) for a in arms],
    )
    budgets = sorted({p.K for a in arms for p in a.budget_curve})
    s_of = {a.arm: {p.K: p for p in a.budget_curve} for a in arms}
    gap_of = {c.arm: {g.K: g for g in c.gap} for c in cell.comparisons}
    return {
        "index": index,
        "key": cell_key(cell.model, cell.domain),
        "cell": cell,
        "arms": arms,
        "tone": TONE.get(cell_verdict(cell), "warn"),
        "verdict": cell_verdict(cell),
        "reason": cell_reason(cell),
        "headlines": headlines(cell, settings),
        "after_stop": {
            c.arm: after_stop_sentences(c.sequential) if c.sequential else []
            for c in cell.comparisons
        },
        "budget_svg": Markup(budget_svg),
        "budgets": budgets,
        "s_of": s_of,
        "gap_of": gap_of,
        "channels": shown_channels,
        "channels_svg": Markup(channels_svg),
        "rank_svgs": [Markup(s) if s else None for s in rank_svgs],
        "passk_svg": Markup(passk_svg),
        "floor_svg": Markup(floor_svg) if floor_svg else None,
        "floor_sizes": _floor_sizes(cell),
        "max_k": max((len(a.pass_k) for a in arms), default=0),
        "footnotes": Footnotes(),
    }


def model_weights(episodes: Iterable[Episode]) -> list[tuple[str, list[str], str]]:
    """(model, arms, weights text) for every distinct `metadata.weights` a run recorded: where
    the weights came from (e.g. that the embedded reference is a dequantized Q4_1 model)."""
    arms: dict[tuple[str, str], set[str]] = {}
    for e in episodes:
        text = e.metadata.get("weights")
        if isinstance(text, str) and text:
            arms.setdefault((e.model or "?", text), set()).add(e.arm)
    return [(m, sorted(a), text) for (m, text), a in sorted(arms.items())]


def render_html(
    analysis: AnalysisResult,
    episodes: Iterable[Episode],
    rules: ChannelRules,
    *,
    title: str = "flatscore report",
    generated_at: str | None = None,
    banner: Banner | None = None,
) -> str:
    """The whole report page as one string, opening with its first screen (`first_screen`);
    `banner`: a reproduction's count above it."""
    analysis = worded(analysis)
    env = _environment()
    script = env.get_template("_script.html.j2").render()
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    csp = (
        "default-src 'none'; "
        f"script-src 'sha256-{digest}'; "
        "style-src 'unsafe-inline'; img-src data:; "
        "base-uri 'none'; form-action 'none'"
    )
    episodes = list(episodes)
    cells = [_cell_context(i, cell, analysis) for i, cell in enumerate(analysis.cells)]
    payload = browser_payload(analysis, episodes, rules)
    encoding, data_text = transcript_data(payload)
    comparisons = [(cell, c) for cell in analysis.cells for c in cell.comparisons]
    return env.get_template("report.html.j2").render(
        title=title,
        generated_at=generated_at,
        analysis=analysis,
        settings=analysis.settings,
        sections=_sections(analysis),
        **_optional_figures(analysis),
        cells=cells,
        weights=model_weights(episodes),
        comparisons=comparisons,
        channel_words=CHANNEL_WORDS,
        episode_count=len(payload["episodes"]),
        data_encoding=encoding,
        data_text=data_text,
        script=Markup(script),
        csp=csp,
        banner=banner,
        screen=first_screen(analysis),
    )
