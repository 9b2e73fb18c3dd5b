"""`--json PATH` of every command: checked before any work (a missing folder fails first,
not after the whole analysis was printed), written after; `-` is stdout."""

from __future__ import annotations

import sys
from pathlib import Path

from flatscore.errors import InputError

STDOUT = Path("-")


def check(path: Path | None, inputs: list[Path] | None = None) -> None:
    """Fail now (one line naming --json) if `path` cannot be written later."""
    if path is None or path == STDOUT:
        return
    if path.is_dir():
        raise InputError(f"{path} is a folder: expected a file path", field="--json")
    if not path.parent.is_dir():
        raise InputError(f"no folder {path.parent} to write {path.name} in", field="--json")
    if inputs and any(path.resolve() == p.resolve() for p in inputs):
        raise InputError(f"{path} is one of the inputs: it would be overwritten", field="--json")


def write(text: str, path: Path) -> bool:
    """Write `text` to `path` (stdout for `-`); True when a file was written."""
    if path == STDOUT:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return False
    try:
        path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write ({exc.strerror})", file=str(path)) from None
    return True
