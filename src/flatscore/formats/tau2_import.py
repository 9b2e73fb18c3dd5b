"""`flatscore import tau2`: τ² result files → a canonical JSONL run.

Importing is idempotent: episodes whose id is already in the output run are not written
again, so an interrupted or repeated import never duplicates an episode. It is also atomic:
the output gains every imported episode or, when any input fails, none (the writer works on
a temporary copy and renames it into place), and it is locked against concurrent writers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from flatscore.episode import Episode
from flatscore.errors import InputError
from flatscore.formats.tau2 import inspect_tau2, read_tau2
from flatscore.store.jsonl import EpisodeWriter


class FileImport(BaseModel):
    """What one τ² file or directory contributed."""

    path: str
    format: str
    domain: str
    tool_source: str
    episodes: int = 0
    status: str | None = None
    """An Inspect log's eval status ('success', 'cancelled', 'error', ...); None for τ²."""


class ImportSummary(BaseModel):
    """What an import wrote and what the reader should know about it, as data (the command
    line words it: `flatscore.cli.commands_import`)."""

    out: str
    written: int = 0
    already_present: int = 0
    by_termination: dict[str, int] = Field(default_factory=dict)
    files: list[FileImport] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)  # one line per skipped simulation
    malformed_turns: int = 0  # agent turns `flatscore serve` marked malformed
    crashes: dict[str, int] = Field(default_factory=dict)
    """τ² crashes among the written episodes by termination reason (never hidden)."""
    inspect_errors: int = 0
    """Inspect samples that raised an error (kept as infrastructure_error episodes)."""


CRASH_REASONS = ("agent_error", "user_error", "unexpected_error")
"""The termination reasons τ² gives an episode it crashed in."""


def _file_record(path: Path, first: Episode | None) -> FileImport:
    """Describe a file from its first episode (no second read), or from its header."""
    if first is not None and first.source is not None:
        return FileImport(
            path=str(path),
            format=first.source.format,
            domain=first.domain,
            tool_source=first.tools.source,
        )
    run = inspect_tau2(path)
    return FileImport(
        path=str(path), format=run.format, domain=run.domain, tool_source=run.tools.source
    )


def import_tau2(
    paths: Iterable[str | Path],
    out: str | Path,
    *,
    arm: str,
    model: str | None = None,
    study: str | None = None,
    skip_invalid: bool = False,
    on_episode: Callable[[Episode], None] | None = None,
) -> ImportSummary:
    """Append the episodes of every τ² path to the run `out`; raises InputError on bad input
    unless `skip_invalid`, in which case the bad simulations are listed in the summary."""
    paths = list(paths)
    for path in map(Path, paths):
        if path.name.endswith((".jsonl", ".jsonl.xz")):
            raise InputError(
                "already flatscore's run format (a JSONL run): give it to flatscore analyze or "
                "report as it is; import tau2 reads τ²-bench results (.json files or result "
                "directories)",
                file=str(path),
            )
    summary = ImportSummary(out=str(out))
    reasons: Counter[str] = Counter()
    with EpisodeWriter(out, atomic=True) as writer:
        for path in map(Path, paths):
            record: FileImport | None = None
            skipped: list[InputError] = []
            for ep in read_tau2(
                path, arm=arm, model=model, study=study, skip_invalid=skip_invalid, skipped=skipped
            ):
                if record is None:
                    record = _file_record(path, ep)
                    summary.files.append(record)
                record.episodes += 1
                if not writer.write(ep):
                    summary.already_present += 1
                    continue
                summary.written += 1
                reasons[ep.termination_reason.value] += 1
                summary.malformed_turns += sum(m.malformed for m in ep.messages)
                if on_episode is not None:
                    on_episode(ep)
            if record is None:  # no valid simulation: describe the file from its header
                summary.files.append(_file_record(path, None))
            summary.skipped.extend(e.one_line() for e in skipped)
    summary.by_termination = dict(sorted(reasons.items()))
    summary.crashes = {r: n for r in CRASH_REASONS if (n := reasons[r])}
    return summary
