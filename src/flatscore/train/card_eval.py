"""The card's evaluation table (arms × domains: success, calls, failure channels), shared by
the evaluation summaries' section (`flatscore.train.card`) and the run files' section
(`flatscore.train.card_runs`)."""

from __future__ import annotations

from flatscore.analysis.channels import LEAF_CHANNELS
from flatscore.report.markdown_table import table_lines
from flatscore.train.evaluate import ArmDomainSummary

CHANNELS = LEAF_CHANNELS  # every failure once; unknown_tool = role_confusion + invented


def _pct(num: int, den: int) -> str:
    return f"{100 * num / den:.1f}%" if den else "–"


def _rate(rate: float | None) -> str:
    return f"{100 * rate:.1f}%" if rate is not None else "–"


RATES_STATED = (
    "Channel counts are failed agent calls; rates are analysis.json's (`flatscore.analysis`): "
    "failed agent calls in the channel / all agent tool calls, task-weighted (each task's "
    "trials averaged first, then summed over tasks; with one trial per task, count / agent "
    "calls); malformed_output counts unparseable turns."
)


def eval_table(summaries: list[ArmDomainSummary]) -> str:
    """Arms × domains: success, calls, failure channels (count, and the analysis' task-weighted
    rate per agent call)."""
    head = ["arm", "domain", "success", "agent calls", "failed", *CHANNELS, "terminations"]
    rows = []
    for s in summaries:
        cells = [
            s.arm,
            s.domain,
            f"{s.succeeded}/{s.episodes} ({_pct(s.succeeded, s.episodes)})",
            str(s.agent_calls),
            str(s.failed_calls),
        ]
        for c in CHANNELS:
            n = s.channels.get(c, 0)
            cells.append(f"{n} ({_rate(s.channel_rate(c))})" if c != "malformed_output" else str(n))
        cells.append(", ".join(f"{k} {v}" for k, v in sorted(s.terminations.items())))
        rows.append(cells)
    return "\n".join(table_lines(head, rows, "l"))
