"""A round's measurement: known answers from study v2's committed runs (its first trial of
`ref`, whose numbers docs/embedded.md states), and the verdict's rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from flatscore.cli.embedded_round import round_table, verdict
from flatscore.errors import InputError
from flatscore.store.archive import archived, chunks
from flatscore.train.rounds import RoundRow, round_rows

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def v2_ref(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ref = chunks(ROOT / "studies/embedded-study-v2/runs")["smollm2-135m__ref"]
    path = tmp_path_factory.mktemp("v2") / "smollm2-135m__ref.jsonl"
    path.write_text("".join(line + "\n" for _, line in archived(ref)), encoding="utf-8")
    return path


def test_study_v2s_first_trial_of_ref(v2_ref: Path) -> None:
    rows = {r.domain: r for r in round_rows([v2_ref], "ref", "1")}
    retail, telecom = rows["retail"], rows["telecom"]
    assert retail.whole and telecom.whole
    assert (retail.tasks, retail.episodes, retail.test_tasks) == (114, 114, 114)
    assert round(100 * retail.success, 1) == 60.5  # type: ignore[operator]
    assert round(100 * retail.recovery, 1) == 9.3  # type: ignore[operator]
    assert round(100 * retail.repeat_share) == 70  # type: ignore[operator]
    assert round(retail.masking, 1) == 3.5  # type: ignore[arg-type]
    assert round(100 * telecom.recovery, 1) == 8.7  # type: ignore[operator]
    assert round(100 * telecom.repeat_share) == 71  # type: ignore[operator]
    # the counts beside them (docs/embedded.md: 335 / 816 and 241 / 596)
    assert (retail.failed_calls, retail.agent_calls) == (335, 816)
    assert (telecom.failed_calls, telecom.agent_calls) == (241, 596)
    assert (retail.reissued_calls, telecom.reissued_calls) == (125, 203)
    assert (retail.step_cap, telecom.step_cap) == (8, 17)
    lines = round_table(list(rows.values()))
    assert "| smollm2-135m | telecom | 241 / 596 | 203 | 17 |" in lines
    assert lines[-1].startswith("targets not met: retail recovery, retail repeats")
    # both trials: not one trial per task, so not judged
    both = round_rows([v2_ref])
    assert not any(r.whole for r in both)
    assert verdict(both).startswith("not judged")


def test_a_run_archive_reads_as_its_run_files(v2_ref: Path, tmp_path: Path) -> None:
    from flatscore.store.archive import pack

    pack(v2_ref.parent, tmp_path / "archive")
    assert round_rows([tmp_path / "archive"], "ref", "1") == round_rows([v2_ref], "ref", "1")


def _row(domain: str, **values: float) -> RoundRow:
    base = {"success": 0.7, "recovery": 0.4, "repeat_share": 0.2, "s0": 0.6, "s9": 0.7}
    return RoundRow(
        model="m",
        domain=domain,
        arm="ref",
        episodes=114,
        tasks=114,
        test_tasks=114,
        **{**base, **values},
    )


def test_the_verdict_needs_every_target_and_masking_in_one_domain() -> None:
    assert verdict([_row("retail"), _row("telecom", s9=0.61)]) == "targets met"
    assert verdict([_row("retail", s9=0.67), _row("telecom", s9=0.61)]) == (
        "targets not met: S(9) − S(0) in every domain"
    )
    assert verdict([_row("retail", recovery=0.34), _row("telecom", repeat_share=0.31)]) == (
        "targets not met: retail recovery, telecom repeats"
    )
    assert verdict([_row("retail", success=0.59), _row("telecom")]).endswith("retail success")


def test_no_run_files_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no run files .* no run archive"):
        round_rows([tmp_path])
