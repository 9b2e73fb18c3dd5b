"""`flatscore import tau2` and `flatscore export parquet` through the real CLI, in a subprocess."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cli_runner import flatscore
from flatscore.formats.tau2_import import CRASH_REASONS
from flatscore.store.jsonl import read_episodes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tau2"
SINGLE_FILES = sorted((FIXTURES / "v1.0").glob("*.json")) + sorted(
    (FIXTURES / "v0.2").glob("*.json")
)


def simulations(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["simulations"]


@pytest.mark.parametrize("path", SINGLE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_import_writes_one_episode_per_simulation(tmp_path: Path, path: Path) -> None:
    out = tmp_path / "runs" / "bf16.jsonl"
    res = flatscore("import", "tau2", path, "--arm", "bf16", "--out", out)
    assert res.returncode == 0, res.stderr
    sims = simulations(path)
    episodes = list(read_episodes(out))
    assert [e.termination_reason.value for e in episodes] == [s["termination_reason"] for s in sims]
    assert [e.reward for e in episodes] == [
        s["reward_info"]["reward"] if s["reward_info"] else None for s in sims
    ]
    assert all(e.arm == "bf16" for e in episodes)
    for reason in {s["termination_reason"] for s in sims}:
        assert reason in res.stdout
    assert "tool lists from bundled" in res.stdout
    for reason in CRASH_REASONS:  # τ²'s crashes, each warned about on stderr
        n = sum(s["termination_reason"] == reason for s in sims)
        warned = f"warning: {n} of {len(sims)} episodes ended in {reason}: τ² itself crashed"
        assert (warned in res.stderr) == (n > 0), res.stderr


def test_import_directory_and_reimport_is_idempotent(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    first = flatscore("import", "tau2", FIXTURES / "v1.0-dir", "--arm", "a", "--out", out)
    assert first.returncode == 0, first.stderr
    assert "tau2-v1-dir" in first.stdout
    again = flatscore("import", "tau2", FIXTURES / "v1.0-dir", "--arm", "a", "--out", out)
    assert again.returncode == 0
    assert "2 episodes were already in" in again.stdout
    assert len(list(read_episodes(out))) == 2


def test_model_and_study_options(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    res = flatscore(
        "import", "tau2", FIXTURES / "v1.0" / "ok.json",
        "--arm", "int4", "--model", "Qwen3", "--study", "s1", "--out", out,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert {(e.study, e.arm, e.model) for e in read_episodes(out)} == {("s1", "int4", "Qwen3")}


def _damage(kind: str, path: Path) -> None:
    if kind == "truncated":
        raw = path.read_bytes()
        path.write_bytes(raw[: len(raw) * 3 // 4])
        return
    data = json.loads(path.read_text(encoding="utf-8"))
    sim = data["simulations"][1]
    if kind == "wrong_type":
        sim["reward_info"]["reward"] = "high"
    elif kind == "missing_field":
        del sim["messages"][3]["id"]
    elif kind == "unknown_reason":
        sim["termination_reason"] = "gave_up"
    path.write_text(json.dumps(data), encoding="utf-8")


DAMAGE_FIELDS = {
    "truncated": None,
    "wrong_type": "reward_info.reward",
    "missing_field": "messages[3].id",
    "unknown_reason": "termination_reason",
}


@pytest.mark.parametrize("kind", DAMAGE_FIELDS)
def test_damaged_file_gives_one_clear_line_and_exit_2(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "ok.json"
    shutil.copy(FIXTURES / "v1.0" / "ok.json", path)
    _damage(kind, path)
    sim_id = simulations(FIXTURES / "v1.0" / "ok.json")[1]["id"]

    res = flatscore("import", "tau2", path, "--arm", "a", "--out", tmp_path / "run.jsonl")
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr
    assert str(path) in lines[0] and f"#1 (id {sim_id})" in lines[0]
    if DAMAGE_FIELDS[kind]:
        assert f"field '{DAMAGE_FIELDS[kind]}'" in lines[0]

    skip = flatscore(
        "import", "tau2", path, "--arm", "a", "--out", tmp_path / "kept.jsonl", "--skip-invalid"
    )
    assert skip.returncode == 0, skip.stderr
    assert "skipped 1 invalid simulations" in skip.stderr
    assert lines[0].removeprefix("error: ") in skip.stderr
    assert len(list(read_episodes(tmp_path / "kept.jsonl"))) == 1


def test_tau_bench_v1_and_missing_file_are_one_line_errors(tmp_path: Path) -> None:
    taubench = tmp_path / "taubench.json"
    taubench.write_text(json.dumps([{"task_id": 0, "reward": 1.0, "traj": []}]))
    for path in (taubench, tmp_path / "nope.json"):
        res = flatscore("import", "tau2", path, "--arm", "a", "--out", tmp_path / "r.jsonl")
        assert res.returncode == 2
        assert "Traceback" not in res.stderr
        assert len([x for x in res.stderr.splitlines() if x.strip()]) == 1


def test_export_parquet_row_counts(tmp_path: Path) -> None:
    run = tmp_path / "run.jsonl"
    telecom = FIXTURES / "v0.2" / "telecom.json"
    assert flatscore("import", "tau2", telecom, "--arm", "a", "--out", run).returncode == 0
    res = flatscore(
        "export", "parquet", run, FIXTURES / "v1.0" / "ok.json", "--out", tmp_path / "pq"
    )
    assert res.returncode == 0, res.stderr
    sims = simulations(telecom) + simulations(FIXTURES / "v1.0" / "ok.json")
    n_calls = sum(len(m.get("tool_calls") or []) for s in sims for m in s["messages"])
    assert pq.read_table(tmp_path / "pq" / "episodes.parquet").num_rows == len(sims)
    assert pq.read_table(tmp_path / "pq" / "tool_calls.parquet").num_rows == n_calls
    assert f"{n_calls} tool calls" in res.stdout
