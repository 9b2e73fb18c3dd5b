"""The cost figures in words (`report.cost_notes`): units and methods for every figure, and
the warnings that make arms hard to compare, from the rows' measured load alone."""

from __future__ import annotations

from flatscore.analysis.result import ArmCost, CostSummary
from flatscore.report.cost_notes import HOW, UNITS, load_warnings, worded_cost


def _row(arm: str, flight: float | None, domain: str = "retail") -> ArmCost:
    return ArmCost(
        model="m", domain=domain, arm=arm, episodes=3, successes=1, episodes_in_flight=flight
    )


def _cost(*rows: ArmCost, shared: bool = False) -> CostSummary:
    return CostSummary(arms=list(rows), units={}, how={}, shared_process=shared)


def test_different_load_names_the_busiest_and_the_quietest_arm() -> None:
    cost = _cost(_row("ref", 1.0), _row("int4", 2.0), _row("int8", None, "telecom"))
    assert load_warnings(cost) == [
        "arms ran under different load: 2.00 episodes in flight on average during "
        "m/retail/int4's episodes, 1.00 during m/retail/ref's; their latency, tokens/s and "
        "seconds are not comparable",
        "episodes ran concurrently (up to 2.00 in flight on average): latency and tokens/s "
        "include contention for the shared machine; machine seconds share it out",
    ]


def test_alike_load_one_at_a_time_says_nothing_but_a_shared_process() -> None:
    assert load_warnings(_cost(_row("ref", 1.0), _row("int4", 1.04))) == []
    assert load_warnings(_cost(_row("ref", 1.0), shared=True)) == [
        "several arms were served by one process: its peak resident memory is theirs "
        "together, not one arm's"
    ]


def test_worded_cost_fills_units_and_methods_once() -> None:
    cost = worded_cost(_cost(_row("ref", 1.0)))
    assert cost.units == UNITS and cost.how == HOW and cost.warnings == []
    assert "decode_tokens_per_s" in cost.how and cost.units["peak_rss_bytes"] == "bytes"
    assert worded_cost(cost) is cost  # read back from analysis.json: kept as it is
