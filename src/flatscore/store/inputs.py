"""Guards for reading files nobody vouches for: regular files only, bounded JSON.

Every reader of user-supplied files (the JSONL store, the τ² importer) opens them through
here, so a hostile or damaged file costs at most one clear `InputError`: never a hang on a
FIFO, a traceback on a directory, or unbounded memory on 100,000 levels of `[[[…]]]`.

The depth guard works on raw bytes as they stream in, in C-speed chunks (escapes dropped
by `re`, everything but quotes and brackets by `bytes.translate`, the running depth by
numpy), so streaming parsers behind it never see input nested deeper than `MAX_DEPTH`.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import ijson
import numpy as np
import pydantic_core

from flatscore.errors import InputError

MAX_DEPTH = 100
"""Deepest JSON nesting accepted (a real τ² file nests ~12 levels)."""

MAX_RECORD_BYTES = 64 * 1024 * 1024
"""Largest single JSONL record (one episode) or directory-format simulation file."""

_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_KEEP = b'"[]{}'
_DROP = bytes(b for b in range(256) if b not in _KEEP)
_QUOTE, _OPENS, _CLOSES = ord('"'), (ord("["), ord("{")), (ord("]"), ord("}"))


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def check_regular_file(path: Path) -> None:
    """Raise an InputError unless `path` is an existing regular file (symlinks followed)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError("file not found", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", file=str(path)) from None
    if not stat.S_ISREG(mode):
        raise InputError(f"is {_kind(mode)}, not a file", file=str(path))


def open_regular(path: Path) -> BinaryIO:
    """Open a regular file for binary reading, refusing directories, FIFOs and devices."""
    check_regular_file(path)
    try:
        return path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", file=str(path)) from None


class TooDeep(ValueError):
    """JSON nested deeper than the limit, somewhere in bytes `start`..`end` of the input."""

    def __init__(self, start: int, end: int, limit: int) -> None:
        where = f" (within bytes {start:,}–{end:,})" if end - start > 1 else ""
        super().__init__(f"JSON nested deeper than {limit} levels{where}")
        self.start, self.end = start, end


class DepthGuard:
    """Tracks JSON nesting depth across chunks of raw bytes; raises TooDeep past `limit`."""

    def __init__(self, limit: int = MAX_DEPTH) -> None:
        self.limit = limit
        self.depth = 0
        self.in_string = False
        self.escape_pending = False
        self.offset = 0

    def feed(self, chunk: bytes) -> None:
        start = self.offset
        self.offset += len(chunk)
        if self.escape_pending and chunk:
            chunk, self.escape_pending = chunk[1:], False
        if b"\\" in chunk:
            chunk = _ESCAPE.sub(b"", chunk)  # an escape and the byte it escapes
            if chunk.endswith(b"\\"):  # an escape split across chunks
                chunk, self.escape_pending = chunk[:-1], True
        kept = chunk.translate(None, _DROP)
        if not kept:
            return
        a = np.frombuffer(kept, dtype=np.uint8)
        quotes = a == _QUOTE
        inside = (np.cumsum(quotes) + int(self.in_string)) & 1
        outside = inside == 0
        step = ((a == _OPENS[0]) | (a == _OPENS[1])) & outside
        step = step.astype(np.int64) - (((a == _CLOSES[0]) | (a == _CLOSES[1])) & outside)
        running = self.depth + np.cumsum(step)
        if int(running.max()) > self.limit:
            raise TooDeep(start, self.offset, self.limit)
        self.depth = int(running[-1])
        self.in_string = bool((int(self.in_string) + int(quotes.sum())) & 1)


class GuardedReader:
    """A binary file wrapper that runs every byte read through a DepthGuard (for ijson)."""

    def __init__(self, fh: BinaryIO, limit: int = MAX_DEPTH) -> None:
        self._fh = fh
        self.guard = DepthGuard(limit)

    def read(self, n: int = -1) -> bytes:
        data = self._fh.read(n)
        self.guard.feed(data)
        return data

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> GuardedReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_json(path: Path, limit: int = MAX_DEPTH) -> GuardedReader:
    """A regular file opened for streaming JSON with bounded depth."""
    return GuardedReader(open_regular(path), limit)


def parse_json_bytes(data: bytes | str) -> Any:
    """One JSON document, bounded: nesting ≤ MAX_DEPTH, numbers in range, valid UTF-8.

    Raises ValueError (TooDeep included) with a short message on anything else."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    DepthGuard().feed(raw)
    return pydantic_core.from_json(raw)


def read_bounded(path: Path, limit: int = MAX_RECORD_BYTES) -> bytes:
    """A whole small file (a directory-format simulation), refusing special files and
    files over `limit` bytes."""
    with open_regular(path) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"larger than {limit // (1024 * 1024)} MiB", file=str(path))
    return data


def error_text(exc: BaseException) -> str:
    """A one-line description of a JSON failure, without parser caret drawings."""
    text = str(exc).split("(right here)")[0]
    text = " ".join(text.split())
    return text[:200]


JSON_ERRORS = (ijson.JSONError, ValueError)
"""What streaming a damaged file can raise: syntax errors, bytes that are not UTF-8
(UnicodeDecodeError), numbers out of range and nesting past the limit (ValueError)."""


def json_error(exc: Exception) -> str:
    """A JSON failure as the one line an `InputError` says."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 (byte 0x{exc.object[exc.start]:02x})"
    text = error_text(exc)  # drops yajl's caret drawing
    return f"invalid or truncated JSON ({text})" if text else "invalid or truncated JSON"


def json_array(
    path: Path, field: str, record: Callable[[int], str], *, required: bool = False
) -> Iterator[Any]:
    """The items of the top-level array `field` of a JSON file, one at a time (ijson), for
    files too large to load. Bad input raises one `InputError` naming the file: a JSON error
    also names `record(index)` of the item it cut off; a `field` that is not an array says
    so, and a missing one too when `required` (else it gives no items)."""
    index = 0
    with open_json(path) as fh:
        try:
            for data in ijson.items(fh, f"{field}.item", use_float=True):
                yield data
                index += 1
        except TooDeep as exc:  # the guard reads ahead of the item being built
            raise InputError(str(exc), file=str(path)) from None
        except JSON_ERRORS as exc:
            raise InputError(json_error(exc), file=str(path), record=record(index)) from None
    if index == 0:  # tell "no items" apart from a missing or non-array field
        with open_json(path) as fh:
            value = next(ijson.items(fh, field, use_float=True), None)
        if value is None and required:
            raise InputError("missing field", file=str(path), field=field)
        if value is not None and not isinstance(value, list):
            raise InputError("must be a list", file=str(path), field=field)


__all__ = [
    "MAX_DEPTH",
    "MAX_RECORD_BYTES",
    "DepthGuard",
    "GuardedReader",
    "TooDeep",
    "check_regular_file",
    "error_text",
    "json_array",
    "json_error",
    "open_json",
    "open_regular",
    "parse_json_bytes",
    "read_bounded",
]
