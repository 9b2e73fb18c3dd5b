"""Hugging Face model cards as people read them: `flatscore export model-card RUNS --out
DIR` writes `<model>__<arm>/README.md` per (model, arm) — the `model-index` metadata
(`flatscore.formats.model_card`) as YAML front matter, then what was measured and a table —
and `results.md` with every arm's rows."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from flatscore import __version__
from flatscore.analysis.result import AnalysisResult, BudgetPoint
from flatscore.errors import InputError
from flatscore.report.analysis_text import worded
from flatscore.report.markdown_table import table_lines
from flatscore.report.model_index import CardRow, card_rows, model_index
from flatscore.report.verdict_reason import times
from flatscore.report.verdicts import signed_ci_pts, signed_pts

CARD_FILE = "README.md"
RESULTS_FILE = "results.md"


def _ci(point: BudgetPoint) -> str:
    value = "n/a" if point.success_rate is None else f"{100 * point.success_rate:.1f}"
    if point.ci_low is None or point.ci_high is None:
        return value
    return f"{value} [{100 * point.ci_low:.1f}, {100 * point.ci_high:.1f}]"


def _gap(row: CardRow) -> str:
    if row.comparison is None:
        return "—"
    g = row.comparison.gap_default
    if g.gap is None:
        return "n/a"
    return signed_pts(g.gap) + signed_ci_pts(g.ci_low, g.ci_high)  # reference − arm


def results_table(rows: list[CardRow], default_k: int, tight_k: int) -> str:
    """The Markdown table of the card's body: one line per (domain, arm)."""
    header = [
        "domain",
        "arm",
        "tasks × trials",
        f"S(K={default_k}) % [95% CI]",
        f"S(K={tight_k}) % [95% CI]",
        f"Gap(K={default_k}), reference − arm (points)",
        "failed calls vs reference",
        "verdict",
    ]
    lines = table_lines(
        header,
        (
            [
                r.domain,
                r.arm,
                f"{r.tasks} × {r.trials}",
                _ci(r.default),
                _ci(r.tight),
                _gap(r),
                times(r.failed_calls) if r.failed_calls is not None else "—",
                r.verdict if r.comparison is None else f"**{r.verdict_shown}**",
            ]
            for r in rows
        ),
        "lllrrrrl",
    )
    return "\n".join(lines) + "\n"


def _body(
    name: str, rows: list[CardRow], context: list[CardRow], result: AnalysisResult, tight_k: int
) -> str:
    """The card's text: what was measured and how, then the table (the reference's rows
    in `context`, for comparison)."""
    s = result.settings
    ref = rows[0].reference
    shown = [r for r in context if r.comparison is None or r in rows]
    return "\n".join(
        [
            f"# {name}",
            "",
            f"Measured with flatscore {__version__} against `{ref}` on the same tasks and "
            f"seeds (paired). S(K): the share of episodes that succeed with at most K "
            f"failed tool calls; K = {s.default_K} is the default budget "
            f"({s.default_K_source}), K = {tight_k} a tight one. Intervals are 95%. The "
            f"difference from the reference: {s.success_interval.split(' (')[0]}, "
            f"{s.correction}-adjusted across the study's comparisons, equivalence margin "
            f"{s.margin_text()} (TOST). Failed calls: all failed agent tool "
            "calls, the arm's rate over the reference's (task-clustered interval).",
            "",
            results_table(shown, s.default_K, tight_k),
        ]
    )


def _dirname(model: str, arm: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", f"{model}__{arm}")


def card_text(
    name: str, rows: list[CardRow], context: list[CardRow], result: AnalysisResult, tight_k: int
) -> str:
    """A whole README.md: the YAML front matter (`model-index`: `rows`, this arm's) and the
    body (its table with the reference's rows of `context` beside this arm's)."""
    meta = {
        "tags": ["flatscore", "quantization", "tool-calling", "agent-evaluation"],
        "model-index": model_index(rows, name, result.settings.confidence),
    }
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{front}---\n\n{_body(name, rows, context, result, tight_k)}"


@dataclass(frozen=True)
class WrittenCard:
    model: str
    arm: str
    path: Path
    domains: int
    verdicts: dict[str, str]


def write_model_cards(
    result: AnalysisResult, out: Path, *, tight_k: int, name_template: str = "{model}-{arm}"
) -> list[WrittenCard]:
    """One card per (model, arm) under `out`, and `results.md` with every arm's rows."""
    result = worded(result)  # the settings' words (where the default K came from)
    rows = card_rows(result, tight_k)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create ({exc.strerror})", file=str(out)) from None
    written = []
    keys = list(dict.fromkeys((r.model, r.arm) for r in rows))
    for model, arm in keys:
        mine = [r for r in rows if (r.model, r.arm) == (model, arm)]
        try:
            name = name_template.format(model=model, arm=arm)
        except (KeyError, IndexError, ValueError) as exc:
            raise InputError(
                f"bad template {name_template!r} ({exc}); use {{model}} and {{arm}}",
                field="--name",
            ) from None
        folder = out / _dirname(model, arm)
        folder.mkdir(exist_ok=True)
        path = folder / CARD_FILE
        context = [r for r in rows if r.model == model]
        path.write_text(card_text(name, mine, context, result, tight_k), encoding="utf-8")
        written.append(
            WrittenCard(model, arm, path, len(mine), {r.domain: r.verdict for r in mine})
        )
    s = result.settings
    (out / RESULTS_FILE).write_text(results_table(rows, s.default_K, tight_k), encoding="utf-8")
    return written
