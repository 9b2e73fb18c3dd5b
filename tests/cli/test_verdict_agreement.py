"""`analyze` and `gate` decide with one rule (`analysis.verdict_rule`): run both through the CLI
on the same pair of run files and they give the same verdict, for identical arms, a flat arm,
a significant drop inside the margin, amplified failures beside a score not shown flat, a
damaged arm (failures and score) and a study too small to tell.

The "flat" pair is the case that used to disagree: 6 tasks lost and 3 gained of 120 (a 2.5
point gap) is TOST-equivalent within ±7.5 points (its 90% interval ends at +7.3), while the
95% interval's upper end (+8.5) passes the margin, so `analyze` said "inconclusive: the
interval still allows a drop beyond ±7.5 points" beside "TOST yes" while `gate` passed it."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from pathlib import Path

import pytest

from analysis_builders import episode
from cli_runner import CliResult
from flatscore.analysis.verdict_rule import GATE_OF
from flatscore.episode import Episode
from flatscore.store.jsonl import EpisodeWriter

FAST = ("--bootstrap", "300")


def arm(
    name: str,
    tasks: int,
    *,
    lost: Collection[int] = (),
    gained: Collection[int] = (),
    extra_failure: bool = False,
) -> list[Episode]:
    """Two successful calls per episode; every 3rd task fails (the reference's baseline),
    except `gained` ones succeed and `lost` ones fail; `extra_failure`: one failed call to a
    name the reference never uses, in every episode."""
    out = []
    for t in range(tasks):
        ok = (t % 3 != 0 or t in gained) and t not in lost
        calls: list = [("get_user", "ok"), ("get_order", "ok")]
        if extra_failure:
            calls.insert(1, ("get_usr", "fail"))
        out += [episode(name, f"t{t:03d}", k, calls, success=ok) for k in range(2)]
    return out


def write(path: Path, episodes: list[Episode]) -> Path:
    with EpisodeWriter(path) as w:
        for ep in episodes:
            w.write(ep)
    return path


# 6 lost from tasks that succeed (t % 3 != 0), 3 gained from tasks that fail (t % 3 == 0).
LOST = (1, 2, 4, 5, 7, 8)
GAINED = (3, 6, 9)

CASES: dict[str, tuple[dict, str, str]] = {
    "identical": ({}, "no damage detected", "pass"),
    "flat": ({"lost": LOST, "gained": GAINED}, "no damage detected", "pass"),
    "failures": ({"extra_failure": True}, "flat score, amplified failures", "damage"),
    "score": ({"lost": range(1, 100)}, "visible damage", "damage"),
}


def _verdicts(
    flatscore: Callable[..., CliResult], ref: Path, cand: Path, tmp: Path
) -> tuple[str, str, dict]:
    out = tmp / "analysis.json"
    a = flatscore("analyze", ref, cand, "--reference", "bf16", "--json", out, *FAST)
    assert a.returncode == 0, a.stderr
    (cell,) = json.loads(out.read_text())["cells"]
    (comparison,) = cell["comparisons"]
    g = flatscore("gate", ref, cand, "--json", "-", *FAST)
    assert g.returncode in (0, 3, 4), g.stderr
    gate = json.loads(g.stdout)
    assert g.returncode == gate["exit_code"]
    (gcell,) = gate["cells"]
    assert gcell["analysis_verdict"] == comparison["verdict"]
    assert gcell["reason"] == comparison["verdict_reason"]
    return comparison["verdict"], gate["verdict"], comparison


@pytest.mark.parametrize("case", list(CASES))
def test_analyze_and_gate_agree(
    case: str, flatscore: Callable[..., CliResult], tmp_path: Path
) -> None:
    changes, analysis_verdict, gate_verdict = CASES[case]
    ref = write(tmp_path / "ref.jsonl", arm("bf16", 120))
    cand = write(tmp_path / "cand.jsonl", arm("int8", 120, **changes))
    verdict, gated, comparison = _verdicts(flatscore, ref, cand, tmp_path)
    assert (verdict, gated) == (analysis_verdict, gate_verdict), comparison["verdict_reason"]
    assert GATE_OF[verdict] == gated
    if case == "flat":  # the old disagreement: TOST yes, the 95% interval past the margin
        default = comparison["budget_tests"][0]
        assert comparison["tost_equivalent"] and default["drop_ruled_out"]
        assert comparison["gap_default"]["ci_high"] > 0.075 > default["drop_bound"]
        assert "not ruled out" not in comparison["verdict_reason"]


@pytest.mark.parametrize(
    ("tasks", "changes", "analysis_verdict", "gate_verdict", "said"),
    [
        # 8 of 240 tasks lost: a significant 3.3-point drop whose 90% interval ends at +5.8,
        # inside the margin: the tolerance it sets, named, not damage (as sequentially).
        (
            240,
            {"lost": [t for t in range(1, 13) if t % 3]},
            "no damage detected",
            "pass",
            "a significant 3.3-point drop, inside the ±7.5-point margin",
        ),
        # Failures amplified beside a score not shown flat (30 tasks: the 90% interval reaches
        # +8.3): named, not decided; "flat score, amplified failures" needs the flat score.
        (
            30,
            {"extra_failure": True},
            "inconclusive",
            "inconclusive",
            "amplified failures, with a score not shown flat",
        ),
    ],
)
def test_the_margin_decides_in_both(
    tasks: int,
    changes: dict,
    analysis_verdict: str,
    gate_verdict: str,
    said: str,
    flatscore: Callable[..., CliResult],
    tmp_path: Path,
) -> None:
    ref = write(tmp_path / "ref.jsonl", arm("bf16", tasks))
    cand = write(tmp_path / "cand.jsonl", arm("int8", tasks, **changes))
    verdict, gated, comparison = _verdicts(flatscore, ref, cand, tmp_path)
    assert (verdict, gated) == (analysis_verdict, gate_verdict), comparison["verdict_reason"]
    assert said in comparison["verdict_reason"]


def test_a_study_too_small_is_inconclusive_in_both(
    flatscore: Callable[..., CliResult], tmp_path: Path
) -> None:
    ref = write(tmp_path / "ref.jsonl", arm("bf16", 12))
    cand = write(tmp_path / "cand.jsonl", arm("int8", 12))
    verdict, gated, comparison = _verdicts(flatscore, ref, cand, tmp_path)
    assert (verdict, gated) == ("inconclusive", "inconclusive"), comparison["verdict_reason"]
    assert "channels not tested" in comparison["verdict_reason"]


def test_the_terminal_sentence_agrees_with_the_table(
    flatscore: Callable[..., CliResult], tmp_path: Path
) -> None:
    """The flat pair in the terminal: TOST yes in the table, no "still allows a drop"."""
    ref = write(tmp_path / "ref.jsonl", arm("bf16", 120))
    cand = write(tmp_path / "cand.jsonl", arm("int8", 120, lost=LOST, gained=GAINED))
    r = flatscore("analyze", ref, cand, "--reference", "bf16", *FAST)
    assert r.returncode == 0, r.stderr
    assert "no damage detected" in r.stdout and "still allows a drop" not in r.stdout
