"""`flatscore archive pack|unpack|status`: a study's run files as append-only xz chunks
(`flatscore.store.archive`), so a long study can be committed and resumed part by part."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flatscore.cli import legacy
from flatscore.cli.app import app, console

archive_app = typer.Typer(
    help="Move a study's run files through git as append-only xz chunks.",
    no_args_is_help=True,
)
app.add_typer(archive_app, name="archive")

Runs = Annotated[Path, typer.Argument(help="The run folder (the study's <output>/runs).")]
Archive = Annotated[Path, typer.Argument(help="The folder of chunks (<run>.<NNN>.jsonl.xz).")]


def _holds_runs(path: Path) -> bool:
    """A run folder (its *.jsonl) rather than a folder of chunks (*.jsonl.xz)."""
    return path.is_dir() and any(path.glob("*.jsonl")) and not any(path.glob("*.jsonl.xz"))


@archive_app.command("pack")
def pack_command(archive: Archive, runs: Runs) -> None:
    """Write the episodes no chunk holds yet as new chunks; none is ever rewritten.

    ARCHIVE comes first, as in unpack and status (the old order, RUNS ARCHIVE, is recognised
    by what the folders hold and accepted until the next release, with a warning)."""
    from flatscore.cli.app import err_console
    from flatscore.store.archive import pack

    if _holds_runs(archive) and not _holds_runs(runs):
        err_console.print(
            "warning: archive pack RUNS ARCHIVE is now archive pack ARCHIVE RUNS "
            f"({legacy.NOTE}); read as pack {runs} {archive}",
            style="yellow",
            highlight=False,
        )
        archive, runs = runs, archive
    packed = pack(runs, archive)
    console.print(f"packed {sum(packed.values())} new episodes into {archive}", highlight=False)


@archive_app.command("unpack")
def unpack_command(archive: Archive, runs: Runs) -> None:
    """Merge every chunk into the run files by episode id, keeping what is there."""
    from flatscore.store.archive import unpack

    added = unpack(archive, runs)
    console.print(f"unpacked {sum(added.values())} episodes into {runs}", highlight=False)


@archive_app.command("status")
def status_command(
    archive: Archive,
    runs: Annotated[
        Path | None, typer.Argument(help="The run folder too (episodes not packed yet).")
    ] = None,
    study: Annotated[
        Path | None,
        typer.Option(
            "--study-file",
            "--study",
            help="The study file: how many planned episodes are done "
            f"{legacy.deprecated('--study')}.",
        ),
    ] = None,
) -> None:
    """Episodes per run file, domain and trial: archived, in the run folder, not packed."""
    from flatscore.store.archive import status

    planned: dict[str, set[str]] | None = None
    name = str(archive)
    if study is not None:
        from flatscore.run.driver import plan_study
        from flatscore.run.study import load_study

        loaded = load_study(study)
        name = loaded.name
        planned = {}
        for job in plan_study(loaded).jobs:
            planned.setdefault(Path(job.run).stem, set()).add(job.episode_id)
    rows = status(archive, runs, planned)
    episodes = sum(r.episodes for r in rows)
    size = sum(r.chunk_bytes for r in rows) / 1e6
    head = f"{name}: {episodes} episodes; {sum(r.chunks for r in rows)} chunks, {size:.1f} MB"
    if planned is not None:
        done = sum(r.planned_done or 0 for r in rows)
        head += f"; {done} of {sum(r.planned or 0 for r in rows)} planned episodes done"
    console.print(head, highlight=False, soft_wrap=True)
    for row in rows:
        cells = [
            f"{domain} {sum(trials.values())} (per trial "
            f"{'/'.join(str(trials[t]) for t in sorted(trials))})"
            for domain, trials in row.per_domain_trial.items()
        ]
        line = f"  {row.stem}: {row.archived} archived in {row.chunks} chunks"
        if runs is not None:
            line += f", {row.not_packed} not packed yet"
        if row.planned is not None:
            line += f", {row.planned_done} of {row.planned} planned"
        if row.held:
            line += f", {row.held} held for a later look"
        console.print(line + ("; " if cells else "") + "; ".join(cells), highlight=False)
