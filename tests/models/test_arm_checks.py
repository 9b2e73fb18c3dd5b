"""In-process arms may name an llm-compressor recipe (`quant: llmc-...`) beside flatscore's
own formats; a study arm then gets a backend whose `quant` is the recipe."""

from __future__ import annotations

from pathlib import Path

import yaml

from flatscore.run.arm_backend import arm_backend
from flatscore.run.study import load_study
from run_files import study_refusal


def _study(tmp_path: Path, arms: object) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({"models": [{"name": "s", "kind": "embedded", "arms": arms}]}))
    return path


def test_a_recipe_is_an_arm_of_an_in_process_model(tmp_path: Path) -> None:
    study = load_study(
        _study(tmp_path, {"ref": {}, "llmc-w8a8-fp8": {}, "awq": {"quant": "llmc-w4a16-awq"}})
    )
    (model,) = study.models
    specs = {arm: arm_backend(model, arm) for arm in model.arms}
    assert {arm: s.quant for arm, s in specs.items() if s} == {
        "ref": "ref",
        "llmc-w8a8-fp8": "llmc-w8a8-fp8",
        "awq": "llmc-w4a16-awq",
    }


def test_an_unknown_recipe_lists_the_recipes_beside_the_formats(tmp_path: Path) -> None:
    err = study_refusal(_study(tmp_path, {"llmc-w3a3": {}}))
    assert err.field == "models.0.arms.llmc-w3a3.(name)"
    assert "unknown precision format 'llmc-w3a3'" in err.message
    assert "int4-awq" in err.message and "llmc-w4a16-awq" in err.message
