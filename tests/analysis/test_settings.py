"""The one analysis settings model: units converted at the boundary (points ↔ fractions,
budget text), rules loaded from a path, defaults from `flatscore.defaults`, and one error line
naming the field (a study file's key or a CLI flag)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from flatscore import defaults
from flatscore.analysis.channels import BUILTIN_RULES
from flatscore.analysis.settings import POINTS, AnalysisSettings
from flatscore.errors import InputError
from flatscore.run.study import load_study
from flatscore.study import study_from_json, study_json
from run_files import study_refusal


def _study(tmp_path: Path, analysis: dict[str, object]) -> Path:
    path = tmp_path / "study.yaml"
    data = {
        "models": [{"name": "o", "kind": "agent", "agent": "oracle", "arms": ["ref"]}],
        "analysis": analysis,
    }
    path.write_text(yaml.safe_dump(data), "utf-8")
    return path


def test_defaults_come_from_the_defaults_module() -> None:
    s = AnalysisSettings()
    assert (s.tost_margin, s.bootstrap, s.seed, s.correction, s.count) == (
        defaults.TOST_MARGIN,
        defaults.BOOTSTRAP,
        defaults.ANALYSIS_SEED,
        defaults.CORRECTION,
        defaults.COUNT,
    )
    assert s.bootstrap_min_tasks == defaults.BOOTSTRAP_MIN_TASKS and s.rules is None


def test_study_file_units_are_converted(tmp_path: Path) -> None:
    """Known answer: 7.5 points → 0.075, `0-3,9` → [0, 1, 2, 3, 9], a relative rules path
    → the file next to the study, loaded."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        resources.files("flatscore.analysis").joinpath("channel_rules.yaml").read_text("utf-8")
    )
    study = load_study(
        _study(tmp_path, {"tost_margin": 5, "budgets": "0-3,9", "channel_rules": "rules.yaml"})
    )
    a = study.analysis
    assert a.tost_margin == 0.05 and a.budgets == [0, 1, 2, 3, 9]
    assert a.rules is not None and a.rules.source == str(rules)


def test_study_json_reads_back_as_the_same_study(tmp_path: Path) -> None:
    """study.json is written in the study file's units: read back (as JSON or as a study
    file) it is the same study, not a margin 100× smaller."""
    study = load_study(_study(tmp_path, {"tost_margin": 7.5, "channel_rules": BUILTIN_RULES}))
    text = study_json(study)
    dumped = yaml.safe_load(text)["analysis"]
    assert dumped["tost_margin"] == 7.5 and dumped["channel_rules"] == BUILTIN_RULES
    again = study_from_json(text)
    assert again.analysis.tost_margin == study.analysis.tost_margin == 0.075
    (tmp_path / "again").mkdir()
    reread = tmp_path / "again" / "study.json"
    reread.write_text(text, "utf-8")
    assert load_study(reread).analysis.tost_margin == 0.075


@given(st.floats(min_value=0.01, max_value=99.99, allow_nan=False))
def test_points_round_trip(points: float) -> None:
    s = AnalysisSettings.model_validate({"tost_margin": points}, context=POINTS)
    assert s.tost_margin == pytest.approx(points / 100)
    assert s.model_dump(context=POINTS)["tost_margin"] == pytest.approx(points)
    assert s.model_dump()["tost_margin"] == s.tost_margin  # analysis.json: a fraction


@pytest.mark.parametrize(
    ("analysis", "field", "words"),
    [
        ({"tost_margin": 150}, "analysis.tost_margin", "(0, 100) points"),
        ({"budgets": "3-1"}, "analysis.budgets", "end before start"),
        ({"budgets": [0, -1]}, "analysis.budgets", "between 0 and"),
        ({"correction": "bonferroni"}, "analysis.correction", "holm"),
        ({"channel_rules": "missing.yaml"}, "analysis.channel_rules", "not found"),
        ({"bootstraps": 10}, "analysis.bootstraps", "unknown field"),
    ],
)
def test_bad_study_analysis_is_one_line(
    tmp_path: Path, analysis: dict[str, object], field: str, words: str
) -> None:
    err = study_refusal(_study(tmp_path, analysis))
    assert err.field == field and words in err.message


@pytest.mark.parametrize(
    ("flags", "setting"),
    [
        ({"tost_margin": 0}, "tost_margin"),
        ({"count": "some"}, "count"),
        ({"trials": "2-1"}, "trials"),
        ({"channel_rules": Path("/nonexistent/rules.yaml")}, "channel_rules"),
    ],
)
def test_flags_name_the_setting(flags: dict[str, object], setting: str) -> None:
    """The analysis names a bad value's setting by field; the command line says its flag
    (`tests/cli/test_options.py`)."""
    with pytest.raises(InputError) as info:
        AnalysisSettings.from_flags(**flags)
    assert info.value.field == setting


def test_flags_and_study_file_give_one_model(tmp_path: Path) -> None:
    """The same choices made on the command line and in a study file are equal settings."""
    flags = AnalysisSettings.from_flags(tost_margin=5.0, budgets="0-2", seed=3, reference=None)
    study = load_study(_study(tmp_path, {"tost_margin": 5.0, "budgets": "0-2", "seed": 3}))
    assert flags == study.analysis
