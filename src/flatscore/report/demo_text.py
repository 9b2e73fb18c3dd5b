"""`flatscore demo`'s words, both forms: the studies' titles, the lines it prints as it runs
(resuming, running, interrupted) and the banner on top of the reproduced study's report
(`reproduction.Banner`). The run keeps the facts (arms, tasks, paths, counts, what the
comparison found: `run.demo`, `run.reproduce`); these are its words, so the demo's report
and its terminal read the same from one place."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from flatscore.report.reproduction import Banner, divergence_text, reproduced_count
from flatscore.store.compare import Reproduction

NO_VERIFY_HEADLINE = "not compared on this machine (--no-verify)"
READING_ARCHIVE = "reading the whole study's archive for its report …"
KEPT_ARCHIVED = (
    "Where an episode differs the report keeps the archived one: the study as "
    "published. Another CPU or torch build can change the last bits of a logit, "
    "and one changed token changes the rest of the episode."
)


def demo_title(arms: tuple[str, ...], compute: str, repair: str) -> str:
    """`flatscore demo --fresh`'s report title: the model, the arms, and the compute and
    repair settings where they are not the defaults (fp32, off)."""
    return (
        f"flatscore demo · embedded SmolLM2-135M · {', '.join(arms)}"
        + ("" if compute == "fp32" else f" · {compute} compute")
        + ("" if repair == "off" else f" · repair {repair}")
    )


def resuming_demo(output: Path, runs: Path) -> str:
    """A rerun goes on from the run files it finds, and says how to start over instead."""
    return f"resuming the demo in {output} (delete {runs} to start over)"


def interrupted(runs: Path) -> str:
    """The line a demo stopped by Ctrl-C ends with (its finished episodes are in `runs`)."""
    return f"interrupted: run the demo again to resume it from {runs}"


def slice_title(study_title: str) -> str:
    """The title of study v2 narrowed to the demo's slice."""
    return f"{study_title} · the demo's live slice"


def reproduced_title(study_title: str) -> str:
    """The title of the whole study's report that the demo writes."""
    return f"{study_title} · reproduced by flatscore demo"


def resuming_slice(runs: Path) -> str:
    """As `resuming_demo`, for study v2's slice."""
    return f"resuming the demo's slice in {runs} (delete it to start over)"


def running_slice(
    episodes: int, arms: tuple[str, ...], tasks: int, trial: int, archive: Path
) -> str:
    """What is about to run live and what it is compared with (`trial` counted from 1)."""
    return (
        f"running study v2's slice live: {episodes} episodes "
        f"({', '.join(arms)}; {tasks} tasks, trial {trial}), then comparing "
        f"each with {archive}"
    )


class LiveSlice(BaseModel):
    """What the demo ran live and what comparing it with the archive found: the banner's
    facts, worded by `demo_banner`."""

    study_file: Path
    """The study file the slice was read from."""
    adapter_sha256: str
    arms: list[str]
    """In the order they ran."""
    tasks: dict[str, int]
    """Domain → tasks run."""
    trials: list[int]
    """Counted from 1."""
    reproduction: Reproduction
    """Each live episode against the archived one (the count, the first difference, what
    the archive lacks)."""


def slice_text(arms: list[str], tasks: dict[str, int], trials: list[int]) -> str:
    """ "ref, ref-planted, int4-awq × 9 retail and 8 telecom tasks, trial 1"."""
    per_domain = " and ".join(f"{n} {d}" for d, n in sorted(tasks.items()))
    return f"{', '.join(arms)} × {per_domain} tasks, trial {', '.join(map(str, trials))}"


def whole_study(episodes: int, trials: str, archive: Path) -> str:
    """Which episodes the report's verdicts read: the whole archive, on the study's trials."""
    return (
        f"The verdicts below are the whole study's: its {episodes:,} archived episodes "
        f"(trials {trials} of every arm and domain, {archive}), read with the "
        "study's statistics and its sequential replay (after how many tasks each comparison "
        "would have been decided)."
    )


def demo_banner(whole: str, live: LiveSlice | None) -> Banner:
    """The reproduced report's first screen: the reproduced count, what ran, the first
    divergence; `whole` (`whole_study`) says what the verdicts read. Without `live`
    (--no-verify) nothing was compared."""
    if live is None:
        return Banner(headline=NO_VERIFY_HEADLINE, exact=None, about="No episode was run: " + whole)
    about = (
        f"Run live on this machine with study v2's own file ({live.study_file}: model, "
        f"adapter sha256 {live.adapter_sha256[:12]}…, arms, seeds, sampling, budget): "
        f"{slice_text(live.arms, live.tasks, live.trials)}; each episode compared with the "
        "archived one, message by message. " + whole
    )
    r = live.reproduction
    details = [] if r.first_divergence is None else [divergence_text(r.first_divergence)]
    if r.not_archived:
        details.append(f"not in the archive: {', '.join(r.not_archived)}")
    if not r.exact:
        details.append(KEPT_ARCHIVED)
    return Banner(headline=reproduced_count(r), exact=r.exact, about=about, details=details)
