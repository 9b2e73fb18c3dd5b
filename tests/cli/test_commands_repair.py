"""`flatscore repair-effect` on real runs: a table, a JSON file, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from flatscore.cli import app
from flatscore.run.quick import QuickRun, run_quick
from flatscore.study import Study


def test_repair_effect_command(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    for arm in ("bf16", "int4"):
        for repair in (False, True):
            quick = QuickRun.parse(
                domains=["retail"], arm=arm, repair=repair, task_ids=["cancel_00", "return_00"]
            )
            run_quick(quick, path, resume=True, progress=False)
    out = tmp_path / "repair.json"
    result = CliRunner().invoke(
        app, ["repair-effect", str(path), "--json", str(out), "--bootstrap", "200"]
    )
    assert result.exit_code == 0, result.output
    assert "| oracle | retail | int4 |" in result.output
    data = json.loads(out.read_text())
    [cell] = data["cells"]
    assert [a["arm"] for a in cell["arms"]] == ["bf16", "int4"]
    assert all(a["effect"]["value"] == 0 for a in cell["arms"])  # the oracle never fails


def test_repair_effect_command_errors(tmp_path: Path) -> None:
    missing = CliRunner().invoke(app, ["repair-effect", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code != 0
    path = tmp_path / "plain.jsonl"
    quick = QuickRun.parse(domains=["retail"], arm="bf16", task_ids=["cancel_00"])
    run_quick(quick, path, progress=False)
    result = CliRunner().invoke(app, ["repair-effect", str(path)])
    assert result.exit_code != 0
    assert isinstance(result.exception, Exception)
    assert "no arm was run both with and without repair" in str(result.exception)


def test_balanced_pairs_a_repair_pass_with_the_same_trial_of_the_main_study(
    tmp_path: Path,
) -> None:
    """A main study of 2 trials (oracle: ref, slips; noop) and a repair pass of trial 0 on
    the oracle's arms: with --balanced the effect uses the main study's trial 0 only (3
    tasks per domain, one episode each), noop (never repaired) stays out, and --out writes
    the JSON, the table and the study tables."""
    import yaml

    from flatscore.analysis.repair_effect import RepairEffectResult
    from flatscore.report.tables import repair_tables
    from flatscore.run.driver import run_study

    examples = Path(__file__).resolve().parents[2] / "examples"
    data = yaml.safe_load((examples / "smoke.yaml").read_text("utf-8"))
    data.update({"output": str(tmp_path / "main"), "tasks_per_domain": 3, "trials": 2})
    run_study(load_study_data(tmp_path / "main.yaml", data), progress=False, report=False)
    data.update(
        {
            "name": "smoke-repair",
            "output": str(tmp_path / "repair"),
            "trials": 1,
            "models": [m for m in data["models"] if m["name"] == "oracle"],
            "repair": {"mode": "on", "channels": ["unknown_tool", "bad_arguments"]},
        }
    )
    run_study(load_study_data(tmp_path / "repair.yaml", data), progress=False, report=False)
    runs = [str(tmp_path / "main" / "runs"), str(tmp_path / "repair" / "runs")]
    args = ["repair-effect", *runs, "--reference", "ref", "--bootstrap", "200"]

    whole = CliRunner().invoke(app, [*args, "--json", str(tmp_path / "all.json")])
    assert whole.exit_code == 0, whole.output
    out = tmp_path / "effect"
    paired = CliRunner().invoke(app, [*args, "--balanced", "--out", str(out)])
    assert paired.exit_code == 0, paired.output
    assert "24 episodes paired (--balanced)" in paired.output
    for path, without in ((tmp_path / "all.json", 6), (out / "repair-effect.json", 3)):
        result = RepairEffectResult.model_validate_json(path.read_text("utf-8"))
        (cell,) = [c for c in result.cells if c.domain == "retail"]
        assert {a.arm: (a.episodes_without, a.episodes_with) for a in cell.arms} == {
            "ref": (without, 3),
            "slips": (without, 3),
        }
    assert (out / "tables.md").read_text("utf-8") == "\n".join(repair_tables(result)) + "\n"
    assert "| slips |" in (out / "repair-effect.md").read_text("utf-8")


def load_study_data(path: Path, data: dict[str, object]) -> Study:
    """`data` written as a study file at `path`, loaded."""
    import yaml

    from flatscore.run.study import load_study

    path.write_text(yaml.safe_dump(data), "utf-8")
    return load_study(path)
