"""Episode identity: an episode is (study, arm, model, domain, task, trial). Reading the same
file twice, or two files holding the same simulation, must not count it twice (pass^k up to
k = 4 on a three-trial run written twice is not a statistic)."""

from __future__ import annotations

from collections.abc import Iterable

from flatscore.episode import Episode
from flatscore.errors import InputError

EpisodeKey = tuple[str, str, str, str, str, int]


def episode_key(ep: Episode) -> EpisodeKey:
    return (ep.study, ep.arm, ep.model, ep.domain, ep.task_id, ep.trial)


def origin(ep: Episode, fallback: str) -> str:
    """Where an episode came from, for messages: its source file and record, else fallback."""
    if ep.source is not None:
        return f"{ep.source.file} (record {ep.source.index})"
    return fallback


def unique_episodes(
    labelled: Iterable[tuple[str, Episode]], dedupe: bool = False
) -> tuple[list[Episode], list[str]]:
    """Episodes with duplicates removed: `labelled` pairs each episode with where it was read
    (a file name). A duplicate is an InputError naming both places, or with `dedupe` the
    first is kept and a warning counts the rest."""
    seen: dict[EpisodeKey, str] = {}
    out: list[Episode] = []
    dropped = 0
    first_pair = ""
    for where, ep in labelled:
        key = episode_key(ep)
        here = origin(ep, where)
        if key in seen:
            if not dedupe:
                study, arm, model, domain, task, trial = key
                raise InputError(
                    f"duplicate episode (study {study}, arm {arm}, model {model}, domain "
                    f"{domain}, task {task}, trial {trial}) in {seen[key]} and in {here}; "
                    "pass --dedupe to keep the first"
                )
            dropped += 1
            first_pair = first_pair or f"{seen[key]} and {here}"
            continue
        seen[key] = here
        out.append(ep)
    warnings = (
        [f"--dedupe: {dropped} duplicate episode(s) left out (first: {first_pair})"]
        if dropped
        else []
    )
    return out, warnings
