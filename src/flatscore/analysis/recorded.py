"""A study's reading travels with its run files: `flatscore run` records the study file's
analysis settings (reference, margin, budgets, trials, …) in every episode's
`metadata.study_analysis`, and whether it stopped sequentially (`metadata.stopping`).
Reading the files back, every command fills the settings the user did not give from that
record and reads a sequential run sequentially unless asked for the fixed design
(`--fixed-design`), so `flatscore analyze RUNS` with no options reads a study as its own file
says, and every command reads it the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, TypeVar

from flatscore.analysis.notices import Notice
from flatscore.analysis.settings import POINTS, AnalysisSettings
from flatscore.episode import Episode
from flatscore.errors import InputError

RECORD_KEY = "study_analysis"
"""The episode metadata key that holds the study's analysis settings."""

RECORDED_FIELDS = (
    "reference",
    "tost_margin",
    "budgets",
    "trials",
    "tight_budget",
    "count",
    "correction",
    "bootstrap",
    "seed",
)
"""The settings a study file chooses for its reading (`tost_margin` recorded in points)."""


def study_record(settings: AnalysisSettings, comparisons: int | None = None) -> dict[str, Any]:
    """What `flatscore run` writes into each episode's metadata (under `RECORD_KEY`): the
    study's chosen settings, in the units a study file writes them, and how many comparisons
    (arms against their reference, over every cell) it decides together."""
    dumped = settings.model_dump(mode="json", context=POINTS, include=set(RECORDED_FIELDS))
    record = {k: v for k, v in dumped.items() if v is not None}
    if comparisons is not None:
        record["comparisons"] = comparisons
    return record


def recorded_comparisons(episodes: Iterable[Episode]) -> int | None:
    """The comparisons the episodes' study decides together (None: not recorded)."""
    found = [
        n
        for ep in episodes
        if isinstance(record := ep.metadata.get(RECORD_KEY), dict)
        and isinstance(n := record.get("comparisons"), int)
    ]
    return max(found) if found else None


def recorded_settings(episodes: Iterable[Episode]) -> tuple[dict[str, Any], list[Notice]]:
    """The settings the episodes' study recorded (only those every recording episode agrees
    on) and a notice per setting on which they disagree (its values as recorded, in order)."""
    seen: dict[str, list[Any]] = {}
    for ep in episodes:
        record = ep.metadata.get(RECORD_KEY)
        if not isinstance(record, dict):
            continue
        for key in RECORDED_FIELDS:
            if key in record and record[key] not in seen.setdefault(key, []):
                seen[key].append(record[key])
    agreed = {k: values[0] for k, values in seen.items() if len(values) == 1}
    notices = [
        Notice(kind="settings_differ", setting=k, values=tuple(v))
        for k, v in seen.items()
        if len(v) > 1
    ]
    return agreed, notices


def is_sequential_run(episodes: Iterable[Episode]) -> bool:
    """Whether any of the episodes was run with sequential stopping."""
    return any(ep.metadata.get("stopping") == "sequential" for ep in episodes)


Settings = TypeVar("Settings", bound=AnalysisSettings)


def fill_recorded(
    episodes: list[Episode], settings: Settings, leave_out: Collection[str] = ()
) -> tuple[Settings, list[Notice]]:
    """`settings` with each field the user did not give (not in its set fields) and the
    episodes' study recorded taken from the record (less `leave_out`); the fields whose
    value that changes are listed in `from_runs`. Returns them and a notice per setting
    the files disagree on."""
    recorded, notices = recorded_settings(episodes)
    given = settings.model_fields_set
    current = settings.model_dump(mode="json", context=POINTS, include=set(recorded))
    fill = {
        k: v
        for k, v in recorded.items()
        if k not in given and k not in leave_out and current.get(k) != v  # only what changes
    }
    if not fill:
        return settings, notices
    values = settings.model_dump(context=POINTS, include=set(fill)) | fill
    try:
        checked = AnalysisSettings.model_validate(values, context=POINTS)
    except ValueError as exc:
        raise InputError(f"the run files' recorded study settings are invalid: {exc}") from None
    update: dict[str, Any] = {k: getattr(checked, k) for k in fill}
    update["from_runs"] = sorted(fill)
    return settings.model_copy(update=update), notices


def reading_of(
    episodes: list[Episode], settings: AnalysisSettings
) -> tuple[AnalysisSettings, list[Notice]]:
    """The settings to read `episodes` with: those the user gave (the settings' set fields),
    the rest from the study the run files record; a sequential run read sequentially unless
    `settings.fixed_design`. Returns them and the notices to report (settings the files
    disagree on)."""
    if settings.fixed_design and settings.sequential:
        raise InputError(
            "--sequential and --fixed-design ask for opposite readings; give one",
            field="--fixed-design",
        )
    settings, notices = fill_recorded(episodes, settings)
    if not settings.fixed_design and not settings.sequential and is_sequential_run(episodes):
        settings = settings.model_copy(update={"sequential": True})
    return settings, notices
