"""`flatscore run --time-limit`: a real run stops cleanly when its time is up (the Ctrl-C
path: episodes in flight cancelled, run files closed), exit code 0, and `--resume` goes on
from there without a duplicate; a run that finishes in time writes its report."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from cli_runner import flatscore_process as flatscore
from flatscore.errors import InputError
from flatscore.run.driver import plan_study
from flatscore.run.executors import LocalExecutor
from flatscore.run.jobs import EpisodeJob
from flatscore.run.quick import QuickRun
from flatscore.run.time_limit import RunStopped, TimeLimit, draining, parse_duration
from flatscore.store.jsonl import read_episodes
from run_files import oracle_jobs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# far more than a few seconds of oracle episodes on any machine: the limit always comes first
ARGS = ("run", "--domain", "all", "--split", "test", "--trials", "50", "--no-progress")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1h", 3600), ("45m", 2700), ("1h30m", 5400), ("90s", 90), ("1.5h", 5400), ("20", 20)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1d", "h", "1h x", "0s", "-5", "soon"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(InputError, match="--time-limit"):
        parse_duration(text)


@pytest.mark.slow  # fast: the SIGINT-blocked run below stops at its limit too
def test_a_run_stops_at_its_time_limit_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    done = flatscore(*ARGS, "--out", out, "--time-limit", "4s")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("time limit 4s reached: stopped;")
    planned = {
        j.episode_id
        for j in plan_study(
            QuickRun.parse(domains=["all"], split="test", trials=50).to_study()
        ).jobs
    }
    first = [e.episode_id for e in read_episodes(out)]
    assert 0 < len(first) == len(set(first)) < len(planned)
    assert set(first) <= planned

    done = flatscore(*ARGS, "--out", out, "--time-limit", "4s", "--resume")
    assert done.returncode == 0, done.stderr
    assert "time limit 4s reached" in done.stdout
    second = [e.episode_id for e in read_episodes(out)]
    assert second[: len(first)] == first  # kept, then appended to
    assert len(second) == len(set(second)) < len(planned)


def test_a_study_that_finishes_in_time_writes_its_report(tmp_path: Path) -> None:
    data = yaml.safe_load((EXAMPLES / "smoke.yaml").read_text("utf-8"))
    data.update({"output": str(tmp_path / "out"), "tasks_per_domain": 2, "trials": 1})
    study = tmp_path / "smoke.yaml"
    study.write_text(yaml.safe_dump(data), "utf-8")
    done = flatscore("run", study, "--time-limit", "1h", "--no-progress")
    assert done.returncode == 0, done.stderr
    assert "time limit" not in done.stdout
    assert (tmp_path / "out" / "tables.md").exists()


def _deaf() -> None:
    import signal

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.slow  # a run in a fresh process (5 s); the time limit's own tests above are fast
def test_a_run_stops_even_if_started_with_sigint_blocked(tmp_path: Path) -> None:
    """A signal mask is inherited: a parent that blocked SIGINT (a native thread pool in a
    test worker) must not make the run deaf to Ctrl-C and to its own time limit."""
    import subprocess
    import sys

    exe = Path(sys.executable).parent / "flatscore"
    done = subprocess.run(
        [str(exe), *ARGS, "--out", str(tmp_path / "run.jsonl"), "--time-limit", "3s"],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_deaf,
    )
    assert done.returncode == 0, done.stderr
    assert "time limit 3s reached" in done.stdout


@pytest.mark.slow  # a real run drained end to end; fast: the executor's drain below
def test_a_drained_run_finishes_what_is_in_flight_then_stops(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    started = time.monotonic()
    done = flatscore(*ARGS, "--out", out, "--time-limit", "4s", "--drain", "2m")
    assert done.returncode == 0, done.stderr
    assert "stopped once the episodes in flight had finished" in done.stdout
    assert time.monotonic() - started < 60  # oracle episodes finish long before the drain
    first = [e.episode_id for e in read_episodes(out)]
    assert first and len(first) == len(set(first))
    resumed = flatscore(*ARGS, "--out", out, "--time-limit", "4s", "--drain", "2m", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert [e.episode_id for e in read_episodes(out)][: len(first)] == first


def test_a_drain_needs_a_time_limit(tmp_path: Path) -> None:
    done = flatscore(*ARGS, "--out", tmp_path / "run.jsonl", "--drain", "5m")
    assert done.returncode != 0
    assert "--drain needs --time-limit" in done.stderr + done.stdout


def test_while_draining_the_executor_starts_nothing_and_finishes_every_started_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import flatscore.run.executors.local as local

    started: list[str] = []

    async def slow(job: EpisodeJob) -> SimpleNamespace:
        """Stands in for an episode of a second: the schedule, not the episode, is tested."""
        started.append(job.episode_id)
        await asyncio.sleep(1.0)
        return SimpleNamespace(episode_id=job.episode_id)

    monkeypatch.setattr(local, "run_job", slow)
    finished: list[str] = []

    async def run() -> None:
        async for episode in LocalExecutor(3).map(oracle_jobs(12, ("ref",))):
            finished.append(episode.episode_id)

    with TimeLimit(1.5, drain_s=30), pytest.raises(RunStopped):
        asyncio.run(run())
    assert not draining()  # the limit's block is over
    assert len(started) == 6  # two rounds of 3 began before the limit at 1.5 s
    assert sorted(finished) == sorted(started)  # and every one of them finished
