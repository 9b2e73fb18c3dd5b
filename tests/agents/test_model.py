"""The model agent: a backend's Generation becomes the agent's turn; malformed output is
recorded by the runner, never a crash; seeded sampling per turn; KV caches reset per episode."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from flatscore.agents import ModelAgent, agent_names
from flatscore.agents.model import turn_seed
from flatscore.domains import get_domain
from flatscore.episode import Episode, Message, TokenUsage
from flatscore.models.base import Backend, Generation, Sampling
from flatscore.models.chat_format import parse_assistant
from flatscore.run.episode_loop import EpisodeSpec, run_episode
from flatscore.users import make_user


class ReplayBackend(Backend):
    """Answers with fixed raw texts, parsed by the real chat-format parser (the backend is
    not what these tests are about)."""

    name = "replay"

    def __init__(self, outputs: list[str]) -> None:
        self.outputs = outputs
        self.seen: list[Sampling] = []
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1

    def generate(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> Generation:
        raw = self.outputs[min(len(self.seen), len(self.outputs) - 1)]
        self.seen.append(sampling)
        usage = TokenUsage(prompt_tokens=len(messages), completion_tokens=len(raw))
        return Generation(
            message=parse_assistant(raw, f"call_{len(messages)}"),
            raw_text=raw,
            usage=usage,
            latency_s=0.25,
        )


def _episode(agent: ModelAgent, domain: str = "retail", max_steps: int = 12) -> Episode:
    d = get_domain(domain)
    spec = EpisodeSpec(domain=d, task=d.tasks("test")[0], trial=0, seed=300, max_steps=max_steps)
    return asyncio.run(run_episode(spec, agent, make_user("scripted")))


def test_registered() -> None:
    assert {"model", "embedded"} <= set(agent_names())


def test_generation_becomes_the_agents_message() -> None:
    raw = '<tool_call>{"name": "get_order", "arguments": {"order_id": "W1"}}</tool_call>'
    agent = ModelAgent(ReplayBackend([raw]))
    msg = asyncio.run(agent.act([Message(role="user", content="hi")], []))
    assert msg.role == "assistant" and not msg.malformed
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("get_order", {"order_id": "W1"})]
    assert msg.usage == TokenUsage(prompt_tokens=1, completion_tokens=len(raw))
    assert msg.latency_s == 0.25


def test_runner_records_malformed_output_without_crashing() -> None:
    garbage = '<tool_call>{"nam": oops'
    agent = ModelAgent(ReplayBackend(["Could you please give me your email address?", garbage]))
    episode = _episode(agent)
    bad = [m for m in episode.messages if m.role == "assistant" and m.malformed]
    assert bad and all(m.content == garbage and not m.tool_calls for m in bad)
    assert not episode.succeeded
    assert episode.termination_reason.value in {"user_stop", "max_steps"}
    # Malformed output never reaches the environment: no tool results at all.
    assert not any(m.role == "tool" for m in episode.messages)
    Episode.model_validate_json(episode.model_dump_json())


def test_a_failed_call_is_recorded_as_an_error_result() -> None:
    wrong = '<tool_call>{"name": "find_user", "arguments": {"email": "a@b.c"}}</tool_call>'
    agent = ModelAgent(ReplayBackend([wrong, "Sorry. ###STOP###"]))
    episode = _episode(agent)
    results = [m.tool_result for m in episode.messages if m.tool_result is not None]
    assert [(r.error, r.error_kind) for r in results] == [(True, "unknown_tool")]
    assert episode.termination_reason.value == "agent_stop"


def test_greedy_by_default_and_seeded_sampling_per_turn() -> None:
    backend = ReplayBackend(["Hello."])
    agent = ModelAgent(backend)
    _episode(agent, max_steps=4)
    assert backend.resets == 1
    assert all(s.greedy and s.seed is None for s in backend.seen)

    sampled = ReplayBackend(["Hello."])
    agent = ModelAgent(sampled, Sampling(temperature=0.7))
    _episode(agent, max_steps=6)
    seeds = [s.seed for s in sampled.seen]
    assert seeds == [turn_seed(300, t) for t in range(len(seeds))] and len(seeds) >= 2


@pytest.mark.slow
def test_real_embedded_model_runs_one_episode() -> None:
    """The real local backend on the real embedded model (whatever `embedded` is: the base,
    or base + adapter once one ships): the episode ends and is recorded, whatever it says."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    from flatscore.models.local import LocalBackend

    torch.set_num_threads(1)
    agent = ModelAgent(LocalBackend.from_spec("embedded"), Sampling(max_tokens=48))
    episode = _episode(agent, domain="telecom", max_steps=6)
    turns = [m for m in episode.messages if m.role == "assistant"][1:]
    assert turns, "the model spoke"
    assert all(m.usage is not None and m.usage.completion_tokens <= 48 for m in turns)
    assert episode.model.startswith("local:smollm2-135m-instruct")
    Episode.model_validate_json(episode.model_dump_json())
