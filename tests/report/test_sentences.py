"""Every generated sentence is checked against the numbers it cites.

Headlines are generated for many analyses — real (the embedded study's committed
analysis.json; an analysis of its committed runs; the τ²-bench fixture files) and synthetic
(seeded random studies over every verdict) — and each claim a sentence makes is asserted to
hold on the comparison it describes. A claim no rule knows about fails the test, so a new
sentence needs its condition here."""

from __future__ import annotations

import lzma
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from analysis_builders import episode
from flatscore.analysis.analyze import AnalysisOptions, analyze
from flatscore.analysis.noise_floor import MIN_REFERENCE_NAMES
from flatscore.analysis.result import AnalysisResult, Cell, Comparison
from flatscore.episode import Episode
from flatscore.formats import load_runs
from flatscore.report.analysis_text import worded
from flatscore.report.markdown import render_summary
from flatscore.report.verdicts import gap_grows, headlines

ROOT = Path(__file__).parents[2]
OPTS = AnalysisOptions(bootstrap=200, seed=0)


def _hi_within(c: Comparison) -> bool:
    """A drop beyond the margin is ruled out (one-sided test) at every budget tested (an
    analysis.json from before the budget tests: TOST at the default budget)."""
    if not c.budget_tests:
        return c.tost_equivalent
    return all(t.drop_ruled_out for t in c.budget_tests)


def _bounded(c: Comparison) -> bool:
    """A drop beyond the margin is ruled out at the default budget."""
    return c.budget_tests[0].drop_ruled_out if c.budget_tests else c.tost_equivalent


def _floor(c: Comparison, verdict: str) -> bool:
    return c.noise_floor is not None and c.noise_floor.invariance == verdict


def _past_floor(c: Comparison, key: str, value: float | None) -> bool:
    """The comparison's own difference lies beyond the reference's signed floor at the full
    trial count plus twice the floor's standard error."""
    f = c.noise_floor.diagnostics.get(key) if c.noise_floor is not None else None
    if f is None or value is None or f.floor_full_trials is None or f.floor_full_trials_se is None:
        return False
    return abs(value) > f.floor_full_trials + 2 * f.floor_full_trials_se


def _gap_past_floor(c: Comparison) -> bool:
    k = c.gap_amplification.k_small
    gap = next((g.gap for g in c.gap if k == g.K), None)
    return _past_floor(c, f"gap.K{k}", gap)


def _loop_past_floor(c: Comparison, key: str) -> bool:
    diff = getattr(c, key)
    return _past_floor(c, key, None if diff is None else diff.value)


CLAIMS: dict[str, Callable[[Comparison], bool]] = {
    "hides the damage": gap_grows,
    "lower success shown at small budgets": gap_grows,
    "not significantly lower in this study": lambda c: not gap_grows(c),
    "equivalent within": lambda c: c.tost_equivalent,
    "could not be shown": lambda c: not c.tost_equivalent,
    "significant after correction": lambda c: c.significant,
    "The final score itself drops": lambda c: c.significant and (c.gap_default.gap or 0) > 0,
    "No channel is significantly amplified": lambda c: not c.amplified_channels,
    "The largest amplified channel": lambda c: bool(c.amplified_channels),
    "Too few tasks to test channel amplification": lambda c: all(
        a.ci_low is None for a in c.channel_amplification.values()
    ),
    "rules out a drop beyond the equivalence margin": _hi_within,
    "do not ship this arm": lambda c: bool(c.significant) and not _bounded(c),
    "drops significantly, but by less than the equivalence margin": lambda c: (
        bool(c.significant) and _bounded(c)
    ),
    "though a drop beyond": lambda c: _bounded(c),
    "and a drop beyond": lambda c: _bounded(c),
    "cannot be told apart yet on the failure channels": lambda c: (
        _hi_within(c) and c.verdict == "inconclusive"
    ),
    "still allows a drop beyond the equivalence margin": lambda c: not _hi_within(c),
    "cannot yet show the final score flat": lambda c: (
        c.verdict == "inconclusive"
        and not c.budget_tests[0].drop_ruled_out
        and (
            bool(c.amplified_channels)
            or (c.failed_calls is not None and c.failed_calls.amplified)
            or gap_grows(c)
        )
    ),
    "differ from the reference's more than": lambda c: _floor(c, "beyond the noise floor"),
    "show no change beyond what the reference's own runs": lambda c: (
        _floor(c, "not beyond the noise floor") and _names(c) >= MIN_REFERENCE_NAMES
    ),
    "untestable: too few of the reference's own names": lambda c: _names(c) < MIN_REFERENCE_NAMES,
    "no noise floor to judge them against": lambda c: (
        c.noise_floor is None or c.noise_floor.invariance == "not decided"
    ),
    "the gap at K": lambda c: (
        c.gap_amplification.value is not None
        and (c.gap_default.gap or 0) > 0
        and (c.gap_default.ci_low or 0) > 0
    ),
    "its noise floor": lambda c: c.noise_floor is not None and c.noise_floor.splits > 0,
    "the gap exceeds that floor by more than 2 standard errors": _gap_past_floor,
    "the repeat difference exceeds that floor by more than 2 standard errors": lambda c: (
        _loop_past_floor(c, "repeat_difference")
    ),
    "the re-issue difference exceeds that floor by more than 2 standard errors": lambda c: (
        _loop_past_floor(c, "reissue_difference")
    ),
    "New in the arm": lambda c: any(
        a.count_ref == 0 < a.count_arm for a in c.channel_amplification.values()
    ),
    "exact sign test over tasks": lambda c: any(
        a.test == "task_sign" for a in c.channel_amplification.values()
    ),
    "only in the reference, amplified": lambda c: any(
        a.count_ref == 0 < a.count_arm and a.amplified for a in c.channel_amplification.values()
    ),
    "not tested at this study size": lambda c: any(
        a.count_ref == 0 < a.count_arm and a.p_value is None
        for a in c.channel_amplification.values()
    ),
}
"""Phrase in a sentence → the condition the comparison must meet for it to be said."""


def _names(c: Comparison) -> int:
    return c.noise_floor.reference_names or 0 if c.noise_floor is not None else 0


def _intervals_labelled(text: str) -> None:
    """Every printed 95% interval is labelled unadjusted: the decisions beside them are
    multiplicity-adjusted, the intervals are not."""
    for i in range(len(text)):
        if text.startswith("95% CI", i):
            assert text[:i].endswith(("unadjusted ", "excess, unadjusted ")), text[i - 80 : i + 40]


def _risk(cell: Cell) -> None:
    """The risk screen is a prior from the reference alone, and says what the cell's own
    comparisons found: no prediction of amplification the tests did not show."""
    reason = cell.risk_screen.reason
    assert "expect amplification" not in reason
    if cell.risk_screen.verdict != "unknown":
        assert "a prior from" in reason
    if not cell.comparisons:
        return
    found = [
        c.arm
        for c in cell.comparisons
        if c.amplified_channels or (c.failed_calls is not None and c.failed_calls.amplified)
    ]
    if found:
        assert "amplified in " + found[0] in reason, reason
    else:
        assert "show no amplified channel" in reason, reason


def check(analysis: AnalysisResult) -> Counter[str]:
    """Assert every claim of every headline; return how often each claim was made."""
    analysis = worded(analysis)  # the reasons, as the report writes them
    said: Counter[str] = Counter()
    for cell in analysis.cells:
        _risk(cell)
        for c in cell.comparisons:
            _intervals_labelled(c.verdict_reason)
        by_arm = {c.arm: c for c in cell.comparisons}
        for h in headlines(cell, analysis.settings):
            c = by_arm[h.arm]
            text = " ".join(h.sentences)
            _intervals_labelled(text)
            for phrase, holds in CLAIMS.items():
                if phrase in text:
                    said[phrase] += 1
                    assert holds(c), f"{cell.domain} {c.arm}: {phrase!r} said, not true: {text}"
            amp = c.gap_amplification
            if amp.value is not None:
                assert f"{amp.value:.1f}× the gap at K = {amp.k_default}" in text
    summary = render_summary(analysis)
    assert "\\`" not in summary, "escaped backticks in summary.md"
    return said


def test_the_embedded_studys_committed_analysis() -> None:
    """The published analysis: int8's "hides the damage … at small budgets" (Gap(0) = 0.0)
    is gone; after the calibrated re-analysis no 8-bit arm is "flat score, amplified
    failures", and int8 telecom's significant drop is named as bounded inside the margin: no
    damage detected, with the advice that names the drop (its one malformed output is tested
    over tasks, not significant)."""
    path = ROOT / "studies" / "embedded-study" / "analysis.json"
    said = check(AnalysisResult.model_validate_json(path.read_text()))
    assert said["The largest amplified channel"] and not said["hides the damage"]
    assert said["and a drop beyond"] == 1
    assert said["drops significantly, but by less than the equivalence margin"] == 1
    assert not said["cannot be told apart yet on the failure channels"]


def _embedded(arms: tuple[str, ...], every: int) -> list[Episode]:
    """The embedded study's committed episodes of `arms`, every `every`-th task (fast)."""
    runs = ROOT / "studies" / "embedded-study" / "runs"
    out = []
    for arm in arms:
        for chunk in sorted(runs.glob(f"smollm2-135m__{arm}.*.jsonl.xz")):
            for line in lzma.decompress(chunk.read_bytes()).decode().splitlines():
                ep = Episode.model_validate_json(line)
                if zlib.crc32(ep.task_id.encode()) % every == 0:
                    out.append(ep)
    return out


def test_an_analysis_of_the_embedded_runs_with_its_noise_floor() -> None:
    eps = _embedded(("ref", "int8", "int4"), 3)
    assert len({e.task_id for e in eps}) >= 30
    said = check(analyze(eps, OPTS))
    assert said["its noise floor"]
    assert said["the gap exceeds that floor by more than 2 standard errors"]


@pytest.mark.parametrize("name", ["v0.2", "v1.0"])
def test_the_tau2_fixture_files(name: str) -> None:
    files = sorted((ROOT / "tests" / "fixtures" / "tau2" / name).glob("*.json"))
    eps = []
    for f in files:
        try:
            eps += list(load_runs([f]))
        except Exception:  # the fixtures include deliberately broken files
            continue
    assert eps
    # every file as the reference, and a copy of it as the arm (the files hold one arm each)
    ref = [e.model_copy(update={"arm": "ref"}) for e in eps]
    copy = [e.model_copy(update={"arm": "copy", "episode_id": e.episode_id + "c"}) for e in eps]
    check(analyze(ref + copy, OPTS.model_copy(update={"dedupe": True, "reference": "ref"})))


def _random_study(seed: int) -> list[Episode]:
    """Reference and four arms on random tasks: a copy-like arm, one with more failed calls
    (lower success at small budgets), one with lower success, one that types a person's name
    into the name slot (a channel new in the arm); sizes vary with the seed."""
    rng = np.random.default_rng(seed)
    tasks, trials = int(rng.choice([8, 30, 60])), int(rng.choice([1, 2, 4]))
    arms = {
        "ref": (0.6, 0.5),
        "same": (0.6, 0.5),
        "fails": (0.6, 1.5),
        "drops": (0.35, 0.6),
        "new": (0.6, 0.5),
    }
    names = ["foo", "bar", "baz", "toggle_airplane_mode"]
    eps = []
    for arm, (p_success, fail_rate) in arms.items():
        for t in range(tasks):
            for k in range(trials):
                calls: list[tuple[str, str | None]] = [("get_user", "ok")]
                calls += [(str(rng.choice(names)), "fail") for _ in range(rng.poisson(fail_rate))]
                calls += [("Tina Jones", "fail")] * int(arm == "new" and rng.random() < 0.6)
                calls += [("get_order", "ok")]
                eps.append(episode(arm, f"t{t}", k, calls, success=bool(rng.random() < p_success)))
    return eps


def test_synthetic_studies_over_every_verdict() -> None:
    verdicts: Counter[str] = Counter()
    said: Counter[str] = Counter()
    for seed in range(12):
        analysis = analyze(_random_study(seed), OPTS.model_copy(update={"reference": "ref"}))
        said += check(analysis)
        verdicts.update(c.verdict for cell in analysis.cells for c in cell.comparisons)
    assert set(verdicts) >= {"visible damage", "inconclusive", "no damage detected"}, verdicts
    assert said["hides the damage"] and said["could not be shown"], said
    assert said["exact sign test over tasks"] and said["only in the reference, amplified"], said
    assert said["not tested at this study size"], said
