"""The risk screen in words (docs/analysis.md, "Definitions"): the prior the reference arm's
own channel rates give, then what the cell's comparisons found. The analysis keeps the
screen as data (`analysis.risk`: verdict, established channels, threshold, `amplified_in`);
analysis.json's `risk_screen.reason` is these words (`analysis_text.worded`)."""

from __future__ import annotations

from flatscore.analysis.result import Cell, RiskScreen


def prior(screen: RiskScreen, reference: str) -> str:
    """What the reference arm's rates alone say."""
    if screen.verdict == "unknown":
        return "the reference arm made no agent tool calls"
    if screen.established_channels:
        listed = ", ".join(f"{ch} {rate:.1%}" for ch, rate in screen.established_channels.items())
        return (
            f"a prior from {reference} alone: established failure channel(s) {listed} "
            f"(≥ {screen.threshold:.1%} of agent calls), which quantization tends to amplify"
        )
    return (
        f"a prior from {reference} alone: every channel rate is below {screen.threshold:.1%} "
        "of agent calls"
    )


def outcome(cell: Cell) -> str | None:
    """What the cell's comparisons found: the arms with an amplified channel (or more failed
    calls overall), or that none has one; None when the cell has no comparison."""
    if cell.risk_screen.amplified_in is None:
        return None
    amplified = {
        c.arm: (["all failed calls"] if c.failed_calls and c.failed_calls.amplified else [])
        + list(c.amplified_channels)
        for c in cell.comparisons
    }
    listed = [f"{arm} ({', '.join(chs)})" for arm, chs in amplified.items() if chs]
    if listed:
        return "this cell's comparisons: amplified in " + "; ".join(listed)
    return "this cell's comparisons show no amplified channel"


def risk_reason(cell: Cell) -> str:
    """The cell's risk screen in words: the prior, then what the comparisons found."""
    found = outcome(cell)
    said = prior(cell.risk_screen, cell.reference)
    return f"{said}; {found}" if found is not None else said
