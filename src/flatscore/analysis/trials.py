"""The trials analysed (`--trial-range 1-2`): a committed analysis pinned to the trials it read.

A study that keeps running after its findings were read (a third trial begun in some arms)
changes what `--balanced` keeps; naming the trials makes the documented command give the
committed bytes whatever the archive holds later. Trials are counted from 1 as people count
them: `1-2` is the episodes' `trial` 0 and 1 (the field counts from 0, like τ²'s).
"""

from __future__ import annotations

from collections.abc import Sequence

from flatscore.analysis.budget import parse_ranges
from flatscore.defaults import MAX_BUDGET
from flatscore.episode import Episode


def parse_trials(text: str) -> list[int]:
    """'1-2', '1,3' or '1-2,4' → sorted distinct trial numbers counted from 1 (bad text:
    InputError naming the setting, `trials`)."""

    def problem(part: str, bounds: tuple[int, int] | None) -> str | None:
        if bounds is not None and bounds[1] < bounds[0]:
            return f"bad trial range {part!r}: end before start"
        if bounds is None or bounds[0] < 1 or bounds[1] > MAX_BUDGET:
            return f"bad trial list {text!r}: expected trials counted from 1, e.g. 1-2 or 1,3"
        return None

    return parse_ranges(text, problem, "trials")


def trials_text(trials: Sequence[int]) -> str:
    """[1, 2, 4] → '1-2,4' (the flag's own form)."""
    runs: list[list[int]] = []
    for t in sorted(trials):
        if runs and t == runs[-1][-1] + 1:
            runs[-1].append(t)
        else:
            runs.append([t])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def pick_trials(episodes: Sequence[Episode], trials: Sequence[int] | None) -> list[Episode]:
    """The episodes of the named trials (counted from 1), in the order given; all of them
    when `trials` is None."""
    if trials is None:
        return list(episodes)
    wanted = {t - 1 for t in trials}
    return [ep for ep in episodes if ep.trial in wanted]
