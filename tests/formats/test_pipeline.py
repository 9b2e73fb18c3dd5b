"""`flatscore.formats.pipeline`: the one way from files to an analysis. Every command that
analyses runs goes through `analyze_labelled` (by `analyze_runs`; the gate by
`gate_labelled`; the demo's archive directly), so they refuse the same inputs with the same
line."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from analysis_builders import episode
from cli_runner import CliResult
from flatscore.analysis.settings import AnalysisSettings
from flatscore.errors import InputError
from flatscore.formats import pipeline
from flatscore.formats.pipeline import analyze_runs, labelled_runs
from flatscore.store.jsonl import EpisodeWriter

FAST = ("--bootstrap", "200", "--budgets", "0-3")


def _write(path: Path, arm: str, model: str = "m", tasks: int = 8) -> Path:
    with EpisodeWriter(path) as w:
        for t in range(tasks):
            calls = [("get_user", "ok"), ("foo", "fail" if t % 2 else "ok")]
            w.write(episode(arm, f"t{t}", calls=calls, success=t % 3 > 0, model=model))
    return path


@pytest.fixture
def two_arms(tmp_path: Path) -> tuple[Path, Path]:
    return _write(tmp_path / "ref.jsonl", "bf16"), _write(tmp_path / "arm.jsonl", "int4")


@pytest.fixture
def two_models(tmp_path: Path) -> list[Path]:
    """Two models with one arm each: nothing to compare."""
    return [_write(tmp_path / f"{m}.jsonl", m, model=m) for m in ("model-a", "model-b")]


def test_a_run_read_twice_is_refused_naming_both_files_and_dropped_with_dedupe(
    two_arms: tuple[Path, Path],
) -> None:
    ref, arm = two_arms
    with pytest.raises(InputError, match="duplicate episode") as refused:
        analyze_runs([ref, arm, ref], AnalysisSettings(bootstrap=200))
    assert str(ref) in str(refused.value)
    analysed = analyze_runs([ref, arm, ref], AnalysisSettings(bootstrap=200, dedupe=True))
    assert analysed.dropped == analysed.result.notices[:1]  # what reading left out, first
    assert (analysed.dropped[0].kind, analysed.dropped[0].count) == ("duplicates_left_out", 8)
    assert len(analysed.episodes) == 16
    assert [a.arm for a in analysed.result.cells[0].arms] == ["bf16", "int4"]


def test_a_run_folder_is_its_jsonl_runs_and_trials_pick_the_episodes_shown(
    two_arms: tuple[Path, Path], tmp_path: Path
) -> None:
    assert len(list(labelled_runs([tmp_path]))) == 16
    with EpisodeWriter(tmp_path / "later.jsonl") as w:
        for arm in ("bf16", "int4"):
            w.write(episode(arm, "t0", trial=1))
    analysed = analyze_runs([tmp_path], AnalysisSettings(bootstrap=200, trials=[1]))
    assert len(analysed.episodes) == 16 and {ep.trial for ep in analysed.episodes} == {0}
    with pytest.raises(InputError, match="file not found"):
        list(labelled_runs([tmp_path / "missing.jsonl"]))


def test_models_of_one_arm_each_are_refused_alike_by_every_command(
    two_models: list[Path], tmp_path: Path, flatscore: Callable[..., CliResult]
) -> None:
    """`export model-card` used to analyse them and write one "reference" card per model."""
    runs = [str(p) for p in two_models]
    results = {
        "analyze": flatscore("analyze", *runs, *FAST),
        "report": flatscore("report", *runs, "--out", tmp_path / "report", *FAST),
        "export model-card": flatscore(
            "export", "model-card", *runs, "--out", tmp_path / "cards", "--bootstrap", "200"
        ),
    }
    lines = set()
    for name, r in results.items():
        assert r.returncode == 2, (name, r.stdout, r.stderr)
        assert r.stdout == "", (name, r.stdout)
        lines.add(r.stderr.strip())
    assert len(lines) == 1, lines
    (line,) = lines
    assert line.startswith("error: 2 models (model-a, model-b) with one arm each")
    assert "\n" not in line
    assert not (tmp_path / "report").exists() and not (tmp_path / "cards").exists()


def test_the_gate_refuses_a_run_read_twice_as_analyze_does(
    two_arms: tuple[Path, Path], tmp_path: Path, flatscore: Callable[..., CliResult]
) -> None:
    """The reference's folder holds its run twice: counted twice before the gate went
    through the pipeline; now refused naming both files, and kept once with --dedupe."""
    ref, arm = two_arms
    refs = tmp_path / "refs"
    refs.mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        (refs / name).write_bytes(ref.read_bytes())
    refused = flatscore("gate", refs, arm, "--bootstrap", "200")
    analysed = flatscore("analyze", refs, arm, *FAST)
    assert refused.returncode == analysed.returncode == 2, refused.stderr
    line = refused.stderr.strip()
    assert line.startswith("error: duplicate episode") and "\n" not in line
    assert str(refs / "a.jsonl") in line and str(refs / "b.jsonl") in line
    assert line == analysed.stderr.strip()
    kept = flatscore("gate", refs, arm, "--bootstrap", "200", "--dedupe", "--json", "-")
    assert kept.returncode in (0, 3, 4), kept.stderr
    assert "--dedupe: 8 duplicate episode(s) left out" in kept.stdout


@pytest.fixture
def spied(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the pipeline's two inner steps (`labelled_runs`: reading; `analyze_labelled`:
    analysing), which every command goes through, calling the real ones."""
    calls = {"read": 0, "analyze": 0}
    read, analyse = pipeline.labelled_runs, pipeline.analyze_labelled

    def reading(*args: Any, **kwargs: Any) -> Iterator[Any]:
        calls["read"] += 1
        return read(*args, **kwargs)

    def analysing(*args: Any, **kwargs: Any) -> Any:
        calls["analyze"] += 1
        return analyse(*args, **kwargs)

    monkeypatch.setattr(pipeline, "labelled_runs", reading)
    monkeypatch.setattr(pipeline, "analyze_labelled", analysing)
    return calls


@pytest.mark.parametrize(
    ("command", "analyses"),
    [
        (("analyze", "{ref}", "{arm}", *FAST), 1),
        (("report", "{ref}", "{arm}", "--out", "{out}", *FAST), 1),
        (("export", "model-card", "{ref}", "{arm}", "--out", "{out}", "--bootstrap", "200"), 1),
        (("gate", "{ref}", "{arm}", "--bootstrap", "200"), 1),
    ],
    ids=["analyze", "report", "export model-card", "gate"],
)
def test_each_command_reads_and_analyses_through_the_pipeline(
    command: tuple[str, ...],
    analyses: int,
    two_arms: tuple[Path, Path],
    tmp_path: Path,
    spied: dict[str, int],
    flatscore: Callable[..., CliResult],
) -> None:
    ref, arm = two_arms
    args = [a.format(ref=ref, arm=arm, out=tmp_path / "out") for a in command]
    r = flatscore(*args)
    assert r.returncode in (0, 3, 4), r.stderr
    assert spied == {"read": 2 if command[0] == "gate" else 1, "analyze": analyses}


def test_the_demo_analyses_its_archive_through_the_pipeline(
    tmp_path: Path, spied: dict[str, int]
) -> None:
    """`flatscore demo`'s report step (`report_study`): the archive's episodes, no live runs."""
    from rich.console import Console

    from flatscore.run.reproduce import report_study, slice_study
    from v2_archive import small_archive

    picks = [(arm, "retail", "status_00", trial) for arm in ("ref", "int4-awq") for trial in (0, 1)]
    archive = small_archive(tmp_path / "archive", picks)
    study = slice_study(tmp_path / "out", Path(__file__).resolve().parents[2])
    result = report_study(archive, tmp_path / "out", study, live_runs=None, console=Console())
    assert spied == {"read": 0, "analyze": 1}
    assert result.analysis.episodes_read == len(picks)
