"""Calibration transcripts for toolchain-made arms (`flatscore.models.quant.toolchain`):
oracle episodes of the TRAIN split of both built-in domains, the agent's own conversation
format, never a test task.

Each train task once, scripted user (phrasing seed 1000 + its index), no planted mistakes
or detours: the conversations the agent was trained to hold. Registered as the calibration
source `train-split` (`CALIBRATION_SOURCES`), so the model layer reaches it by name.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from flatscore.domains import get_domain
from flatscore.models.quant.calibration import Conversation
from flatscore.models.quant.toolchain import CALIBRATION_SOURCES
from flatscore.train.data import DOMAINS, example_from, example_job, run_jobs


def _domain_transcripts(name: str) -> list[Conversation]:
    tasks = get_domain(name).tasks("train")
    jobs = [example_job(t, seed=1000 + i, with_mistake=False) for i, t in enumerate(tasks)]
    out = []
    for job, episode in zip(jobs, run_jobs(jobs), strict=True):
        example = example_from(job, episode)
        if example is not None:
            out.append(
                Conversation(
                    id=f"{name}/{example.task_id}",
                    split="calibration",
                    tools=example.tools,
                    messages=example.messages,
                )
            )
    return out


def train_split_transcripts() -> list[Conversation]:
    """Every train task's oracle conversation, the domains interleaved (retail, telecom,
    retail, …, then the longer domain's rest). Run in a thread of its own: the episodes run
    in an event loop, and a study loads its backends from inside one."""
    with ThreadPoolExecutor(1) as pool:
        per_domain = pool.submit(lambda: [_domain_transcripts(d) for d in DOMAINS]).result()
    shortest = min(map(len, per_domain))
    interleaved = [c for group in zip(*per_domain, strict=False) for c in group]
    return interleaved + [c for group in per_domain for c in group[shortest:]]


CALIBRATION_SOURCES.register("train-split", train_split_transcripts)
