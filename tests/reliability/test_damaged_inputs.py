"""The fuzz suite: ≥ 300 seeded damaged τ² and run files through `flatscore import tau2` and
`flatscore analyze`, in one child process capped at 1 GB of address space (RLIMIT_AS).

Every command must end with exit 0 and exactly the expected data, or exit 2 and one line
naming the file — never a traceback, never a hang (30 s per command), and a failed import
leaves its output byte for byte as it was. See docs/reliability.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from damage import Case, generate

from flatscore.formats.tau2 import read_tau2
from flatscore.store.jsonl import read_episodes

HERE = Path(__file__).parent
MEMORY_CAP = 1 << 30
TIMEOUT_S = 30.0
SEED = 14
BOOTSTRAP = "100"
EXISTING_ARM = "existing"


def _run_lines() -> list[str]:
    """A valid two-arm run (4 episodes) to damage, in `json.dumps` style."""
    base = HERE.parents[0] / "fixtures" / "tau2" / "v1.0" / "ok.json"
    eps = [*read_tau2(base, arm="ref"), *read_tau2(base, arm="int4")]
    return [json.dumps(json.loads(e.model_dump_json())) for e in eps]


def _existing_line() -> bytes:
    base = HERE.parents[0] / "fixtures" / "tau2" / "v0.2" / "ok.json"
    ep = next(iter(read_tau2(base, arm=EXISTING_ARM)))
    return ep.model_dump_json().encode() + b"\n"


def _jobs(cases: list[Case], work: Path) -> list[dict[str, Any]]:
    jobs = []
    existing = _existing_line()
    for i, case in enumerate(cases):
        if case.kind == "tau2":
            out = work / "out" / f"{i}.jsonl"
            out.write_bytes(existing)  # an import must add to it, or leave it exactly as it was
            arm = "[/]arm" if case.name.startswith("markup") else "a"
            jobs.append(
                {
                    "id": f"{i}:import",
                    "argv": ["import", "tau2", case.path, "--arm", arm, "--out", str(out)],
                }
            )
            if i % 4 == 0:  # analyze reads τ² files directly too
                jobs.append(
                    {"id": f"{i}:analyze", "argv": ["analyze", case.path, "--bootstrap", BOOTSTRAP]}
                )
        else:
            js = work / "out" / f"{i}.analysis.json"
            jobs.append(
                {
                    "id": f"{i}:analyze",
                    "argv": ["analyze", case.path, "--bootstrap", BOOTSTRAP, "--json", str(js)],
                }
            )
    return jobs


def _check(case: Case, i: int, op: str, r: dict[str, Any], work: Path, existing: bytes) -> str:
    """'' when the command behaved, else what went wrong."""
    code, out, err = r["code"], r["stdout"], r["stderr"]
    if code not in (0, 2):
        return f"exit {code}: {err[-600:]}"
    if "Traceback" in err or "Traceback" in out:
        return f"traceback: {err[-600:]}"
    if code == 2:
        lines = err.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("error: "):
            return f"not one error line: {err!r}"
        if Path(case.path).name not in lines[0] and case.path not in lines[0]:
            return f"error does not name the file: {lines[0]}"
        if case.expect == "ok":
            return f"expected success, got: {lines[0]}"
        if op == "import" and (work / "out" / f"{i}.jsonl").read_bytes() != existing:
            return "a failed import changed its output"
        if case.literal is not None and case.literal not in err:
            return f"{case.literal!r} not printed literally: {lines[0]}"
        return ""
    if case.expect == "error":
        return f"expected exit 2, got 0: {out[-300:]}"
    shown = op == "import" or case.kind == "run"  # analyze prints names, not τ² paths
    if case.literal is not None and shown and case.literal not in out + err:
        return f"{case.literal!r} not printed literally"
    if op == "import":
        episodes = list(read_episodes(work / "out" / f"{i}.jsonl"))
        new = [e for e in episodes if e.arm != EXISTING_ARM]
        if len(episodes) - len(new) != 1:
            return "the existing episode was lost"
        if len({e.episode_id for e in episodes}) != len(episodes):
            return "duplicate episode ids written"
        if case.expect == "ok":
            if len(new) != case.episodes:
                return f"{len(new)} episodes imported, expected {case.episodes}"
            if case.rewards is not None and [e.reward for e in new] != case.rewards:
                return f"rewards {[e.reward for e in new]} != {case.rewards}"
    elif case.kind == "run":
        result = json.loads((work / "out" / f"{i}.analysis.json").read_text())
        if case.expect == "ok" and result["episodes_read"] != case.episodes:
            return f"episodes_read {result['episodes_read']}, expected {case.episodes}"
    return ""


@pytest.mark.parametrize(
    "stride",
    [
        pytest.param(1, id="all", marks=pytest.mark.slow),
        pytest.param(8, id="every-8th"),  # the fast suite's slice: every kind of damage
    ],
)
def test_damaged_files_never_cost_a_traceback_a_hang_or_memory(tmp_path: Path, stride: int) -> None:
    generated = generate(tmp_path / "files", _run_lines(), seed=SEED)
    assert len(generated) >= 300
    cases = generated[::stride]
    assert all(os.path.getsize(c.path) < 1 << 20 for c in cases if Path(c.path).is_file()), (
        "the memory promise is for files under 1 MB"
    )
    (tmp_path / "out").mkdir()
    jobs = _jobs(cases, tmp_path)
    jobs_file = tmp_path / "jobs.json"
    jobs_file.write_text(json.dumps(jobs))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "120"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    t0 = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            str(HERE / "cli_worker.py"),
            str(jobs_file),
            str(MEMORY_CAP),
            str(TIMEOUT_S),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    elapsed = time.perf_counter() - t0
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    existing = _existing_line()
    failures = []
    codes = {0: 0, 2: 0}
    for r in report["results"]:
        index, op = r["id"].split(":")
        case = cases[int(index)]
        problem = _check(case, int(index), op, r, tmp_path, existing)
        if problem:
            failures.append(f"{case.name} {Path(case.path).name} [{op}]: {problem}")
        if r["code"] in codes:
            codes[r["code"]] += 1
    slowest = max(r["seconds"] for r in report["results"])
    for op in ("import", "analyze"):
        times = sorted(r["seconds"] for r in report["results"] if r["id"].endswith(op))
        median = times[len(times) // 2]
        print(f"{op}: {len(times)} commands, {sum(times):.1f} s, median {median:.3f} s")
    summary = (
        f"{len(cases)} files, {len(jobs)} commands in {elapsed:.1f} s (slowest {slowest:.2f} s); "
        f"exit 0: {codes[0]}, exit 2: {codes[2]}; peak RSS {report['peak_rss_kb'] / 1024:.0f} MB"
    )
    print(summary)
    assert not failures, summary + "\n" + "\n".join(failures)
    assert report["peak_rss_kb"] * 1024 < MEMORY_CAP


@pytest.mark.parametrize("seed", [SEED])
def test_the_generator_is_deterministic(tmp_path: Path, seed: int) -> None:
    lines = _run_lines()
    a = generate(tmp_path / "a", lines, seed=seed)
    b = generate(tmp_path / "b", lines, seed=seed)
    assert [c.name for c in a] == [c.name for c in b]
    for x, y in zip(a, b, strict=True):
        if Path(x.path).is_file() and not x.path.startswith("/dev"):
            assert Path(x.path).read_bytes() == Path(y.path).read_bytes()
