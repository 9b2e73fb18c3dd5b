from __future__ import annotations

import json
from pathlib import Path

from analysis_builders import episode
from flatscore.analysis.analyze import AnalysisOptions, analyze
from flatscore.analysis.result import AnalysisResult
from flatscore.analysis.schema import schema_text

DOC = Path(__file__).parents[2] / "docs" / "analysis.schema.json"


def test_committed_schema_is_up_to_date() -> None:
    assert DOC.read_text(encoding="utf-8") == schema_text(), (
        "regenerate: python -m tools.regenerate schema"
    )


def test_fixed_names_are_in_the_schema() -> None:
    defs = json.loads(schema_text())["$defs"]
    assert {"model", "domain", "reference", "arms", "comparisons"} <= defs["Cell"][
        "properties"
    ].keys()
    assert {"arm", "episodes", "success_rate", "pass_k", "agent_tool_calls", "channels",
            "budget_curve", "recovery_rate"} <= defs["ArmStats"]["properties"].keys()  # fmt: skip
    fixed = {"arm", "reference", "gap", "channel_amplification", "spearman_rho", "novel_fraction",
             "p_value", "p_holm", "tost_equivalent"}  # fmt: skip
    assert fixed <= defs["Comparison"]["properties"].keys()


def test_output_round_trips() -> None:
    eps = [
        episode(a, f"t{t}", 0, [("foo", "fail"), ("get_user", "ok")])
        for a in ("bf16", "int4")
        for t in range(5)
    ]
    result = analyze(eps, AnalysisOptions(bootstrap=100))
    text = result.model_dump_json(indent=2)
    assert AnalysisResult.model_validate_json(text).model_dump_json(indent=2) == text
