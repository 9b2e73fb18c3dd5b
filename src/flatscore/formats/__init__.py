"""Readers for episode logs: flatscore's own JSONL runs and other benchmarks' result files.

`load_runs` is the one entry point analysis uses: it accepts canonical JSONL runs, τ²-bench
result files or directories and Inspect AI `.eval` logs alike, so `flatscore analyze` works on
any of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flatscore.episode import Episode
from flatscore.errors import InputError
from flatscore.store.jsonl import read_episodes

if TYPE_CHECKING:
    from flatscore.formats.tau2 import episode_from_simulation, inspect_tau2, read_tau2
    from flatscore.formats.tau2_import import import_tau2

__all__ = ["episode_from_simulation", "import_tau2", "inspect_tau2", "load_runs", "read_tau2"]
_TAU2 = {
    "episode_from_simulation": "flatscore.formats.tau2",
    "inspect_tau2": "flatscore.formats.tau2",
    "read_tau2": "flatscore.formats.tau2",
    "import_tau2": "flatscore.formats.tau2_import",
}
"""τ²'s readers load on first use: reading flatscore runs never needs them (~0.1 s)."""


def __getattr__(name: str) -> Any:
    if name in _TAU2:
        return getattr(importlib.import_module(_TAU2[name]), name)
    raise AttributeError(f"module 'flatscore.formats' has no attribute {name!r}")


def load_runs(paths: Iterable[str | Path], **tau2_options: object) -> Iterator[Episode]:
    """Stream episodes from each path: a `.jsonl` run, an Inspect `.eval` log (arm = its model;
    needs the `inspect` extra), or a τ² results file or directory.

    Input that holds no episode at all is an InputError naming the files."""
    files = [Path(p) for p in paths]
    n = 0
    for path in files:
        if path.suffix == ".jsonl":
            episodes = read_episodes(path)
        elif path.suffix == ".eval":
            from flatscore.formats.inspect_log import read_inspect

            episodes = read_inspect(path)
        else:
            from flatscore.formats.tau2 import read_tau2

            episodes = read_tau2(path, **tau2_options)  # type: ignore[arg-type]
        for episode in episodes:
            n += 1
            yield episode
    if n == 0:
        raise InputError("no episodes in the input", file=", ".join(map(str, files)) or None)
