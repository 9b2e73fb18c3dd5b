"""The JSONL episode store: one episode per line, append-only, fsynced per episode.

A run killed mid-write leaves at most one partial last line; readers skip it (it is an
episode still being written) and writers cut it off before appending, so a resumed run never
loses or duplicates a finished episode. A complete last line that merely lacks its newline
(a file edited by hand) is read, and a writer terminates it instead of cutting it.

Hostile files cost one clear `InputError` (file, line, field): records are bounded in size
and nesting (`flatscore.store.inputs`), bytes must be UTF-8, special files are refused.

Every writer holds an exclusive lock on its output (`<file>.lock`, flock, holding the PID),
so a second writer of the same file stops with a one-line error naming the holder; and it
never writes an episode id the file already holds — except, for a run's writer
(`reruns=True`), an episode whose every record so far ended in `infrastructure_error`: that
was the machinery failing, not a result, so `--resume` runs it again and appends the new
attempt after the old one (the analysis uses the latest attempt: `flatscore.analysis.identity`).
An atomic writer (imports) works on a temporary copy and renames it over the file only when
everything succeeded.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from flatscore.episode import Episode, TerminationReason
from flatscore.errors import InputError, from_validation
from flatscore.store.inputs import (
    MAX_RECORD_BYTES,
    check_regular_file,
    error_text,
    parse_json_bytes,
)
from flatscore.store.redaction import scrub

LOCK_SUFFIX = ".lock"


def _decode(raw: bytes, *, file: str, line_no: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})",
            file=file,
            record=f"line {line_no}",
        ) from None


def _parse_json(text: str, *, file: str, line_no: int) -> Any:
    try:
        return parse_json_bytes(text)
    except ValueError as exc:
        raise InputError(
            f"not valid JSON ({error_text(exc)})", file=file, record=f"line {line_no}"
        ) from None


def parse_episode_line(line: str, *, file: str, line_no: int) -> Episode:
    """Parse one JSONL line, or raise an InputError naming the file, line and field."""
    data = _parse_json(line, file=file, line_no=line_no)
    try:
        return Episode.model_validate(data)
    except ValidationError as exc:
        record = f"line {line_no}"
        if isinstance(data, dict) and isinstance(data.get("episode_id"), str):
            record += f" (episode {data['episode_id'][:80]})"
        raise from_validation(
            exc, file=file, record=record, field=lambda loc: ".".join(map(str, loc)) or "(record)"
        ) from None


def _lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes without the newline, whether the line was terminated)."""
    check_regular_file(path)
    with path.open("rb") as fh:
        line_no = 0
        while raw := fh.readline(MAX_RECORD_BYTES + 1):
            line_no += 1
            terminated = raw.endswith(b"\n")
            if not terminated and len(raw) > MAX_RECORD_BYTES:
                raise InputError(
                    f"record larger than {MAX_RECORD_BYTES // (1024 * 1024)} MiB",
                    file=str(path),
                    record=f"line {line_no}",
                )
            yield line_no, raw.rstrip(b"\r\n") if terminated else raw, terminated


def _complete(raw: bytes) -> bool:
    """Whether an unterminated last line is a whole JSON document (not a write in progress)."""
    try:
        parse_json_bytes(raw)
    except ValueError:
        return False
    return True


def read_episodes(path: str | Path) -> Iterator[Episode]:
    """Stream episodes from a JSONL file. A partial last line (a write in progress) is
    skipped; a complete one without its final newline is read."""
    for episode, _line in episode_lines(path):
        yield episode


def episode_lines(path: str | Path) -> Iterator[tuple[Episode, str]]:
    """`read_episodes` with each episode's line as stored (stripped, no newline), for
    copying episodes byte for byte (the run archive, `flatscore.store.archive`)."""
    path = Path(path)
    file = str(path)
    for line_no, raw, terminated in _lines(path):
        if not raw.strip():
            continue
        if not terminated and not _complete(raw):
            return  # an episode still being written, or cut off by a kill
        text = _decode(raw, file=file, line_no=line_no).strip()
        yield parse_episode_line(text, file=file, line_no=line_no), text


HELD_SUFFIX = ".ahead"
"""Beside each run file `<stem>.jsonl`, `<stem>.ahead` keeps a sequential run's episodes held
for a look not yet read (`flatscore.run.look_ahead`); not `*.jsonl`, so no analysis or report
reads them as results."""


def held_file(run: str | Path) -> Path:
    """The held-episodes file beside run file `run`."""
    return Path(run).with_suffix(HELD_SUFFIX)


def replace_whole(path: Path, data: bytes) -> None:
    """Write `path` whole or not at all: a temporary file, fsynced, renamed into place."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    with tmp.open("rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def finished_episode_ids(path: str | Path) -> set[str]:
    """Ids a run file holds a result for, for `--resume`: an episode whose records all ended
    in `infrastructure_error` is not finished (resume runs it again)."""
    path = Path(path)
    if not path.exists():
        return set()
    return {ep.episode_id for ep in read_episodes(path) if not ep.is_infrastructure_error}


def _ids_in(path: Path) -> tuple[set[str], set[str]]:
    """Episode ids of a file's lines: all of them, and those with a record that did not end
    in an infrastructure error. Read leniently (a writer must not fail on a line the readers
    will report anyway)."""
    ids: set[str] = set()
    results: set[str] = set()
    if not path.exists():
        return ids, results
    for _line_no, raw, _terminated in _lines(path):
        try:
            data = parse_json_bytes(raw)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("episode_id"), str):
            ids.add(data["episode_id"])
            if data.get("termination_reason") != TerminationReason.INFRASTRUCTURE_ERROR.value:
                results.add(data["episode_id"])
    return ids, results


def _repair_tail(path: Path) -> None:
    """Make appends line-aligned: drop an unterminated partial last line (left by a killed
    writer), or terminate a complete one."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
        # Scan back for the last newline in blocks.
        pos = size
        block = 65536
        keep = 0
        while pos > 0:
            start = max(0, pos - block)
            fh.seek(start)
            chunk = fh.read(pos - start)
            idx = chunk.rfind(b"\n")
            if idx >= 0:
                keep = start + idx + 1
                break
            pos = start
        fh.seek(keep)
        tail = fh.read(MAX_RECORD_BYTES + 1)
        if len(tail) <= MAX_RECORD_BYTES and _complete(tail):
            fh.seek(0, os.SEEK_END)
            fh.write(b"\n")
        else:
            fh.truncate(keep)


class OutputLock:
    """An exclusive lock on an output file: `<file>.lock`, flock'ed, holding our PID.

    The kernel releases a flock when its holder dies (kill -9 included), so a stale lock
    file never blocks anyone; the PID in it is only there to name the holder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock_path = path.with_name(path.name + LOCK_SUFFIX)
        self._fd: int | None = None

    def acquire(self) -> None:
        while True:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
                os.close(fd)
                raise InputError(
                    f"is being written by another flatscore process (PID {holder}); "
                    "wait for it to finish or stop it",
                    file=str(self.path),
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.lock_path).st_ino
            except FileNotFoundError:
                same = False
            if same:  # not a lock file its previous holder unlinked meanwhile
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.lock_path)
        os.close(self._fd)
        self._fd = None


class EpisodeWriter:
    """Appends episodes to a JSONL file, flushing and fsyncing after each one.

    Holds the file's `OutputLock` while open, skips episodes whose id the file already
    holds (`write` returns False), and scrubs secrets from every line. With `reruns=True`
    (a run's writer) an id whose records all ended in `infrastructure_error` is not held:
    its new attempt is appended. With `atomic=True` the episodes go to a temporary copy that
    replaces the file on a clean exit (`commit`) and is deleted when the block raises: the
    file gains all the episodes or none."""

    def __init__(self, path: str | Path, *, atomic: bool = False, reruns: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            check_regular_file(self.path)
        self._lock = OutputLock(self.path)
        self._lock.acquire()
        try:
            _repair_tail(self.path)
            ids, results = _ids_in(self.path)
            self.reruns = reruns
            self.present: set[str] = results if reruns else ids
            """The ids `write` refuses."""
            self.attempted: set[str] = ids
            """Every id the file held when opened (results and failed attempts)."""
            self.atomic = atomic
            self._target = self.path
            if atomic:
                self._target = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
                if self.path.exists():
                    shutil.copyfile(self.path, self._target)
                else:
                    self._target.touch()
            self._fh = self._target.open("a", encoding="utf-8")
        except BaseException:
            self._lock.release()
            raise

    def write(self, episode: Episode) -> bool:
        """Append one episode; False (nothing written) when its id is already in the file."""
        if episode.episode_id in self.present:
            return False
        self._fh.write(scrub(episode.model_dump_json(exclude_none=False)) + "\n")
        if not self.atomic:  # an atomic copy is synced once, before it replaces the file
            self._fh.flush()
            os.fsync(self._fh.fileno())
        if not (self.reruns and episode.is_infrastructure_error):
            self.present.add(episode.episode_id)
        return True

    def write_line(self, episode: Episode, line: str) -> bool:
        """Append `episode` as the stored `line` it was read from (`episode_lines`), not
        re-serialised: an archived episode keeps its bytes even where the schema has since
        gained fields. Otherwise as `write`."""
        if episode.episode_id in self.present:
            return False
        self._fh.write(scrub(line) + "\n")
        if not self.atomic:
            self._fh.flush()
            os.fsync(self._fh.fileno())
        self.present.add(episode.episode_id)
        return True

    def write_all(self, episodes: Iterable[Episode]) -> int:
        return sum(self.write(ep) for ep in episodes)

    def commit(self) -> None:
        """Atomic mode: put the temporary copy in place of the file. Then close."""
        if self.atomic and not self._fh.closed:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            os.replace(self._target, self.path)
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        self.close()

    def abort(self) -> None:
        """Atomic mode: discard everything written since the writer opened. Then close."""
        if self.atomic and not self._fh.closed:
            self._fh.close()
            self._target.unlink(missing_ok=True)
        self.close()

    def close(self) -> None:
        if not self._fh.closed:
            if self.atomic:
                self.abort()
                return
            self._fh.close()
        self._lock.release()

    def __enter__(self) -> EpisodeWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


class RunCounts(BaseModel):
    """What a resumable run did: episodes planned, skipped (in the file already), written,
    succeeded, its seconds and termination reasons; each driver's outcome extends it."""

    planned: int
    skipped: int
    written: int
    succeeded: int
    seconds: float
    terminations: dict[str, int]
    rerun: int = 0
    """Of `written`: episodes run again because their last attempt was an infrastructure
    error."""
