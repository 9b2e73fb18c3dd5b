"""The cost section (flatscore.analysis.cost): known answers worked out by hand, and the
episodes-in-flight sweep against a brute-force count (hypothesis)."""

from __future__ import annotations

import json
import lzma
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis_builders import episode
from flatscore.analysis.analyze import AnalysisOptions, analyze
from flatscore.analysis.cost import arm_cost, cost_summary, in_flight
from flatscore.analysis.result import AnalysisResult
from flatscore.analysis.settings import Price
from flatscore.episode import Episode, Message, Serving, Timing, TokenUsage, TurnTiming
from flatscore.report.analysis_text import worded
from flatscore.report.cost_notes import load_warnings

ARCHIVE = Path(__file__).parents[2] / "studies" / "embedded-study" / "runs"


def timed(
    arm: str,
    task: str,
    start: float,
    duration: float,
    latencies: list[float],
    *,
    success: bool = True,
    domain: str = "retail",
) -> Episode:
    """An episode whose agent turns took `latencies` seconds, each 100 prompt tokens (40
    re-encoded, in 0.1 s of prefill) and 10 completion tokens (in latency − 0.1 s)."""
    ep = episode(arm, task, success=success, domain=domain)
    turns = [
        Message(
            role="assistant",
            content="x",
            usage=TokenUsage(prompt_tokens=100, completion_tokens=10),
            latency_s=lat,
            timing=TurnTiming(prefill_s=0.1, decode_s=lat - 0.1, encoded_tokens=40),
        )
        for lat in latencies
    ]
    stamp = (datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=start)).isoformat()
    return ep.model_copy(
        update={
            "messages": [Message(role="assistant", content="Hi!"), *ep.messages, *turns],
            "usage": TokenUsage(prompt_tokens=100 * len(turns), completion_tokens=10 * len(turns)),
            "timing": Timing(started_at=stamp, duration_s=duration),
        }
    )


def test_in_flight_known_answer() -> None:
    # a and b overlap for 5 of their 10 s: each sees 1.5 episodes in flight; c runs alone
    assert in_flight([(0, 10), (5, 15), (20, 30), None, (40, 40)]) == [1.5, 1.5, 1.0, None, None]


spans = st.lists(
    st.tuples(st.integers(0, 50), st.integers(1, 30)).map(lambda t: (t[0], t[0] + t[1])),
    min_size=1,
    max_size=12,
)


@given(spans)
def test_in_flight_matches_a_brute_force_overlap_count(s: list[tuple[int, int]]) -> None:
    got = in_flight([(float(a), float(b)) for a, b in s])
    for (a, b), value in zip(s, got, strict=True):
        overlap = sum(max(0, min(b, d) - max(a, c)) for c, d in s)  # itself included
        assert value == pytest.approx(overlap / (b - a))
        assert value is not None and value >= 1.0


def test_arm_cost_known_answer() -> None:
    """Two episodes (one succeeds), alone on the machine; latencies 1, 2, 3 and 4 s."""
    eps = [
        timed("a", "t1", 0, 10.0, [1.0, 2.0]),
        timed("a", "t2", 20, 30.0, [3.0, 4.0], success=False),
    ]
    price = Price(per_1m_prompt_tokens=2.0, per_1m_completion_tokens=10.0, per_hour=360.0)
    c = arm_cost("m", "retail", "a", eps, [1.0, 1.0], price)
    assert (c.episodes, c.successes, c.agent_turns) == (2, 1, 4)
    assert c.turn_latency_p50_s == pytest.approx(2.5)
    assert c.turn_latency_p95_s == pytest.approx(3.85)  # 3 + 0.85 × (4 − 3)
    assert c.prefill_tokens_per_s == pytest.approx(160 / 0.4)  # 4 turns × 40 / 4 × 0.1 s
    assert c.decode_tokens_per_s == pytest.approx(40 / 9.6)  # 4 × 10 / (0.9+1.9+2.9+3.9)
    assert c.timing_source == "backend"
    assert c.prompt_tokens_per_episode == 200 and c.completion_tokens_per_episode == 20
    assert c.wall_s_per_episode == 20.0 and c.wall_s_per_success == 40.0
    assert c.machine_s_per_episode == 20.0 and c.episodes_in_flight == 1.0
    # per episode: 200 × 2/1e6 + 20 × 10/1e6 = 0.0006, plus machine time at 0.1/s: 1 and 3
    assert c.money_per_1k_episodes == pytest.approx(1000 * (4.0012 / 2))
    assert c.money_per_success == pytest.approx(4.0012)
    assert c.currency == "USD"


def test_an_llm_users_tokens_are_not_the_agents() -> None:
    ep = timed("a", "t1", 0, 10.0, [1.0, 2.0])
    user = Message(role="user", content="hm", usage=TokenUsage(prompt_tokens=5000))
    ep = ep.model_copy(
        update={
            "messages": [*ep.messages, user],
            "usage": ep.usage + TokenUsage(prompt_tokens=5000),  # as the runner sums it
        }
    )
    c = arm_cost("m", "retail", "a", [ep], [1.0], Price(per_1m_prompt_tokens=1e6))
    assert c.prompt_tokens_per_episode == 200  # the agent's two turns only
    assert c.money_per_success == pytest.approx(200.0)


def test_machine_seconds_share_the_machine_between_episodes_in_flight() -> None:
    eps = [timed("a", "t1", 0, 10.0, [1.0]), timed("b", "t1", 0, 10.0, [1.0])]
    summary = cost_summary(eps, {"b": Price(per_hour=3600.0)})
    a, b = summary.arms
    assert a.episodes_in_flight == b.episodes_in_flight == 2.0
    assert a.machine_s_per_episode == 5.0 and a.money_per_1k_episodes is None
    assert b.money_per_success == pytest.approx(5.0)  # 5 machine seconds at 1 a second
    assert summary.warnings == []  # words, the report's (tests/report/test_cost_notes.py)


def test_arms_under_different_load_are_flagged() -> None:
    alone = [timed("ref", f"t{i}", 20 * i, 10.0, [1.0]) for i in range(3)]
    crowded = [timed("int4", "t0", 100, 10.0, [1.0]), timed("int4", "t1", 100, 10.0, [1.0])]
    warnings = load_warnings(cost_summary(alone + crowded, {}))
    assert any("different load" in w and "m/retail/int4" in w for w in warnings)


def test_serving_figures_come_from_the_episodes_and_shared_processes_are_flagged() -> None:
    serving = Serving(
        backend="local:x@int8", parameters=1000, weight_bytes=1032, bits_per_parameter=8.256,
        resident_weight_bytes=4000, peak_rss_bytes=5_000_000, pid=7, arms_in_process=2,
    )  # fmt: skip
    ep = timed("int8", "t1", 0, 1.0, [0.5]).model_copy(update={"serving": serving})
    smaller = ep.model_copy(
        update={"serving": serving.model_copy(update={"peak_rss_bytes": 10}), "task_id": "t2"}
    )
    summary = cost_summary([ep, smaller], {})
    (c,) = summary.arms
    assert (c.weight_bytes, c.bits_per_parameter, c.peak_rss_bytes) == (1032, 8.256, 5_000_000)
    assert summary.shared_process
    assert any("one process" in w for w in load_warnings(summary))


def test_analysis_json_has_the_cost_section_with_units_and_methods() -> None:
    eps = [timed(arm, f"t{i}", 10 * i, 5.0, [1.0]) for arm in ("bf16", "int4") for i in range(3)]
    result = analyze(eps, AnalysisOptions(bootstrap=200, prices={"int4": Price(per_hour=36.0)}))
    assert result.cost is not None
    assert [(r.arm, r.episodes) for r in result.cost.arms] == [("bf16", 3), ("int4", 3)]
    assert result.cost.units == {} and result.cost.how == {}  # words: the report's
    result = worded(result)
    assert result.cost is not None
    for field in ("decode_tokens_per_s", "turn_latency_p95_s", "money_per_success"):
        assert field in result.cost.units and field in result.cost.how
    assert result.settings.prices["int4"].per_hour == 36.0
    text = result.model_dump_json()  # the reasons' codes stay behind: their words are in it
    assert AnalysisResult_roundtrip(text).model_dump_json() == text


def AnalysisResult_roundtrip(text: str) -> AnalysisResult:
    from flatscore.analysis.result import AnalysisResult

    return AnalysisResult.model_validate_json(text)


def test_old_episodes_without_cost_fields_still_load_and_give_what_they_recorded() -> None:
    """The embedded study's archive predates Message.timing and Episode.serving: it loads,
    and its cost row has the tokens, latencies and seconds it did record."""
    chunk = next(iter(sorted(ARCHIVE.glob("smollm2-135m__int8.*.jsonl.xz"))))
    lines = lzma.decompress(chunk.read_bytes()).splitlines()
    eps = [Episode.model_validate(json.loads(line)) for line in lines[:20]]
    assert all(ep.serving is None for ep in eps)
    (c,) = cost_summary(eps, {}).arms[:1]
    assert c.weight_bytes is None and c.decode_tokens_per_s is None
    assert c.timing_source == "none"
    assert c.turn_latency_p50_s is not None and c.turn_latency_p50_s > 0
    assert c.prompt_tokens_per_episode is not None and c.prompt_tokens_per_episode > 0


def test_a_smoke_study_writes_the_cost_section_with_its_prices(tmp_path: Path) -> None:
    """`flatscore run examples/smoke.yaml` (smaller, one arm priced per hour): analysis.json
    has a cost row per (model, domain, arm), priced where the study file priced it, and
    summary.md a line per arm."""
    import yaml

    from flatscore.run.driver import run_study
    from flatscore.run.study import load_study

    data = yaml.safe_load((ARCHIVE.parents[2] / "examples" / "smoke.yaml").read_text("utf-8"))
    data.update(output="out", tasks_per_domain=2, trials=1)
    data["models"][0]["arms"]["slips"]["price"] = {"per_hour": 3.6, "currency": "EUR"}
    path = tmp_path / "smoke.yaml"
    path.write_text(yaml.safe_dump(data), "utf-8")
    outcome = run_study(load_study(path), progress=False)
    assert outcome.report is not None
    result = json.loads(outcome.report.analysis.read_text("utf-8"))
    rows = {(r["model"], r["domain"], r["arm"]): r for r in result["cost"]["arms"]}
    assert len(rows) == 6  # oracle ref/slips and noop ref, in two domains
    slips = rows[("oracle", "retail", "slips")]
    assert slips["currency"] == "EUR" and slips["money_per_1k_episodes"] is not None
    assert slips["money_per_1k_episodes"] == pytest.approx(slips["machine_s_per_episode"])
    assert rows[("oracle", "retail", "ref")]["money_per_1k_episodes"] is None
    summary = outcome.report.summary.read_text("utf-8")
    assert "## Cost per arm" in summary and "**slips**" in summary
