"""The noise floor: known answers on hand-built episodes, the arm's values equal to the
comparison's, an identical replicate sitting exactly on the floor (hypothesis), and a
simulation that bounds the novelty decision from both sides (false flags and power)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from analysis_builders import episode
from flatscore.analysis.analyze import AnalysisOptions, analyze
from flatscore.analysis.channels import load_rules
from flatscore.analysis.facts import EpisodeFacts, episode_facts
from flatscore.analysis.noise_floor import CellFloor, balanced_splits, noise_floor
from flatscore.analysis.result import Comparison, NoiseFloor
from flatscore.analysis.stats import resample_counts
from flatscore.analysis.task_matrix import task_matrix
from flatscore.episode import Episode

OPTS = AnalysisOptions(bootstrap=200, bootstrap_min_tasks=2, seed=0)


def test_balanced_splits_count_every_split_in_both_orientations() -> None:
    four = balanced_splits([0, 1, 2, 3, 3, 0])
    assert len(four) == 6 and len({frozenset(map(frozenset, s)) for s in four}) == 3
    assert all(len(a) == 2 and len(b) == 2 and not set(a) & set(b) for a, b in four)
    three = balanced_splits([5, 6, 7])
    assert len(three) == 6 and {(len(a), len(b)) for a, b in three} == {(1, 2), (2, 1)}
    assert balanced_splits([0, 1]) == [((0,), (1,)), ((1,), (0,))]
    assert balanced_splits([2, 2]) == []


def _halluc(
    arm: str, task: str, trial: int, names: dict[str, int], success: bool = True
) -> Episode:
    calls = [(n, "fail") for n, c in names.items() for _ in range(c)] + [("get_user", "ok")]
    return episode(arm, task, trial, calls, success=success)


def _only(result_cells: list, arm: str) -> Comparison:
    return next(c for cell in result_cells for c in cell.comparisons if c.arm == arm)


def test_known_answer_two_trials() -> None:
    """ref trial 0 says foo×2, bar×1; trial 1 says foo×1, baz×1 (one task). Floor, by hand:
    novel share of trial 1 against trial 0 = baz 1 of 2 = 1/2, of trial 0 against trial 1 =
    bar 1 of 3 = 1/3: mean 5/12. ρ over (foo, bar, baz) of (2, 1, 0) vs (1, 0, 1), the
    same both ways. Gap(0): trial 0 succeeds with 3 failures (S(0) = 0), trial 1 fails:
    0 both ways, floor 0."""
    eps = [
        _halluc("ref", "t1", 0, {"foo": 2, "bar": 1}),
        _halluc("ref", "t1", 1, {"foo": 1, "baz": 1}, success=False),
        _halluc("int4", "t1", 0, {"qux": 2}),
        _halluc("int4", "t1", 1, {"foo": 1}),
    ]
    c = _only(analyze(eps, OPTS).cells, "int4")
    nf = c.noise_floor
    assert isinstance(nf, NoiseFloor) and nf.splits == 1 and nf.trials_per_half == [1, 1]
    rho = spearmanr([2, 1, 0], [1, 0, 1]).statistic
    d = nf.diagnostics
    assert d["spearman_rho"].floor == pytest.approx(rho)
    assert d["novel_fraction"].floor == pytest.approx(5 / 12)
    # the arm at half size: ref trial 0 vs int4 trial 1 (foo: not novel), ref trial 1 vs
    # int4 trial 0 (qux×2: novel) → mean (0 + 1) / 2
    assert d["novel_fraction"].arm_half == pytest.approx(0.5)
    assert d["novel_fraction"].excess == pytest.approx(0.5 - 5 / 12)
    assert d["gap.K0"].floor == pytest.approx(0.0)
    # failed-call ratio between the halves: 3/4 vs 2/3 failed per call, both ways
    lr = abs(np.log((2 / 3) / (3 / 4)))
    assert d["failed_calls"].floor == pytest.approx(np.exp(lr))
    assert d["failed_calls"].floor_full_trials == pytest.approx(np.exp(lr / np.sqrt(2)))
    assert d["spearman_rho"].kind == "level" and d["failed_calls"].kind == "ratio"
    assert d["gap.K0"].kind == "difference" and d["gap.K0"].beyond_floor is None


def test_one_trial_gives_no_floor() -> None:
    eps = [_halluc("ref", "t1", 0, {"foo": 1}), _halluc("int4", "t1", 0, {"bar": 1})]
    nf = _only(analyze(eps, OPTS).cells, "int4").noise_floor
    assert nf is not None and nf.splits == 0 and nf.invariance == "not decided"
    assert nf.diagnostics["novel_fraction"].arm == 1.0
    assert nf.diagnostics["novel_fraction"].floor is None


def _study(rng: np.random.Generator, tasks: int, trials: int, novel_arm: float) -> list[Episode]:
    names = ["foo", "bar", "baz", "qux", "quux"]
    eps = []
    for arm in ("ref", "int8"):
        for t in range(tasks):
            for k in range(trials):
                picked: Counter[str] = Counter()
                for _ in range(int(rng.integers(0, 3))):
                    new = arm == "int8" and rng.random() < novel_arm
                    picked[f"new{rng.integers(0, 3)}" if new else names[rng.integers(0, 5)]] += 1
                eps.append(_halluc(arm, f"t{t}", k, dict(picked), success=bool(rng.random() < 0.7)))
    return eps


def test_floor_values_beside_the_comparisons_own() -> None:
    """The floor's `arm` column is the comparison itself: same definitions, same numbers."""
    result = analyze(_study(np.random.default_rng(1), 12, 4, 0.3), OPTS)
    c = _only(result.cells, "int8")
    assert c.noise_floor is not None
    d = c.noise_floor.diagnostics
    assert c.noise_floor.splits == 3 and c.noise_floor.trials_per_half == [2, 2]
    assert d["spearman_rho"].arm == pytest.approx(c.spearman_rho)
    assert d["novel_fraction"].arm == pytest.approx(c.novel_fraction)
    for ch, amp in c.channel_amplification.items():
        assert d[f"channel.{ch}"].arm == pytest.approx(amp.ratio, nan_ok=True), ch
    assert d["recovery_difference"].arm == pytest.approx(c.recovery_difference.value)
    for m, iv in c.trajectory_difference.items():
        assert d[f"trajectory.{m}"].arm == pytest.approx(iv.value)
    for k in (0, result.settings.default_K):
        assert d[f"gap.K{k}"].arm == pytest.approx(next(g.gap for g in c.gap if k == g.K))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.integers(2, 5))
def test_an_identical_replicate_sits_exactly_on_the_floor(seed: int, trials: int) -> None:
    """An arm with the reference's own episodes: at half size it *is* the floor."""
    eps = [e for e in _study(np.random.default_rng(seed), 6, trials, 0.0) if e.arm == "ref"]
    twin = [e.model_copy(update={"arm": "twin", "episode_id": e.episode_id + "b"}) for e in eps]
    nf = _only(analyze(eps + twin, OPTS.model_copy(update={"reference": "ref"})).cells, "twin")
    assert nf.noise_floor is not None
    for key in ("spearman_rho", "novel_fraction"):
        s = nf.noise_floor.diagnostics[key]
        if s.floor is not None:
            assert s.arm_half == pytest.approx(s.floor) and s.excess == pytest.approx(0.0)
            assert s.beyond_floor is not True
    assert nf.noise_floor.invariance != "beyond the noise floor"


def _facts(rng: np.random.Generator, tasks: int, trials: int, novel: float) -> list[EpisodeFacts]:
    """Per-episode facts drawn directly (fast): each task favours its own few names (the same
    in every arm), ~1 hallucinated call per episode; `novel` of the calls use names the
    reference never has."""
    template = episode_facts(episode("x", "t", 0, [("get_user", "ok")]), load_rules())
    weights = 1.0 / np.arange(1, 21)
    out = []
    for t in range(tasks):
        own = np.random.default_rng(t).permutation(20)[:6]  # a task's names: fixed per task
        p = weights[: len(own)] / weights[: len(own)].sum()
        for k in range(trials):
            names: Counter[str] = Counter()
            for _ in range(int(rng.poisson(1.0))):
                if rng.random() < novel:
                    names[f"new{rng.integers(0, 10)}"] += 1
                else:
                    names[f"n{own[rng.choice(len(own), p=p)]}"] += 1
            out.append(replace(template, task_id=f"t{t:03d}", trial=k, hallucinated=names))
    return out


def _decide(ref: list[EpisodeFacts], arm: list[EpisodeFacts], seed: int) -> NoiseFloor:
    tasks = sorted({f.task_id for f in ref})
    names = sorted({n for f in ref + arm for n in f.hallucinated})
    weights = resample_counts(len(tasks), 200, np.random.default_rng(seed))
    cell = CellFloor(ref, tasks, [0], "all", names, weights)
    m_ref, m_arm = (task_matrix(x, tasks, [0], "all", names) for x in (ref, arm))
    return noise_floor(cell, m_ref, m_arm, arm, [0], 0.95)


def test_novelty_against_the_floor_is_calibrated_from_both_sides() -> None:
    """114 tasks × 4 trials, 30 seeded studies each. Null (the arm draws from the
    reference's own distribution): ρ or the novel share beyond the floor in ≤ 10% of studies
    (nominal 5%; measured 0–1 of 40 per side). Planted (5% of the arm's calls use names the
    reference never has): beyond the floor in ≥ 80% (measured 40 of 40; 2% gave 38 of 40)."""
    rng = np.random.default_rng(26)
    runs = 30
    null = planted = 0
    for i in range(runs):
        ref = _facts(rng, 114, 4, 0.0)
        null += _decide(ref, _facts(rng, 114, 4, 0.0), i).invariance == "beyond the noise floor"
        planted += _decide(ref, _facts(rng, 114, 4, 0.05), i).invariance == "beyond the noise floor"
    assert null / runs <= 0.10, null
    assert planted / runs >= 0.80, planted
