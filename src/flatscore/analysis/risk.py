"""The risk screen (docs/analysis.md, "Definitions"): from reference-arm logs alone, is
quantization likely to hurt?

The study's cheap filter: a model whose full-precision channel rates are near zero is
unlikely to be damaged; one with an established failure channel will see it amplified.
"Established" = a channel rate (failed agent calls in it / agent tool calls) ≥ the threshold.
"""

from __future__ import annotations

from flatscore.analysis.result import ArmStats, RiskScreen

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
            reason="the reference arm made no agent tool calls",
        )
    established = {
        ch: rate
        for ch in SCREENED_CHANNELS
        if (rate := reference.channels[ch].rate) is not None and rate >= threshold
    }
    if established:
        listed = ", ".join(f"{ch} {rate:.1%}" for ch, rate in established.items())
        return RiskScreen(
            verdict="at risk",
            established_channels=established,
            threshold=threshold,
            reason=f"established failure channel(s) in {reference.arm}: {listed} "
            f"(≥ {threshold:.1%} of agent calls); expect amplification under quantization",
        )
    return RiskScreen(
        verdict="low risk",
        established_channels={},
        threshold=threshold,
        reason=f"every channel rate of {reference.arm} is below {threshold:.1%} of agent calls",
    )
