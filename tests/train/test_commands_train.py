"""The training CLI through the real `main()`: bad input is one line and exit code 2."""

from __future__ import annotations

from pathlib import Path

from cli_runner import flatscore
from flatscore.train.recipe import TrainConfig


def test_train_refuses_an_existing_run_without_resume(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(TrainConfig().model_dump_json())
    proc = flatscore("train-embedded", "--out", tmp_path, "--no-progress")
    assert proc.returncode == 2, proc.stderr
    assert "pass --resume" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_train_refuses_a_different_recipe(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(TrainConfig(steps=7).model_dump_json())
    proc = flatscore("train-embedded", "--out", tmp_path, "--resume", "--no-progress")
    assert proc.returncode == 2 and "steps differ" in proc.stderr, proc.stderr


def test_card_needs_a_training_directory(tmp_path: Path) -> None:
    proc = flatscore("embedded-card", "--train", tmp_path / "nope")
    assert proc.returncode == 2 and "not a training directory" in proc.stderr, proc.stderr


def test_an_on_policy_recipe_without_its_source_adapter_is_one_line(tmp_path: Path) -> None:
    recipe = tmp_path / "r.json"
    recipe.write_text('{"on_policy": {"source_adapter_sha256": "ab"}}')
    proc = flatscore("train-embedded", "--recipe", recipe, "--out", tmp_path / "o", "--no-progress")
    assert proc.returncode == 2 and "--source" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_embedded_round_without_runs_is_one_line(tmp_path: Path) -> None:
    proc = flatscore("embedded-round", tmp_path)
    assert proc.returncode == 2 and "no run archive" in proc.stderr, proc.stderr


def test_embedded_rounds_old_arm_spelling_is_the_reference_with_a_warning(tmp_path: Path) -> None:
    old = flatscore("embedded-round", tmp_path, "--arm", "ref")
    new = flatscore("embedded-round", tmp_path, "--reference", "ref")
    assert old.returncode == new.returncode == 2 and "no run archive" in old.stderr
    assert "--arm is now --reference" in old.stderr and "--arm" not in new.stderr
