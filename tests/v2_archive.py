"""A few episodes of study v2's committed archive (studies/embedded-study-v2/runs), and small
archives made of them: fixtures for the reproduction tests that never touch the committed
data."""

from __future__ import annotations

import lzma
from functools import cache
from pathlib import Path

from flatscore.store.archive import archived, chunks

ROOT = Path(__file__).resolve().parents[1]
V2_ARCHIVE = ROOT / "studies" / "embedded-study-v2" / "runs"
MODEL = "smollm2-135m"


@cache
def _chunk_lines(path: Path) -> dict[tuple[str, str, int], str]:
    return {(ep.domain, ep.task_id, ep.trial): line for ep, line in archived([path])}


def v2_line(arm: str, domain: str, task: str, trial: int) -> str:
    """The archived line of (arm, domain, task, trial), as stored (chunks read in order,
    until it is found)."""
    for path in chunks(V2_ARCHIVE)[f"{MODEL}__{arm}"]:
        line = _chunk_lines(path).get((domain, task, trial))
        if line is not None:
            return line
    raise KeyError((arm, domain, task, trial))


def small_archive(
    dest: Path, picks: list[tuple[str, str, str, int]], *, edit: dict[int, str] | None = None
) -> Path:
    """An archive folder at `dest` holding the archived (arm, domain, task, trial) `picks`,
    one chunk per arm; `edit` replaces the line of pick i by the given one."""
    dest.mkdir(parents=True, exist_ok=True)
    by_arm: dict[str, list[str]] = {}
    for i, (arm, domain, task, trial) in enumerate(picks):
        line = (edit or {}).get(i) or v2_line(arm, domain, task, trial)
        by_arm.setdefault(arm, []).append(line)
    for arm, lines in by_arm.items():
        data = ("\n".join(lines) + "\n").encode("utf-8")
        (dest / f"{MODEL}__{arm}.000.jsonl.xz").write_bytes(lzma.compress(data))
    return dest
