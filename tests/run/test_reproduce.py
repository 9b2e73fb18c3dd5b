"""flatscore.run.reproduce (`flatscore demo`): the slice is study v2's own file narrowed, and
the comparison and report step — on a small copy of the archive, never the committed data,
and "live" run files — names a planted change at its episode and turn and still writes the
report with the count on top. No model runs here."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from flatscore.errors import InputError
from flatscore.run.arm_backend import arm_backend
from flatscore.run.reproduce import (
    SLICE_ARMS,
    SLICE_KV_MEMORY_MB,
    V2_ADAPTER_SHA256,
    V2_ARCHIVE,
    V2_STUDY_FILE,
    check_adapter,
    make_banner,
    report_study,
    repository_root,
    slice_study,
    slice_task_ids,
)
from flatscore.run.study import load_study
from v2_archive import small_archive, v2_line

ROOT = Path(__file__).resolve().parents[2]
TASKS = [("retail", "status_00"), ("telecom", "refuel_05")]
ARMS = ("ref", "int4-awq")
PICKS = [(arm, d, t, trial) for arm in ARMS for d, t in TASKS for trial in (0, 1)]


def test_the_slice_is_study_v2s_file_narrowed(tmp_path: Path) -> None:
    study = slice_study(tmp_path / "d", repository_root())
    v2 = load_study(ROOT / V2_STUDY_FILE)
    assert repository_root() == ROOT
    for key in ("name", "seed", "max_steps", "error_budget", "user", "split", "domains"):
        assert getattr(study, key) == getattr(v2, key), key
    model, original = study.models[0], v2.models[0]
    assert (model.name, model.kind, model.sampling) == (
        original.name,
        original.kind,
        original.sampling,
    )
    assert list(model.arms) == list(SLICE_ARMS)
    assert all(model.arms[a] == original.arms[a] for a in SLICE_ARMS)
    assert model.compute == "fp32" and study.trials == 1
    ids = slice_task_ids()
    assert study.task_ids == ids and len(ids) == 9 + 6
    assert ids[:2] == ["cancel_00", "address_00"] and ids[9] == "airplane_05"
    with pytest.raises(InputError, match="base arm ref"):
        slice_study(tmp_path / "d", ROOT, arms=("ref-planted",))
    with pytest.raises(InputError, match="no arm int3"):
        slice_study(tmp_path / "d", ROOT, arms=("ref", "int3"))


def test_the_slices_engines_and_their_memory_floor(tmp_path: Path) -> None:
    """ref and ref-planted play the same weights: one engine (one backend spec) with both
    budgets; int4-awq has its own. Known answers (docs/benchmarks.md, "Memory"): the runtime
    (369 MiB), 513.25 MiB of fp32 parameters a copy and the KV budgets come to the floor that
    three engines at 256 MiB had, within a MiB; `engine_per_arm` gives every arm its own."""
    model = slice_study(tmp_path / "d", ROOT).models[0]
    specs = {arm: arm_backend(model, arm) for arm in SLICE_ARMS}
    assert specs["ref"] == specs["ref-planted"] != specs["int4-awq"]
    assert specs["ref"].kv_memory_mb == 2 * SLICE_KV_MEMORY_MB
    assert specs["int4-awq"].kv_memory_mb == SLICE_KV_MEMORY_MB
    runtime, weights = 369, 2_053 / 4  # benchmarks load-memory: 2,053 MiB for four copies
    copies = len({spec.model_dump_json() for spec in specs.values()})
    floor = runtime + copies * weights + len(SLICE_ARMS) * SLICE_KV_MEMORY_MB
    assert copies == 2 and round(floor) == 2_676
    assert abs(floor - (runtime + 3 * (weights + 256))) < 1
    apart = slice_study(tmp_path / "e", ROOT, engine_per_arm=True).models[0]
    assert arm_backend(apart, "ref") != arm_backend(apart, "ref-planted")
    assert arm_backend(apart, "ref").kv_memory_mb == SLICE_KV_MEMORY_MB


def test_the_shipped_adapter_is_checked_by_sha256(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLATSCORE_EMBEDDED_ADAPTER", raising=False)
    assert check_adapter() == V2_ADAPTER_SHA256
    monkeypatch.setenv("FLATSCORE_EMBEDDED_ADAPTER", "none")
    with pytest.raises(InputError, match="--no-verify"):
        check_adapter()


def _live_runs(folder: Path) -> Path:
    """The picks' first trial as "live" run files (the archived lines, as a machine that
    reproduces them writes them)."""
    folder.mkdir(parents=True)
    for arm in ARMS:
        lines = [v2_line(arm, d, t, 0) for d, t in TASKS]
        (folder / f"smollm2-135m__{arm}.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    return folder


def test_a_planted_token_is_the_first_divergence_and_the_report_is_written(
    tmp_path: Path,
) -> None:
    target = PICKS.index(("int4-awq", "telecom", "refuel_05", 0))
    data = json.loads(v2_line(*PICKS[target]))
    turn = next(i for i, m in enumerate(data["messages"]) if m["role"] == "assistant" and i > 0)
    message = data["messages"][turn]
    if message["content"]:
        message["content"] = "Sorry" + message["content"][5:]
    else:
        message["tool_calls"][0]["name"] += "s"
    archive = small_archive(tmp_path / "archive", PICKS, edit={target: json.dumps(data)})
    study = slice_study(tmp_path / "out", ROOT)
    text = io.StringIO()
    result = report_study(
        archive,
        tmp_path / "out",
        study,
        live_runs=_live_runs(tmp_path / "runs"),
        console=Console(file=text, width=200),
    )
    rep = result.reproduction
    assert rep is not None and (rep.checked, rep.identical) == (4, 3)
    div = rep.first_divergence
    assert div is not None
    assert (div.episode_id, div.turn) == (data["episode_id"], turn)
    assert (div.arm, div.domain, div.task_id, div.trial) == ("int4-awq", "telecom", "refuel_05", 0)
    html = result.report.html.read_text("utf-8")
    assert "3 of 4 episodes reproduced exactly on this machine" in html
    assert data["episode_id"] in html and f"turn {turn}" in html
    summary = result.report.summary.read_text("utf-8")
    assert summary.startswith("**3 of 4 episodes reproduced exactly on this machine**")
    printed = text.getvalue()
    assert f"turn {turn}" in printed and "report: " in printed
    assert printed.count("3 of 4 episodes reproduced exactly") == 1  # once, on top of the verdicts
    saved = json.loads((tmp_path / "out" / "reproduction.json").read_text("utf-8"))
    assert saved["first_divergence"]["turn"] == turn
    # the report is the archive's study: both trials, the archived (planted) episode kept
    assert result.analysis.episodes_read == len(PICKS)


def test_no_verify_says_nothing_was_compared() -> None:
    banner = make_banner(None, [], 3192)
    assert banner.exact is None and banner.details == []
    assert banner.headline == "not compared on this machine (--no-verify)"
    assert "3,192 archived episodes" in banner.about and "No episode was run" in banner.about


@pytest.mark.slow
@pytest.mark.timeout(1800)  # one short episode: about a minute idle, many on a loaded machine
def test_one_archived_episode_replays_exactly_on_this_machine(tmp_path: Path) -> None:
    """The real thing, one episode: study v2's reference on retail's shortest template,
    played live by the embedded model with the demo's engine settings, equals the archived
    episode message for message."""
    pytest.importorskip("torch")
    from flatscore.report.reproduction import reproduction_headline
    from flatscore.run.driver import run_study
    from flatscore.run.reproduce import live_episodes
    from flatscore.store.compare import reproduce

    study = slice_study(tmp_path / "d", ROOT, arms=("ref",), task_ids=["status_00"])
    run_study(study, report=False, progress=False)
    result = reproduce(live_episodes(study.output_dir / "runs"), ROOT / V2_ARCHIVE)
    assert reproduction_headline(result) == "1 of 1 episodes reproduced exactly on this machine"
