"""A study of `kind: openai` arms whose endpoint refuses every request fails loudly: exit 1,
the first error (with the server's reason) on stderr, no report of nothing; the episodes
stay in the run files for `--resume`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fault_server import FaultServer, Reply

from cli_runner import CliResult
from flatscore.store.jsonl import read_episodes
from run_files import write_study

REFUSAL = '{"detail": [{"type": "string_type", "loc": ["body", "messages", 2, "content"]}]}'


def _study(tmp_path: Path, url: str, **changes: object) -> Path:
    model = {
        "name": "m",
        "kind": "openai",
        "arms": {"ref": {"url": url, "served_model": "m"}},
        "max_retries": 0,
        "timeout_s": 5,
    }
    settings = {"domains": ["retail", "telecom"], "tasks_per_domain": 2, "trials": 1}
    return write_study(tmp_path, "refused", [model], **{**settings, "concurrency": 1, **changes})


def test_a_study_whose_every_episode_fails_on_its_endpoint_exits_1(
    tmp_path: Path, fault_server: FaultServer, flatscore: Callable[..., CliResult]
) -> None:
    fault_server.script = [Reply(status=500, body=REFUSAL)]
    done = flatscore("run", _study(tmp_path, fault_server.url), "--no-progress")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "all 4 episodes run ended in an infrastructure error" in done.stderr
    assert "server error 500" in done.stderr and "string_type" in done.stderr
    assert "Traceback" not in done.stderr
    out = tmp_path / "out"
    assert not (out / "report.html").exists()
    episodes = list(read_episodes(out / "runs" / "m__ref.jsonl"))
    assert len(episodes) == 4 and all(e.is_infrastructure_error for e in episodes)


def test_one_answered_episode_is_enough_to_report(
    tmp_path: Path, fault_server: FaultServer, flatscore: Callable[..., CliResult]
) -> None:
    """Negative control: the endpoint answers the first episode (cut short by `max_steps`),
    then refuses: not every episode failed, so the run reports (exit 0) and counts them."""
    fault_server.script = [Reply()] * 2 + [Reply(status=500, body=REFUSAL)]
    done = flatscore("run", _study(tmp_path, fault_server.url, max_steps=4), "--no-progress")
    assert done.returncode == 0, done.stderr
    assert "'infrastructure_error': 3" in done.stdout
    assert (tmp_path / "out" / "report.html").is_file()
