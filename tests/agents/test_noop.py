"""The do-nothing agent fails every task that needs a write (here: every task)."""

from __future__ import annotations

import asyncio

import pytest

from flatscore.agents import make_agent
from flatscore.domains import get_domain
from flatscore.run.episode_loop import EpisodeSpec, run_episode
from flatscore.users import make_user
from task_slices import EVERY_TASK


@pytest.mark.parametrize(("domain", "stride"), EVERY_TASK)
def test_noop_fails_every_task_that_needs_a_write(domain: str, stride: int) -> None:
    d = get_domain(domain)
    tasks = [t for t in d.tasks() if d.needs_write(t)]
    assert len(tasks) >= 40

    async def run_all() -> list[bool]:
        results = []
        for task in d.tasks()[::stride]:
            ep = await run_episode(
                EpisodeSpec(domain=d, task=task, trial=0, seed=300),
                make_agent("noop"),
                make_user("scripted"),
            )
            assert not any(m.tool_calls for m in ep.messages if m.role == "assistant")
            results.append(ep.succeeded)
        return results

    # read-only tasks still need information communicated, so noop fails them too
    assert not any(asyncio.run(run_all()))
