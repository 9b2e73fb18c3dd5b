"""The JSONL episode store: one episode per line, append-only, fsynced per episode.

A run killed mid-write leaves at most one partial last line; readers skip it (it is an
episode still being written) and writers cut it off before appending, so a resumed run never
loses or duplicates a finished episode.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType

from pydantic import ValidationError

from flatscore.episode import Episode
from flatscore.errors import InputError, from_validation


def parse_episode_line(line: str, *, file: str, line_no: int) -> Episode:
    """Parse one JSONL line, or raise an InputError naming the file, line and field."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"not valid JSON ({exc.msg})", file=file, record=f"line {line_no}"
        ) from None
    try:
        return Episode.model_validate(data)
    except ValidationError as exc:
        record = f"line {line_no}"
        if isinstance(data, dict) and "episode_id" in data:
            record += f" (episode {data['episode_id']})"
        raise from_validation(
            exc, file=file, record=record, field=lambda loc: ".".join(map(str, loc)) or "(record)"
        ) from None


def read_episodes(path: str | Path) -> Iterator[Episode]:
    """Stream episodes from a JSONL file. A partial last line (a write in progress) is skipped."""
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", file=str(path))
    with path.open("rb") as fh:
        line_no = 0
        for raw in fh:
            line_no += 1
            if not raw.endswith(b"\n"):
                return  # an episode still being written, or cut off by a kill
            text = raw.decode("utf-8").strip()
            if not text:
                continue
            yield parse_episode_line(text, file=str(path), line_no=line_no)


def finished_episode_ids(path: str | Path) -> set[str]:
    """Ids already in a run file, for `--resume`."""
    path = Path(path)
    if not path.exists():
        return set()
    return {ep.episode_id for ep in read_episodes(path)}


def _cut_partial_tail(path: Path) -> None:
    """Drop an unterminated last line (left by a killed writer) so appends stay line-aligned."""
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
        fh.truncate(keep)


class EpisodeWriter:
    """Appends episodes to a JSONL file, flushing and fsyncing after each one."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _cut_partial_tail(self.path)
        self._fh = self.path.open("a", encoding="utf-8")

    def write(self, episode: Episode) -> None:
        self._fh.write(episode.model_dump_json(exclude_none=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def write_all(self, episodes: Iterable[Episode]) -> int:
        n = 0
        for ep in episodes:
            self.write(ep)
            n += 1
        return n

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> EpisodeWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
