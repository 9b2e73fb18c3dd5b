"""Per-task failure profiles resampled from the committed studies' own episodes, for the
calibration tests: real agents put most of their failed calls in a few tasks, which the
smooth gamma-propensity model of tests/sequential_model.py does not (docs/analysis.md,
"Failures cluster in tasks").

`profile` reads one arm of one domain from a committed archive (studies/*/runs, xz chunks
of episodes) through the analysis's own per-episode counts (`episode_facts`): per task and
trial, agent tool calls, failed agent calls (all, or one channel) and success. `split_null`
builds null comparisons by drawing tasks with replacement and splitting each drawn task's
trials at random between two pseudo-arms; `paired_draw` draws tasks of two real arms
together (a planted arm against its reference). Both return per-task means in the order
the statistics take them: failed_arm, calls_arm, failed_ref, calls_ref (studies × tasks),
and the per-task success differences ref − arm.
"""

from __future__ import annotations

import lzma
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from flatscore.analysis.channels import load_rules
from flatscore.analysis.facts import episode_facts
from flatscore.episode import Episode

STUDIES = Path(__file__).resolve().parent.parent / "studies"
V1 = ("embedded-study", "smollm2-135m")
V2 = ("embedded-study-v2", "smollm2-135m")
V3 = ("embedded-study-v3", "gemma3-270m")


@dataclass(frozen=True)
class Profile:
    """(tasks × trials) arrays of one arm in one domain, tasks sorted by id."""

    tasks: tuple[str, ...]
    calls: np.ndarray
    failed: np.ndarray
    success: np.ndarray


@cache
def _episodes(
    study: str, model: str, arm: str
) -> tuple[tuple[str, str, int, bool, int, int, tuple[tuple[str, int], ...]], ...]:
    rules = load_rules()
    out = []
    for path in sorted((STUDIES / study / "runs").glob(f"{model}__{arm}.*.jsonl.xz")):
        if ".ahead." in path.name:
            continue
        with lzma.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                ep = Episode.model_validate_json(line)
                fa = episode_facts(ep, rules)
                if fa.infrastructure:
                    continue
                out.append(
                    (
                        ep.domain,
                        fa.task_id,
                        fa.trial,
                        fa.succeeded,
                        fa.agent_calls,
                        fa.agent_failed,
                        tuple(sorted(fa.channels.items())),
                    )
                )
    return tuple(out)


@cache
def profile(
    source: tuple[str, str], arm: str, domain: str, channel: str | None = None, trials: int = 2
) -> Profile:
    """One arm's profile: the tasks with at least `trials` trials, their first `trials`."""
    by_task: dict[str, list[tuple[int, int, int, bool]]] = {}
    for dom, task, trial, ok, n_calls, n_failed, channels in _episodes(*source, arm):
        if dom != domain:
            continue
        n = n_failed if channel is None else dict(channels).get(channel, 0)
        by_task.setdefault(task, []).append((trial, n_calls, n, ok))
    tasks = tuple(t for t in sorted(by_task) if len(by_task[t]) >= trials)
    rows = [sorted(by_task[t])[:trials] for t in tasks]
    calls = np.array([[e[1] for e in r] for r in rows], float)
    failed = np.array([[e[2] for e in r] for r in rows], float)
    success = np.array([[e[3] for e in r] for r in rows], float)
    return Profile(tasks, calls, failed, success)


@dataclass(frozen=True)
class Draw:
    """Resampled comparisons, each (studies × tasks)."""

    failed_arm: np.ndarray
    calls_arm: np.ndarray
    failed_ref: np.ndarray
    calls_ref: np.ndarray
    differences: np.ndarray

    def rates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.failed_arm, self.calls_arm, self.failed_ref, self.calls_ref


def split_null(p: Profile, per: int, tasks: int, studies: int, rng: np.random.Generator) -> Draw:
    """Null comparisons: `tasks` tasks drawn with replacement, each drawn task's trials
    shuffled and split `per` + `per` between the pseudo-arm and the pseudo-reference."""
    pick = rng.integers(0, len(p.tasks), size=(studies, tasks))
    order = np.argsort(rng.random((studies, tasks, p.calls.shape[1])), axis=-1)[..., : 2 * per]

    def halves(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = np.take_along_axis(a[pick], order, axis=-1)
        return x[..., :per].mean(axis=-1), x[..., per:].mean(axis=-1)

    fa, fr = halves(p.failed)
    ca, cr = halves(p.calls)
    sa, sr = halves(p.success)
    return Draw(fa, ca, fr, cr, sr - sa)


def paired_draw(
    arm: Profile, ref: Profile, tasks: int, studies: int, rng: np.random.Generator
) -> Draw:
    """Comparisons of two real arms: `tasks` of their common tasks drawn with replacement,
    both arms' episodes of a drawn task together."""
    common = sorted(set(arm.tasks) & set(ref.tasks))
    ia = np.array([arm.tasks.index(t) for t in common])
    ir = np.array([ref.tasks.index(t) for t in common])
    pick = rng.integers(0, len(common), size=(studies, tasks))
    a, r = ia[pick], ir[pick]
    return Draw(
        arm.failed[a].mean(-1),
        arm.calls[a].mean(-1),
        ref.failed[r].mean(-1),
        ref.calls[r].mean(-1),
        ref.success[r].mean(-1) - arm.success[a].mean(-1),
    )
