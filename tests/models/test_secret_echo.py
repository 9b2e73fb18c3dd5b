"""An endpoint that echoes the request's Authorization header in its error body: the key must
not reach errors, episode metadata, run files or the response cache (issue 14)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from fault_server import FaultServer, Reply, ok_body

from flatscore.agents.model import ModelAgent
from flatscore.domains import get_domain
from flatscore.models.base import BackendError, Sampling
from flatscore.models.openai import OpenAIBackend, OpenAIConfig
from flatscore.run.episode_loop import EpisodeSpec, run_episode
from flatscore.store.jsonl import EpisodeWriter, read_episodes
from flatscore.store.redaction import scrub
from flatscore.users import ScriptedUser

SECRET = "sk-live-0123456789abcdef"


def echoing(status: int) -> Reply:
    body = {
        "error": {
            "message": f"bad request; you sent Authorization: Bearer {SECRET}",
            "headers": {"authorization": f"Bearer {SECRET}"},
        }
    }
    return Reply(status, body=body)


@pytest.fixture
def backend(fault_server: FaultServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("FS_ECHO_KEY", SECRET)
    b = OpenAIBackend(
        OpenAIConfig(
            base_url=fault_server.url,
            model="m",
            api_key_env="FS_ECHO_KEY",
            max_retries=0,
            backoff_s=0.0,
            cache_path=tmp_path / "cache.sqlite",
        )
    )
    yield b
    b.close()


def test_the_echoed_key_is_not_in_the_error(
    fault_server: FaultServer, backend: OpenAIBackend
) -> None:
    fault_server.script = [echoing(400)]
    with pytest.raises(BackendError) as info:
        backend.generate([], [], Sampling())
    assert fault_server.headers[0]["Authorization"] == f"Bearer {SECRET}"  # it was sent
    assert SECRET not in str(info.value) and "***" in str(info.value)


def test_the_echoed_key_is_in_no_episode_of_a_run(
    fault_server: FaultServer, backend: OpenAIBackend, tmp_path: Path
) -> None:
    fault_server.script = [echoing(401)]
    domain = get_domain("retail")
    out = tmp_path / "run.jsonl"
    with EpisodeWriter(out) as writer:
        for i, task in enumerate(domain.tasks("test")[:3]):
            spec = EpisodeSpec(domain=domain, task=task, trial=0, seed=i, arm="echo")
            agent = ModelAgent(backend, Sampling(max_tokens=8))
            episode = asyncio.run(run_episode(spec, agent, ScriptedUser()))
            assert SECRET not in str(episode.metadata)  # the error was scrubbed at the source
            writer.write(episode)
    episodes = list(read_episodes(out))
    assert len(episodes) == 3
    assert all("***" in str(e.metadata.get("error", "")) for e in episodes)
    assert SECRET not in out.read_text()


def test_a_response_echoing_the_key_is_cached_scrubbed(
    fault_server: FaultServer, backend: OpenAIBackend, tmp_path: Path
) -> None:
    fault_server.script = [Reply(body=ok_body(f"your key is {SECRET}"))]
    backend.generate([], [], Sampling())  # greedy: cached
    rows = sqlite3.connect(tmp_path / "cache.sqlite").execute(
        "SELECT request, response FROM responses"
    )
    text = json.dumps(rows.fetchall())
    assert SECRET not in text and "***" in text


def test_scrub_masks_credentials_not_words() -> None:
    assert scrub("the bearer of bad news") == "the bearer of bad news"
    assert scrub('{"Authorization": "Basic dXNlcjpwYXNz"}') == '{"Authorization": "***"}'
    assert scrub("x-api-key: abcdef123456") == "x-api-key: ***"
    assert "sk-abcdefgh12345" not in scrub("Bearer sk-abcdefgh12345 failed")
