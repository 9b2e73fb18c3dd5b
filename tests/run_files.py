"""Test helper shared by the run-path tests: the episodes of run files as plain data, without
the wall-clock fields, so two runs of the same seeds compare with `==`."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from flatscore.store.jsonl import read_episodes


def comparable_episodes(paths: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """Every episode of `paths`, by id, with the measurements of the machine dropped — `timing`,
    each message's `latency_s` and `timing` (prefill/decode seconds, tokens encoded: a warm
    prefix cache encodes fewer), `serving.peak_rss_bytes` — the only fields allowed to differ
    between two runs of the same seeds; fails on an id written twice."""
    out: dict[str, dict[str, Any]] = {}
    for path in paths:
        for ep in read_episodes(path):
            assert ep.episode_id not in out, f"{path}: episode {ep.episode_id} written twice"
            data = ep.model_dump(mode="json", exclude={"timing"})
            for message in data["messages"]:
                message.pop("latency_s")
                message.pop("timing", None)
            if isinstance(data.get("serving"), dict):
                data["serving"].pop("peak_rss_bytes", None)
            out[ep.episode_id] = data
    return out


def study_episodes(folder: Path) -> dict[str, dict[str, Any]]:
    """`comparable_episodes` of every run file of a study's output folder."""
    return comparable_episodes(sorted((folder / "runs").glob("*.jsonl")))
