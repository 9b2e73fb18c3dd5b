"""Episode identity: an episode is (study, arm, model, domain, task, trial). Reading the same
file twice, or two files holding the same simulation, must not count it twice (pass^k up to
k = 4 on a three-trial run written twice is not a statistic).

**Attempts.** An episode that ended in `infrastructure_error` is the machinery failing, not a
result: `--resume` runs it again and appends the new attempt to the same run file
(`flatscore.store.jsonl`). The records of one key, in input order (line order within a file, files
in the order given), are its attempts; an attempt is *superseded* when a later attempt of the
same key follows it and it ended in `infrastructure_error`. The analysis uses the latest
attempt (it is itself excluded from rates when it too ended in an infrastructure error);
any other repetition of a key is a duplicate.
"""

from __future__ import annotations

from collections.abc import Iterable

from flatscore.analysis.notices import Notice
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
) -> tuple[list[Episode], list[Notice]]:
    """Episodes with superseded attempts and duplicates removed: `labelled` pairs each
    episode with the file it was read from (None when unknown). An infrastructure error
    followed by a later attempt of its key is replaced by that attempt (a notice counts
    them); a duplicate is an InputError naming both places, or with `dedupe` the first is
    kept and a notice counts the rest (and names the first pair's places)."""
    seen: dict[EpisodeKey, str] = {}
    kept: dict[EpisodeKey, Episode] = {}  # insertion order: where each key first appeared
    dropped = superseded = 0
    first_pair: tuple[str, ...] = ()
    for where, ep in labelled:
        key = episode_key(ep)
        here = origin(ep, where)
        if key in kept and kept[key].is_infrastructure_error:
            superseded += 1
            seen[key], kept[key] = here, ep
            continue
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
            first_pair = first_pair or (seen[key], here)
            continue
        seen[key], kept[key] = here, ep
    notices = []
    if superseded:
        notices.append(Notice(kind="attempts_superseded", count=superseded))
    if dropped:
        notices.append(Notice(kind="duplicates_left_out", count=dropped, places=first_pair))
    return list(kept.values()), notices
