"""Errors that name what the user did: a flatscore run given to `import tau2` is called
flatscore's own format, an empty folder names both kinds of runs looked for, a trial range
written backwards says "end before start", and a reference the user never named is not
blamed on `--reference`."""

from __future__ import annotations

from pathlib import Path

from analysis_builders import episode
from cli_runner import flatscore
from flatscore.store.jsonl import EpisodeWriter


def _run(path: Path, arms: tuple[str, ...] = ("ref",)) -> Path:
    with EpisodeWriter(path) as writer:
        for arm in arms:
            for t in range(3):
                writer.write(episode(arm, f"t{t}", 0, [("get_user", "ok")], success=True))
    return path


def _one_line(done) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    return lines[0]


def test_import_tau2_on_a_flatscore_run_says_it_is_flatscores_format(tmp_path: Path) -> None:
    run = _run(tmp_path / "ref.jsonl")
    line = _one_line(flatscore("import", "tau2", run, "--arm", "x", "--out", tmp_path / "o.jsonl"))
    assert "already flatscore's run format" in line and str(run) in line
    assert not (tmp_path / "o.jsonl").exists()


def test_an_empty_folder_names_both_kinds_of_runs(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    line = _one_line(flatscore("analyze", tmp_path / "empty"))
    assert "*.jsonl" in line and "results.json" in line


def test_a_backwards_trial_range_says_end_before_start(tmp_path: Path) -> None:
    run = _run(tmp_path / "ref.jsonl")
    line = _one_line(flatscore("analyze", run, "--trial-range", "9-1"))
    assert "end before start" in line and "--trial-range" in line


def test_an_undecidable_reference_does_not_blame_an_option_not_given(tmp_path: Path) -> None:
    run = _run(tmp_path / "both.jsonl", ("ref", "ref-planted"))
    line = _one_line(flatscore("analyze", run))
    assert "cannot tell the reference" in line and "field '--reference'" not in line
    assert "name it with --reference" in line


def test_a_planted_arm_is_never_the_reference(tmp_path: Path) -> None:
    """Study v3's committed runs: `ref` and `ref-planted` name the same precision, and the
    planted arm's episodes say its damage was planted on `ref` (`metadata.injected`)."""
    path = tmp_path / "v3like.jsonl"
    with EpisodeWriter(path) as writer:
        for arm in ("ref", "ref-planted"):
            for t in range(3):
                ep = episode(arm, f"t{t}", 0, [("get_user", "ok")], success=True)
                if arm == "ref-planted":
                    ep.metadata["injected"] = {"base": "ref", "role_confusion": 0.05}
                writer.write(ep)
    done = flatscore("analyze", path, "--json", "-", "--bootstrap", "200")
    assert done.returncode == 0, done.stderr
    assert '"reference": "ref"' in done.stdout.split('"cells"')[1]
