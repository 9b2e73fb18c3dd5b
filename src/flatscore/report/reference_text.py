"""Why an arm is its cell's reference, in words (docs/analysis.md, "Reference arm"): the
analysis records the reason (`analysis.precision.choose_reference`); analysis.json's
`reference_reason` is these words (`analysis_text.worded`)."""

from __future__ import annotations

from flatscore.analysis.precision import ReferenceWhy

WORDS: dict[ReferenceWhy, str] = {
    "named": "named with --reference",
    "only_arm": "the only arm",
    "unmarked": "the only arm whose name has no quantization format (the original checkpoint)",
    "reference_name": "the arm named as the reference",
    "highest": "highest precision present (format named in the arm)",
}
"""Each reason in words."""
