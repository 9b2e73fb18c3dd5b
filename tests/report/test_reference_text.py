"""Why an arm is its cell's reference, in words (`report.reference_text`): `analyze` records
the reason, `worded` says it in `reference_reason`."""

from __future__ import annotations

import pytest

from analysis_builders import episode
from flatscore.analysis.analyze import analyze
from flatscore.analysis.settings import AnalysisSettings
from flatscore.report.analysis_text import worded


@pytest.mark.parametrize(
    ("arms", "named", "why", "words"),
    [
        (("bf16", "int4"), None, "highest", "highest precision present (format named in the arm)"),
        (("bf16", "int4"), "int4", "named", "named with --reference"),
        (("ref", "slips"), None, "reference_name", "the arm named as the reference"),
        (
            ("Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct-AWQ"),
            None,
            "unmarked",
            "the only arm whose name has no quantization format (the original checkpoint)",
        ),
        (("bf16",), None, "only_arm", "the only arm"),
    ],
)
def test_the_reason_in_words(
    arms: tuple[str, ...], named: str | None, why: str, words: str
) -> None:
    eps = [episode(arm, f"t{t}", 0) for arm in arms for t in range(3)]
    analysis = analyze(eps, AnalysisSettings(bootstrap=100, reference=named))
    (cell,) = analysis.cells
    assert (cell.reference_why, cell.reference_reason) == (why, "")
    (said,) = worded(analysis).cells
    assert said.reference_reason == words
    assert "reference_why" not in said.model_dump()
