"""Run a long study in chunks across sessions and machines (docs/embedded-study.md).

The study's run files (`<output>/runs/*.jsonl`) are the state. This script moves that state
through git as compressed, append-only chunks, so a study of many CPU hours can be committed
every hour and resumed on another machine:

    python scripts/embedded_study.py run --hours 1    # unpack, resume for ≤ 1 h, pack
    python scripts/embedded_study.py status           # episodes done per arm and domain
    python scripts/embedded_study.py pack             # the new episodes -> a new chunk
    python scripts/embedded_study.py unpack           # every chunk -> the run files
    python scripts/embedded_study.py interim          # analyse what is packed so far

- **Chunks**: `pack` writes the episodes that no chunk holds yet to
  `<archive>/<run-file-stem>.<NNN>.jsonl.xz` (xz, complete lines only, byte for byte), and
  never rewrites a chunk: each commit adds only the new episodes.
- **Unpack** merges every chunk into the run files by episode id (a partial last line left
  by a kill is dropped; episodes already there are kept): it is idempotent and safe on a
  machine that has run episodes of its own since.
- **Run** resumes the study in a child process, its jobs in **trial-major** order (every
  task of trial 1 in both domains, then trial 2, ...: the study's `order: trial`; the
  runner's default is domain by domain, so a study cut short would hold one domain only).
  Each arm starts its jobs in that order within its share of the slots, so a fast arm goes
  on to trial t + 1 while a slow one finishes trial t: no core waits for the slowest arm
  (stages of trials, used before 2026-12-01, left one idle for ~20 min at the end of each).
  The child is stopped (SIGINT, then SIGKILL) when the time is up; episode ids do not depend
  on the order or on `trials`, so any run resumes any other. When every episode is done it
  writes the report and copies `report.html`, `summary.md` and `analysis.json` next to the
  archive.
- **Interim** analyses the **balanced** part of the archive: the (domain, task, trial)
  episodes every arm has, so every arm's numbers cover the same episodes and every
  comparison pairs trial with trial.
"""

from __future__ import annotations

import json
import lzma
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from flatscore.episode import Episode
    from flatscore.study import Study

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "examples" / "embedded-study.yaml"
ARCHIVE = ROOT / "docs" / "embedded-study" / "runs"
INTERIM = ROOT / "docs" / "embedded-study" / "interim"
REPAIR_STUDY = ROOT / "examples" / "embedded-study-repair.yaml"
REPAIR_ARCHIVE = ROOT / "docs" / "embedded-study" / "repair" / "runs"
TABLES = Path(__file__).resolve().parent / "study_tables.py"
CHUNK = re.compile(r"^(?P<stem>.+)\.(?P<n>\d{3})\.jsonl\.xz$")
STOP_GRACE_S = 60.0

app = typer.Typer(add_completion=False, no_args_is_help=True)
StudyArg = Annotated[Path, typer.Option("--study", help="The study file.")]
ArchiveArg = Annotated[Path, typer.Option("--archive", help="Folder of the packed chunks.")]


# --------------------------------------------------------------------------- lines


def complete_lines(path: Path) -> list[bytes]:
    """The run file's finished episodes as raw lines (a partial last line is left out)."""
    if not path.exists():
        return []
    lines = path.read_bytes().splitlines(keepends=True)
    return [ln for ln in lines if ln.endswith(b"\n") and ln.strip()]


def episode_id(line: bytes) -> str:
    return str(json.loads(line)["episode_id"])


def chunks(archive: Path, stem: str) -> list[Path]:
    """The chunks of one run file, in order."""
    found = [p for p in archive.glob(f"{stem}.*.jsonl.xz") if _chunk_stem(p) == stem]
    return sorted(found)


def _chunk_stem(path: Path) -> str | None:
    match = CHUNK.match(path.name)
    return match["stem"] if match else None


def archived_lines(archive: Path, stem: str) -> list[bytes]:
    lines: list[bytes] = []
    for chunk in chunks(archive, stem):
        lines += lzma.decompress(chunk.read_bytes()).splitlines(keepends=True)
    return lines


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# --------------------------------------------------------------------------- pack / unpack


def load_study(path: Path) -> Study:
    from flatscore.study import load_study as load

    return load(path)


def plan_study(study: Study) -> Any:
    from flatscore.study_run import plan_study as plan

    return plan(study)


def run_study(study: Study, **options: Any) -> None:
    from flatscore.study_run import run_study as run

    run(study, **options)


def run_files(study: Study) -> list[Path]:
    return [run.path for run in plan_study(study).runs]


def pack(study: Study, archive: Path) -> dict[str, int]:
    """Write each run file's episodes that no chunk holds yet as a new chunk; returns the
    number of episodes packed per run file."""
    packed = {}
    for path in run_files(study):
        stem = path.stem
        have = {episode_id(ln) for ln in archived_lines(archive, stem)}
        new = [ln for ln in complete_lines(path) if episode_id(ln) not in have]
        if new:
            number = len(chunks(archive, stem))
            data = lzma.compress(b"".join(new), preset=9)
            _write_atomic(archive / f"{stem}.{number:03d}.jsonl.xz", data)
        packed[path.name] = len(new)
    return packed


def unpack(study: Study, archive: Path) -> dict[str, int]:
    """Merge every chunk into the run files (by episode id); returns the number of episodes
    added per run file."""
    added = {}
    for path in run_files(study):
        local = complete_lines(path)
        have = {episode_id(ln) for ln in local}
        missing = []
        for line in archived_lines(archive, path.stem):
            ident = episode_id(line)
            if ident not in have:
                missing.append(line)
                have.add(ident)
        if missing or (path.exists() and path.read_bytes() != b"".join(local)):
            _write_atomic(path, b"".join(local + missing))
        added[path.name] = len(missing)
    return added


# --------------------------------------------------------------------------- progress


def done_ids(study: Study, archive: Path) -> set[str]:
    """Episode ids finished here or in the archive."""
    ids: set[str] = set()
    for path in run_files(study):
        ids |= {episode_id(ln) for ln in complete_lines(path)}
        ids |= {episode_id(ln) for ln in archived_lines(archive, path.stem)}
    return ids


def progress(study: Study, archive: Path) -> tuple[Counter[tuple[str, str, int]], Counter[str]]:
    """Finished episodes per (run file, domain, trial), and planned episodes per run file
    (named by its stem, `<model>__<arm>`)."""
    done = done_ids(study, archive)
    per: Counter[tuple[str, str, int]] = Counter()
    planned: Counter[str] = Counter()
    for job in plan_study(study).jobs:
        run = Path(job.run).stem
        planned[run] += 1
        if job.episode_id in done:
            per[(run, job.domain, job.trial)] += 1
    return per, planned


def stage_remaining(study: Study, trials: int, done: set[str]) -> int:
    staged = study.model_copy(update={"trials": trials})
    return sum(job.episode_id not in done for job in plan_study(staged).jobs)


def _print_status(study: Study, archive: Path) -> int:
    per, planned = progress(study, archive)
    left = sum(planned.values()) - sum(per.values())
    typer.echo(f"{study.name}: {sum(per.values())} of {sum(planned.values())} episodes done")
    for run in planned:
        cells = []
        for domain in study.domains:
            counts = [per[(run, domain, t)] for t in range(study.trials)]
            cells.append(f"{domain} {sum(counts)} (per trial {'/'.join(map(str, counts))})")
        typer.echo(f"  {run}: " + "; ".join(cells))
    return left


# --------------------------------------------------------------------------- run


def _run_stage(study_path: Path, trials: int, seconds: float) -> str:
    """The study's first `trials` trials, resumed in a child process (`stage`): `done`,
    `time up` or `failed (exit N)`."""
    command = [sys.executable, str(Path(__file__).resolve()), "stage", str(trials)]
    child = subprocess.Popen([*command, "--study", str(study_path)])
    try:
        code = child.wait(timeout=max(seconds, 0.0))
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGINT)  # lets the runner close its files
        try:
            child.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            child.kill()  # a kill loses only the episodes in flight
            child.wait()
        return "time up"
    return "done" if code == 0 else f"failed (exit {code})"


def publish(study: Study, archive: Path) -> list[Path]:
    """Copy the report files next to the archive (docs/embedded-study/)."""
    copied = []
    for name in ("report.html", "summary.md", "analysis.json"):
        source = study.output_dir / name
        if source.exists():
            shutil.copyfile(source, archive.parent / name)
            copied.append(archive.parent / name)
    return copied


def run_chunk(study_path: Path, archive: Path, hours: float) -> int:
    """Unpack, run what is unfinished (trial-major) until `hours` are used, pack; the report
    when everything is done. Returns the episodes still to run."""
    study = load_study(study_path)
    deadline = time.monotonic() + hours * 3600
    added = sum(unpack(study, archive).values())
    typer.echo(f"unpacked {added} episodes from {archive}")
    left_s = deadline - time.monotonic()
    if stage_remaining(study, study.trials, done_ids(study, archive)) and left_s > 0:
        typer.echo(f"trials 1-{study.trials}, trial-major: running for up to {left_s / 60:.0f} min")
        outcome = _run_stage(study_path, study.trials, left_s)
        typer.echo(f"trials 1-{study.trials}: {outcome}")
    packed = sum(pack(study, archive).values())
    typer.echo(f"packed {packed} new episodes into {archive}")
    left = _print_status(study, archive)
    if left == 0:
        run_study(study, resume=True, progress=False)
        for path in publish(study, archive):
            typer.echo(f"report: {path}")
    return left


# --------------------------------------------------------------------------- commands


@app.command("run")
def run_command(
    hours: Annotated[float, typer.Option(min=0, help="Stop after this long.")] = 1.0,
    study: StudyArg = STUDY,
    archive: ArchiveArg = ARCHIVE,
) -> None:
    """Unpack, resume the study (trial-major) for up to HOURS, pack the new episodes."""
    run_chunk(study, archive, hours)


@app.command("stage", hidden=True)
def stage_command(trials: int, study: StudyArg = STUDY) -> None:
    """Resume the study's first `trials` trials in trial-major order (`order: trial`); the
    unit `run` starts and stops."""
    from flatscore.console import quiet_third_party
    from flatscore.models.shared import clear_backends

    quiet_third_party()  # before the model loads: no transformers warnings or weight bars
    staged = load_study(study).model_copy(update={"trials": trials, "order": "trial"})
    try:
        run_study(staged, resume=True, progress=False, report=False)
    finally:
        # Stop the engine threads before the interpreter exits: a SIGINT left them inside a
        # torch op at exit, which aborts ("terminate called without an active exception").
        clear_backends()


@app.command("pack")
def pack_command(study: StudyArg = STUDY, archive: ArchiveArg = ARCHIVE) -> None:
    """Write the episodes that no chunk holds yet as new xz chunks."""
    packed = pack(load_study(study), archive)
    typer.echo(f"packed {sum(packed.values())} new episodes into {archive}")


@app.command("unpack")
def unpack_command(study: StudyArg = STUDY, archive: ArchiveArg = ARCHIVE) -> None:
    """Merge every chunk into the study's run files (before `flatscore run ... --resume`)."""
    added = unpack(load_study(study), archive)
    typer.echo(f"unpacked {sum(added.values())} episodes from {archive}")


def archived_episodes(study: Study, archive: Path) -> list[list[Episode]]:
    """The packed episodes of each of the study's run files, in the plan's order."""
    from flatscore.episode import Episode

    return [
        [Episode.model_validate_json(line) for line in archived_lines(archive, path.stem)]
        for path in run_files(study)
    ]


def balanced(per_run: list[list[Episode]]) -> list[Episode]:
    """The episodes whose (domain, task, trial) every run file (arm) has: the largest part of
    a study cut short in which every arm covers the same episodes, trial paired with trial."""
    keys = [{(e.domain, e.task_id, e.trial) for e in run} for run in per_run]
    common = set.intersection(*keys) if keys else set()
    return [e for run in per_run for e in run if (e.domain, e.task_id, e.trial) in common]


def interim(study: Study, archive: Path, out: Path) -> tuple[int, int]:
    """The study as far as it is packed, analysed with its own analysis settings:
    `analysis.json`, `summary.md` and `tables.md` (scripts/study_tables.py) in `out`, all
    from the archive alone, so anyone with the checkout gets the same bytes. Only the
    balanced part (`balanced`) is analysed. Returns (episodes analysed, episodes packed)."""
    import importlib.util

    from flatscore.analysis.analyze import analyze
    from flatscore.report import analysis_json
    from flatscore.report.markdown import render_summary
    from flatscore.study_run import analysis_options

    per_run = archived_episodes(study, archive)
    episodes = balanced(per_run)
    result = analyze(episodes, analysis_options(study))
    spec = importlib.util.spec_from_file_location("study_tables", TABLES)
    assert spec is not None and spec.loader is not None
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in (
        ("analysis.json", analysis_json(result)),
        ("summary.md", render_summary(result)),
        ("tables.md", tables.render(result)),
    ):
        (out / name).write_text(text, encoding="utf-8", newline="\n")
    return len(episodes), sum(map(len, per_run))


@app.command("interim")
def interim_command(
    out: Annotated[Path, typer.Option("--out", help="Folder for the interim analysis.")] = INTERIM,
    study: StudyArg = STUDY,
    archive: ArchiveArg = ARCHIVE,
) -> None:
    """Analyse the packed episodes every arm has (the study so far, balanced) with the
    study's analysis settings."""
    analysed, packed = interim(load_study(study), archive, out)
    typer.echo(
        f"analysed {analysed} of {packed} packed episodes (those every arm has): "
        f"{out}/analysis.json, summary.md, tables.md"
    )


def repair_pairs(main_runs: list[list[Episode]], repair_runs: list[list[Episode]]) -> list[Episode]:
    """The repair pass with its counterpart in the main study: for every (domain, task,
    trial) that every repaired (model, arm) and every plain one behind them have, the repaired
    episodes and the main study's plain episodes of the same arms (same seed, same scripted
    user). The main study's other trials and tasks stay out: the effect is paired trial by
    trial, not the repair pass's one trial against the main study's four."""
    from flatscore.analysis.repair_effect import base_arm

    arms = sorted({(e.model, base_arm(e.arm)) for run in repair_runs for e in run})
    plain = [[e for run in main_runs for e in run if (e.model, e.arm) == arm] for arm in arms]
    return balanced([run for run in repair_runs if run] + plain)


@app.command("repair-effect")
def repair_effect_command(
    study: StudyArg = STUDY,
    archive: ArchiveArg = ARCHIVE,
    repair_study: Annotated[
        Path, typer.Option("--repair-study", help="The repair pass's study file.")
    ] = REPAIR_STUDY,
    repair_archive: Annotated[
        Path, typer.Option("--repair-archive", help="Folder of the repair pass's chunks.")
    ] = REPAIR_ARCHIVE,
) -> None:
    """The repair effect and its interaction with precision, from the packed chunks alone:
    the repair pass against the main study's same trials (`repair_pairs`), written as
    repair-effect.json and repair-effect.md next to the repair archive."""
    from flatscore.analysis.repair_effect import markdown_table, repair_effects
    from flatscore.study_run import analysis_options

    main = load_study(study)
    episodes = repair_pairs(
        archived_episodes(main, archive),
        archived_episodes(load_study(repair_study), repair_archive),
    )
    # the main study's analysis settings, as `analyze` takes them
    result = repair_effects(episodes, analysis_options(main))
    if not result.cells:
        from flatscore.errors import InputError

        raise InputError("no repaired episode has a counterpart in the main study yet")
    out = repair_archive.parent
    out.mkdir(parents=True, exist_ok=True)
    (out / "repair-effect.json").write_text(
        result.model_dump_json(indent=2) + "\n", encoding="utf-8", newline="\n"
    )
    warnings = result.warnings + [w for c in result.cells for w in c.warnings]
    table = markdown_table(result) + "".join(f"\n- warning: {w}" for w in warnings)
    (out / "repair-effect.md").write_text(table + "\n", encoding="utf-8", newline="\n")
    typer.echo(table)
    typer.echo(f"{len(episodes)} episodes: {out}/repair-effect.json, repair-effect.md")


@app.command("status")
def status_command(study: StudyArg = STUDY, archive: ArchiveArg = ARCHIVE) -> None:
    """Episodes done (here or in the archive) per arm, domain and trial."""
    _print_status(load_study(study), archive)


def main() -> None:
    """Bad input (a study file, a chunk) ends in one line on stderr and exit code 2; an
    interrupt (the driver stopping a stage) in one line and exit code 130."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        from flatscore.errors import InputError

        if not isinstance(exc, InputError):
            raise
        typer.echo(f"error: {exc.one_line()}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
