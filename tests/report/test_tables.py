"""flatscore.report.tables: a study's tables (tables.md of every report, the embedded study
page's tables) from a real analysis of hand-built episodes whose rates, S(K) and gaps are
known."""

from __future__ import annotations

from pathlib import Path

from analysis_builders import episode, repaired
from cli_runner import flatscore
from flatscore.analysis.analyze import AnalysisOptions, analyze
from flatscore.analysis.repair_effect import repair_effects
from flatscore.analysis.result import AnalysisResult
from flatscore.analysis.settings import AnalysisSettings
from flatscore.report import tables
from flatscore.store.jsonl import EpisodeWriter


def _study() -> list:
    """Retail, 4 tasks. ref: every task succeeds with 4 calls, one of them an unknown tool
    (25% of agent calls). q4: tasks 0-1 succeed after 3 failed calls (so S(2) = 0 but
    S(9) = 50%), tasks 2-3 fail; every q4 failure is an unknown tool, 6 of 8 calls in
    tasks 0-1 and 2 of 4 in tasks 2-3."""
    ref = [
        episode(
            "ref",
            f"t{t}",
            0,
            [("get_user", "ok"), ("ghost", "unknown_tool")] + [("get_order", "ok")] * 2,
        )
        for t in range(4)
    ]
    q4 = [
        episode(
            "q4", f"t{t}", 0, [("ghost", "unknown_tool")] * 3 + [("get_user", "ok")], success=True
        )
        for t in range(2)
    ] + [
        episode("q4", f"t{t}", 0, [("ghost", "unknown_tool"), ("get_user", "ok")], success=False)
        for t in range(2, 4)
    ]
    return ref + q4


def _row(markdown: str, section: str, *first: str) -> list[str]:
    """The cells of the first row of `section`'s table that starts with `first`."""
    body = markdown.split(f"#### {section}", 1)[1].split("####", 1)[0]
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[: len(first)] == list(first):
            return cells
    raise AssertionError(f"no row {first} in:\n{markdown}")


def test_tables_carry_the_known_rates_success_and_gaps() -> None:
    result = analyze(_study(), AnalysisOptions(reference="ref", bootstrap=200))
    text = tables.render(result)
    assert text.startswith("<!-- flatscore report, tables.md: 8 episodes read -->")
    # per-channel: ref 4 of 16 agent calls unknown (25%); q4 8 of 12 (66.7%), all invented
    ref = _row(text, "Per-channel", "ref", "retail")
    assert ref[2:6] == ["4", "100.0", "16", "25.0 (4) (0 / 0 / 4 / 0)"]
    q4 = _row(text, "Per-channel", "q4", "retail")
    assert q4[2:6] == ["4", "50.0", "12", "66.7 (8) (0 / 0 / 8 / 0)"]
    # S(K): q4's successes need 3 failed calls, so S(0) = S(2) = 0, S(5) = S(9) = 50%
    budget = _row(text, "S(K)", "retail", "q4")
    assert budget[2:6] == ["0.0", "0.0", "50.0", "50.0"]
    assert _row(text, "S(K)", "retail", "ref")[2:6] == ["0.0", "100.0", "100.0", "100.0"]
    # Gap = S_ref − S_arm: both fail at K = 0 (ref's one failed call), 100 points at K = 2
    assert budget[6].startswith("0.0 ") and budget[7].startswith("+100.0")
    assert budget[8].startswith("+50.0") and budget[9].startswith("+50.0")
    # Gap(2) / Gap(9) = 2, but Gap(9) on these few tasks is not distinguishable from 0: none
    assert budget[10] == "—"
    # findings: the gap at the default budget and the unknown-tool rates, ref → arm
    cells = _row(text, "Findings", "retail", "q4")
    assert cells[2] == "4"  # paired tasks
    assert cells[3].startswith("+50.0") and "TOST no" in cells[3]
    assert cells[4].startswith("25.0 → 66.7")
    assert cells[5].startswith("1.00") or "novel 0.0% of 1" in cells[5]  # one name: "ghost"


def test_the_report_writes_the_tables_of_its_analysis(tmp_path: Path) -> None:
    """`flatscore report` writes tables.md beside analysis.json: the rendering of exactly
    that analysis."""
    with EpisodeWriter(tmp_path / "runs" / "study.jsonl") as writer:
        writer.write_all(_study())
    out = tmp_path / "report"
    done = flatscore("report", tmp_path / "runs", "--out", out, "--reference", "ref")
    assert done.returncode == 0, done.stderr
    result = AnalysisResult.model_validate_json((out / "analysis.json").read_text("utf-8"))
    assert (out / "tables.md").read_text("utf-8") == tables.render(result)
    assert _row(tables.render(result), "S(K)", "retail", "q4")[2:6] == [
        "0.0",
        "0.0",
        "50.0",
        "50.0",
    ]


def test_repair_tables_carry_the_known_effect_and_interaction() -> None:
    """ref: repair changes nothing (3 of 4 tasks either way). int4: 1 of 4 without, 3 of 4
    with repair (+50 points, interaction +50); its unknown-tool calls fall from 5 of 6 agent
    calls to 2 of 5 (−43.3 points); 2 repair instructions in 2 episodes."""
    ok, bad = ("get_user", "ok"), ("lookup", "unknown_tool")
    eps = []
    for arm in ("ref", "ref+repair"):
        eps += [episode(arm, t, calls=[ok]) for t in ("t0", "t1", "t2")]
        eps.append(episode(arm, "t3", success=False))
    eps += [
        episode("int4", "t0", calls=[bad, ok]),
        episode("int4", "t1", calls=[bad, bad, bad], success=False),
        episode("int4", "t2", calls=[bad], success=False),
        episode("int4", "t3", success=False),
    ]
    eps += [
        repaired(episode("int4", "t0", calls=[bad, ok])),
        repaired(episode("int4", "t1", calls=[bad, ok])),
        repaired(episode("int4", "t2", calls=[ok])),
        repaired(episode("int4", "t3", success=False)),
    ]
    result = repair_effects(eps, AnalysisSettings(bootstrap=200, bootstrap_min_tasks=2))
    text = "\n".join(tables.repair_tables(result))
    effect = _row(text, "Repair effect", "retail", "int4")
    assert effect[2:6] == ["unknown_tool", "4", "25.0", "75.0"]
    assert effect[6].startswith("+50.0 [") and effect[8].startswith("+50.0 [")
    assert effect[9] == "2 (2)"
    assert _row(text, "Repair effect", "retail", "ref")[6].startswith("0.0 ")
    assert _row(text, "Repair effect", "retail", "ref")[8] == "—"
    # unknown_tool calls / agent calls (one episode per task): 5 / 6 without, 2 / 5 with
    rates = _row(text, "Repaired channels", "retail", "int4")
    assert rates[2].startswith("-43.3 [")


def test_an_underflowed_p_value_is_printed_as_a_bound() -> None:
    """A p-value that underflowed to 0.0 is tiny, not certain: the findings table prints
    `p < 1e-300`, and a representable one with three significant digits."""
    result = analyze(_study(), AnalysisOptions(reference="ref", bootstrap=200))
    comp = result.cells[0].comparisons[0]
    for p, shown in [(0.0, "p < 1e-300"), (1e-300, "p = 1e-300"), (0.01234, "p = 0.0123")]:
        comp.p_adjusted = p
        cells = _row(tables.render(result), "Findings", "retail", "q4")
        assert f"; {shown}; TOST" in cells[3], cells[3]
