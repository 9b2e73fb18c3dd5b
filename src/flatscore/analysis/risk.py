"""The risk screen (docs/analysis.md, "Definitions"): from reference-arm logs alone, is
quantization likely to hurt?

The study's cheap filter: a model whose full-precision channel rates are near zero is
unlikely to be damaged; one with an established failure channel will see it amplified.
"Established" = a channel rate (failed agent calls in it / agent tool calls) ≥ the threshold.
It is a prior, read before any arm is looked at; once the cell's comparisons are decided,
`with_outcome` adds what they found, so the screen never predicts amplification the study's
own tests did not show without saying so. The screen is data; its words (`reason`) are the
report's (`flatscore.report.risk_text`).
"""

from __future__ import annotations

from collections.abc import Sequence

from flatscore.analysis.result import ArmStats, Comparison, RiskScreen

DEFAULT_RISK_THRESHOLD = 0.02
SCREENED_CHANNELS: tuple[str, ...] = (
    "unknown_tool",
    "bad_arguments",
    "entity_not_found",
    "precondition",
    "other",
    "malformed_output",
)


def risk_screen(reference: ArmStats, threshold: float = DEFAULT_RISK_THRESHOLD) -> RiskScreen:
    if reference.agent_tool_calls == 0:
        return RiskScreen(
            verdict="unknown",
            established_channels={},
            threshold=threshold,
            reason="",
        )
    established = {
        ch: rate
        for ch in SCREENED_CHANNELS
        if (rate := reference.channels[ch].rate) is not None and rate >= threshold
    }
    return RiskScreen(
        verdict="at risk" if established else "low risk",
        established_channels=established,
        threshold=threshold,
        reason="",
    )


def with_outcome(screen: RiskScreen, comparisons: Sequence[Comparison]) -> RiskScreen:
    """The screen with what the cell's own comparisons found: the arms with an amplified
    channel or more failed calls overall (none: an empty list)."""
    if not comparisons:
        return screen
    amplified = [
        c.arm
        for c in comparisons
        if (c.failed_calls and c.failed_calls.amplified) or c.amplified_channels
    ]
    return screen.model_copy(update={"amplified_in": amplified})
