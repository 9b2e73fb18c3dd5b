"""`flatscore import inspect`: Inspect AI logs → a canonical JSONL run.

The same guarantees as the τ² import (`tau2_import`): idempotent (an episode whose id the
run already holds is not written again, and is counted), atomic (the run gains every
episode of every log or, when any log fails, none) and locked against concurrent writers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Unpack

from flatscore.episode import Episode
from flatscore.formats.inspect_log import InspectOptions, inspect_log_info, read_inspect
from flatscore.formats.tau2_import import FileImport, ImportSummary
from flatscore.store.jsonl import EpisodeWriter


def import_inspect(
    paths: Iterable[str | Path],
    out: str | Path,
    *,
    on_episode: Callable[[Episode], None] | None = None,
    **options: Unpack[InspectOptions],
) -> ImportSummary:
    """Append the episodes of every Inspect log to the run `out`, read with `options`
    (InputError on bad input)."""
    summary = ImportSummary(out=str(out))
    reasons: Counter[str] = Counter()
    with EpisodeWriter(out, atomic=True) as writer:
        for path in map(Path, paths):
            info = inspect_log_info(path)
            record = FileImport(
                path=str(path),
                format=info.format,
                domain=options.get("domain") or info.task,
                tool_source="-",
                status=info.status,
            )
            summary.files.append(record)
            for ep in read_inspect(path, **options):
                record.episodes += 1
                record.tool_source = ep.tools.source
                if not writer.write(ep):
                    summary.already_present += 1
                    continue
                summary.written += 1
                reasons[ep.termination_reason.value] += 1
                summary.inspect_errors += "inspect_error" in ep.metadata
                if on_episode is not None:
                    on_episode(ep)
    summary.by_termination = dict(sorted(reasons.items()))
    return summary
