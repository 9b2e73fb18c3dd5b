"""Every study file under examples/ loads: an example that no longer parses is a broken doc."""

from pathlib import Path

import pytest

from flatscore.run.study import load_study

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.yaml"))


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_study_loads(path: Path) -> None:
    study = load_study(path)
    assert study.name
    assert study.models and all(model.arms for model in study.models)


def test_study_v2_has_both_controls() -> None:
    study = load_study(EXAMPLES[0].parent / "embedded-study-v2.yaml")
    arms = {name: arm for model in study.models for name, arm in model.arms.items()}
    assert arms["ref-control"].control_of == "ref"
    assert arms["ref-planted"].inject is not None and arms["ref-planted"].inject.base == "ref"
    assert study.trials == 4 and study.split == "test"


def test_study_v3_is_sequential_with_both_controls() -> None:
    study = load_study(EXAMPLES[0].parent / "embedded-study-v3.yaml")
    (model,) = study.models
    assert set(model.arms) == {
        "ref",
        "int8",
        "fp8-w8a8",
        "int4",
        "int4-awq",
        "ref-planted",
        "ref-control",
    }
    assert model.arms["ref-control"].control_of == "ref"
    planted = model.arms["ref-planted"].inject
    assert planted is not None and planted.base == "ref"
    assert study.stopping == "sequential" and study.trials == 2 and study.split == "test"
    assert (
        model.adapter is not None and (Path(model.adapter) / "adapter_model.safetensors").is_file()
    )
