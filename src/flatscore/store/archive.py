"""The run archive: a study's run files as xz chunks, append-only, for git (`flatscore archive`).

A long study runs in parts on any machine (`run --time-limit`); its run files
(`<runs>/<model>__<arm>.jsonl`) are the state. `pack` writes the episodes no chunk holds yet
as a new chunk `<archive>/<stem>.<NNN>.jsonl.xz`, never rewriting one, so each commit adds
only the new episodes. `unpack` merges every chunk back into the run files by episode id,
through `EpisodeWriter` (its lock, its partial-last-line rule, one atomic replace per file) and
byte for byte (`EpisodeWriter.write_line`): an archive unpacks to the runs as recorded, even
where the episode schema has since gained fields. Episodes already in a run file are kept,
so unpacking is idempotent and safe on a machine that has run episodes of its own.

A sequential run's held episodes (`<stem>.ahead`: run ahead for a look not yet read) travel
too, as one side file per run file, `<archive>/<stem>.ahead.jsonl.xz`. Unlike a chunk it is
rewritten by every pack, holding the held episodes the run file does not hold yet, and
removed when there are none (the run is complete); unpack merges it into `<stem>.ahead`. A
resumed run on another machine then writes or discards them as its looks decide instead of
running them again. They are never results: losing the side file costs only the time to
run them again.

Every chunk line is validated as an episode: a corrupt chunk or line is one `InputError`
naming the chunk, the line and the field.
"""

from __future__ import annotations

import lzma
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from flatscore.episode import Episode
from flatscore.errors import InputError
from flatscore.store.jsonl import (
    HELD_SUFFIX,
    EpisodeWriter,
    OutputLock,
    episode_lines,
    held_file,
    parse_episode_line,
    replace_whole,
)

CHUNK = re.compile(r"^(?P<stem>.+)\.(?P<n>\d{3,})\.jsonl\.xz$")
MAX_CHUNK_BYTES = 1 << 30
"""The most a chunk may unpack to (1 GiB; a chunk of the embedded study is ≤ 3 MB)."""
XZ_PRESET = 9


def held_chunk(archive: Path, stem: str) -> Path:
    """The side file of run file `stem`'s held episodes (not a chunk: `chunks` skips it)."""
    return archive / f"{stem}{HELD_SUFFIX}.jsonl.xz"


def _chunk_number(path: Path) -> int:
    match = CHUNK.match(path.name)
    assert match is not None
    return int(match["n"])


def chunks(archive: Path) -> dict[str, list[Path]]:
    """The archive's chunks per run-file stem, in order (other files are ignored); a gap in
    a stem's numbers (a chunk lost on the way) is an InputError."""
    if not archive.is_dir():
        raise InputError("not an archive folder (no such folder)", file=str(archive))
    found: dict[str, list[Path]] = {}
    for path in archive.iterdir():
        match = CHUNK.match(path.name)
        if match and path.is_file():
            found.setdefault(match["stem"], []).append(path)
    out = {stem: sorted(paths, key=_chunk_number) for stem, paths in sorted(found.items())}
    for stem, paths in out.items():  # pack numbers them 000, 001, ...: a gap is a lost chunk
        for expected, path in enumerate(paths):
            if _chunk_number(path) != expected:
                raise InputError(
                    f"chunk {stem}.{expected:03d}.jsonl.xz is missing (the next one is "
                    f"{path.name}): a run file's chunks are numbered from 000 without gaps",
                    file=str(archive),
                )
    return out


def read_chunk(path: Path) -> Iterator[tuple[Episode, str]]:
    """A chunk's episodes with their lines as stored."""
    decompressor = lzma.LZMADecompressor()
    try:
        data = decompressor.decompress(path.read_bytes(), max_length=MAX_CHUNK_BYTES)
    except lzma.LZMAError as exc:
        raise InputError(f"not an xz chunk ({exc})", file=str(path)) from None
    if not decompressor.eof:
        too_big = decompressor.needs_input is False
        reason = f"unpacks to more than {MAX_CHUNK_BYTES >> 20} MiB" if too_big else "truncated"
        raise InputError(f"not a complete xz chunk ({reason})", file=str(path))
    for line_no, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise InputError("not UTF-8", file=str(path), record=f"line {line_no}") from None
        yield parse_episode_line(text, file=str(path), line_no=line_no), text


def archived(paths: list[Path]) -> Iterator[tuple[Episode, str]]:
    """The episodes of one run file's chunks, chunk by chunk."""
    for path in paths:
        yield from read_chunk(path)


def run_files(runs: Path) -> list[Path]:
    """The run files (`*.jsonl`) of a run folder."""
    if not runs.is_dir():
        raise InputError("not a run folder (no such folder)", file=str(runs))
    files = sorted(p for p in runs.glob("*.jsonl") if p.is_file())
    if not files:
        raise InputError("not a run folder: no run files (*.jsonl) in it", file=str(runs))
    return files


def _write_chunk(path: Path, data: bytes) -> None:
    """A new chunk, whole or not at all (a temporary file renamed into place)."""
    if path.exists():
        raise InputError("chunk exists already; chunks are never rewritten", file=str(path))
    replace_whole(path, data)


def pack(runs: Path, archive: Path) -> dict[str, int]:
    """Write each run file's episodes that no chunk holds yet as a new chunk; returns the
    episodes packed per run file (by its stem). A partial last line (a run in progress, or
    a kill) is left for the next pack."""
    files = run_files(runs)
    archive.mkdir(parents=True, exist_ok=True)
    packed: dict[str, int] = {}
    for path in files:
        stem = path.stem
        lock = OutputLock(archive / stem)  # one packer per stem: chunk numbers stay unique
        lock.acquire()
        try:
            present = chunks(archive).get(stem, [])  # read under the lock
            have = {ep.episode_id for ep, _ in archived(present)}
            new: list[str] = []
            for episode, line in episode_lines(path):
                if episode.episode_id not in have:
                    have.add(episode.episode_id)
                    new.append(line)
            if new:
                numbers = [_chunk_number(p) for p in present]
                number = max(numbers, default=-1) + 1
                _write_chunk(archive / f"{stem}.{number:03d}.jsonl.xz", _xz(new))
            _pack_held(path, held_chunk(archive, stem), have)
        finally:
            lock.release()
        packed[stem] = len(new)
    return packed


def _xz(lines: list[str]) -> bytes:
    return lzma.compress("".join(ln + "\n" for ln in lines).encode(), preset=XZ_PRESET)


def _pack_held(run: Path, side: Path, recorded: set[str]) -> None:
    """Rewrite `side` with the run's held episodes not `recorded` in the run file or its
    chunks; remove it when none is left."""
    held = held_file(run)
    lines = []
    if held.is_file():
        lines = [line for ep, line in episode_lines(held) if ep.episode_id not in recorded]
    if not lines:
        side.unlink(missing_ok=True)
    elif not side.exists() or [text for _, text in read_chunk(side)] != lines:
        replace_whole(side, _xz(lines))  # unchanged, it is left alone: no git change


def unpack(archive: Path, runs: Path) -> dict[str, int]:
    """Merge every chunk into `<runs>/<stem>.jsonl` by episode id (episodes already there are
    kept); returns the episodes added per run file (by its stem)."""
    found = chunks(archive)
    if not found:
        raise InputError("not an archive: no chunks (<run>.<NNN>.jsonl.xz)", file=str(archive))
    if runs.exists() and not runs.is_dir():
        raise InputError("not a run folder (a file)", file=str(runs))
    added: dict[str, int] = {}
    for stem, paths in found.items():
        with EpisodeWriter(runs / f"{stem}.jsonl", atomic=True) as writer:
            added[stem] = sum(writer.write_line(ep, line) for ep, line in archived(paths))
        side = held_chunk(archive, stem)
        if side.is_file():
            with EpisodeWriter(held_file(runs / f"{stem}.jsonl"), atomic=True) as writer:
                for ep, line in read_chunk(side):
                    writer.write_line(ep, line)
    return added


class RunStatus(BaseModel):
    """One run file (model × arm): what the archive and the run folder hold of it."""

    stem: str
    chunks: int
    chunk_bytes: int
    archived: int
    local: int
    not_packed: int
    episodes: int
    per_domain_trial: dict[str, dict[int, int]]
    held: int = 0
    """Episodes run ahead for a look not yet read (the side file and `<stem>.ahead`), not
    counted in `episodes`."""
    planned: int | None = None
    planned_done: int | None = None


def status(
    archive: Path, runs: Path | None = None, planned: dict[str, set[str]] | None = None
) -> list[RunStatus]:
    """Per run file: chunks, episodes archived, in the run folder, not packed yet, and the
    union per domain and trial; with `planned` (episode ids per stem, from a study's plan)
    how many of the planned episodes are done."""
    found = chunks(archive)
    local_files = {p.stem: p for p in run_files(runs)} if runs is not None else {}
    out = []
    for stem in sorted(set(found) | set(local_files) | set(planned or {})):
        seen: dict[str, Episode] = {}
        archived_ids: set[str] = set()
        for ep, _ in archived(found.get(stem, [])):
            archived_ids.add(ep.episode_id)
            seen.setdefault(ep.episode_id, ep)
        local_ids: set[str] = set()
        if stem in local_files:
            for ep, _ in episode_lines(local_files[stem]):
                local_ids.add(ep.episode_id)
                seen.setdefault(ep.episode_id, ep)
        held_ids = {ep.episode_id for ep in _held(archive, runs, stem)} - set(seen)
        cells: Counter[tuple[str, int]] = Counter((e.domain, e.trial) for e in seen.values())
        per: dict[str, dict[int, int]] = {}
        for (domain, trial), n in sorted(cells.items()):
            per.setdefault(domain, {})[trial] = n
        want = (planned or {}).get(stem)
        out.append(
            RunStatus(
                stem=stem,
                chunks=len(found.get(stem, [])),
                chunk_bytes=sum(p.stat().st_size for p in found.get(stem, [])),
                archived=len(archived_ids),
                local=len(local_ids),
                not_packed=len(local_ids - archived_ids),
                episodes=len(seen),
                held=len(held_ids),
                per_domain_trial=per,
                planned=None if want is None else len(want),
                planned_done=None if want is None else len(want & set(seen)),
            )
        )
    return out


def _held(archive: Path, runs: Path | None, stem: str) -> Iterator[Episode]:
    side = held_chunk(archive, stem)
    if side.is_file():
        yield from (ep for ep, _ in read_chunk(side))
    local = held_file(runs / f"{stem}.jsonl") if runs is not None else None
    if local is not None and local.is_file():
        yield from (ep for ep, _ in episode_lines(local))
