"""`flatscore demo`'s words (`report.demo_text`): known answers, the titles, lines and banner
the demo wrote before the words moved here, byte for byte."""

from __future__ import annotations

from pathlib import Path

from flatscore.report.demo_text import (
    KEPT_ARCHIVED,
    LiveSlice,
    demo_banner,
    demo_title,
    interrupted,
    reproduced_title,
    resuming_demo,
    resuming_slice,
    running_slice,
    slice_text,
    slice_title,
    whole_study,
)
from flatscore.store.compare import Divergence, Reproduction

ARCHIVE = Path("studies") / "embedded-study-v2" / "runs"
WHOLE = (
    "The verdicts below are the whole study's: its 3,192 archived episodes (trials 1-2 of "
    "every arm and domain, studies/embedded-study-v2/runs), read with the study's statistics "
    "and its sequential replay (after how many tasks each comparison would have been "
    "decided)."
)


def test_the_fresh_demos_title_names_what_is_not_the_default() -> None:
    arms = ("ref", "int8", "int4-awq")
    assert demo_title(arms, "fp32", "off") == (
        "flatscore demo · embedded SmolLM2-135M · ref, int8, int4-awq"
    )
    assert demo_title(("ref",), "bf16", "both") == (
        "flatscore demo · embedded SmolLM2-135M · ref · bf16 compute · repair both"
    )


def test_the_titles_of_the_slice_and_of_the_reproduced_report() -> None:
    title = "flatscore · embedded study v2"
    assert slice_title(title) == "flatscore · embedded study v2 · the demo's live slice"
    assert reproduced_title(title) == "flatscore · embedded study v2 · reproduced by flatscore demo"


def test_the_lines_printed_as_the_demo_runs() -> None:
    out, runs = Path("/tmp/demo"), Path("/tmp/demo/runs")
    assert resuming_demo(out, runs) == (
        "resuming the demo in /tmp/demo (delete /tmp/demo/runs to start over)"
    )
    assert (
        resuming_slice(runs)
        == "resuming the demo's slice in /tmp/demo/runs (delete it to start over)"
    )
    assert interrupted(runs) == "interrupted: run the demo again to resume it from /tmp/demo/runs"
    assert running_slice(45, ("ref", "ref-planted", "int4-awq"), 15, 1, ARCHIVE) == (
        "running study v2's slice live: 45 episodes (ref, ref-planted, int4-awq; 15 tasks, "
        "trial 1), then comparing each with studies/embedded-study-v2/runs"
    )


def test_the_slice_in_words_domains_in_order() -> None:
    text = slice_text(["ref", "int4-awq"], {"telecom": 6, "retail": 9}, [1, 2])
    assert text == "ref, int4-awq × 9 retail and 6 telecom tasks, trial 1, 2"


def test_the_whole_study_counts_with_a_thousands_separator() -> None:
    assert whole_study(3192, "1-2", ARCHIVE) == WHOLE


def test_without_a_comparison_the_banner_says_nothing_ran() -> None:
    banner = demo_banner(WHOLE, None)
    assert banner.headline == "not compared on this machine (--no-verify)"
    assert (banner.exact, banner.details) == (None, [])
    assert banner.about == "No episode was run: " + WHOLE


def _live(**changes: object) -> LiveSlice:
    facts: dict[str, object] = {
        "study_file": Path("examples") / "embedded-study-v2.yaml",
        "adapter_sha256": "0e47264aafe71b162b94893d050ee900356f70337625ef3f08a1ca4e2d760b51",
        "arms": ["ref", "ref-planted", "int4-awq"],
        "tasks": {"retail": 9, "telecom": 6},
        "trials": [1],
        "reproduction": Reproduction(
            archive="a", checked=45, identical=45, not_archived=[], episodes=[]
        ),
    }
    return LiveSlice.model_validate({**facts, **changes})


def test_an_exact_reproduction_says_what_ran_and_no_details() -> None:
    banner = demo_banner(WHOLE, _live())
    assert banner.headline == "45 of 45 episodes reproduced exactly on this machine"
    assert banner.exact is True and banner.details == []
    assert banner.about == (
        "Run live on this machine with study v2's own file (examples/embedded-study-v2.yaml: "
        "model, adapter sha256 0e47264aafe7…, arms, seeds, sampling, budget): ref, "
        "ref-planted, int4-awq × 9 retail and 6 telecom tasks, trial 1; each episode compared "
        "with the archived one, message by message. " + WHOLE
    )


def test_a_divergence_is_detailed_then_the_missing_then_which_episode_is_kept() -> None:
    banner = demo_banner(
        WHOLE,
        _live(reproduction=Reproduction(
            archive="a", checked=45, identical=42, not_archived=["a", "b"], episodes=[],
            first_divergence=Divergence(
                episode_id="x", arm="int4-awq", domain="telecom", task_id="t", trial=0, turn=3,
                field="text", position=None, archived="p", live="q",
            ),
        )),
    )  # fmt: skip
    assert banner.exact is False
    assert banner.headline == "42 of 45 episodes reproduced exactly on this machine"
    assert banner.details == [
        "int4-awq · telecom · t · trial 1 (x), turn 3, text: archived 'p', live 'q'",
        "not in the archive: a, b",
        "Where an episode differs the report keeps the archived one: the study as published. "
        "Another CPU or torch build can change the last bits of a logit, and one changed "
        "token changes the rest of the episode.",
    ]
    assert banner.details[-1] == KEPT_ARCHIVED
