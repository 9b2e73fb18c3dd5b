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


def origin(ep: Episode, read_from: str | None = None) -> str:
    """Where an episode was read (`read_from`, a file), with the record it was imported from
    when it carries one; without a file, the source record alone."""
    src = f"{ep.source.file} (record {ep.source.index})" if ep.source is not None else None
    if read_from is None:
        return src or "the input"
    if src is None or ep.source is None or ep.source.file == read_from:
        return src or read_from
    return f"{read_from} (imported from {src})"


def unique_episodes(
    labelled: Iterable[tuple[str | None, Episode]], dedupe: bool = False
) -> tuple[list[Episode], list[str]]:
    """Episodes with duplicates removed: `labelled` pairs each episode with the file it was
    read from (None when unknown). A duplicate is an InputError naming both places, or with
    `dedupe` the first is kept and a warning counts the rest."""
    seen: dict[EpisodeKey, str] = {}
    out: list[Episode] = []
    dropped = 0
    first_pair = ""
    for where, ep in labelled:
        key = episode_key(ep)
        here = origin(ep, where)
        if key in seen and here == seen[key] and where is not None:
            here += " again"
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
