"""Inputs that cannot give a comparison but look as if they were meant to: raw τ²-bench
files of several models, each its own one-arm cell (a raw file's arm is its model's name)."""

from __future__ import annotations

from collections.abc import Iterable

from flatscore.episode import Episode
from flatscore.errors import InputError


def check_comparable(episodes: Iterable[Episode]) -> None:
    """InputError (with the import that fixes it) when no cell has two arms and the episodes
    hold more than one model: each model would be analysed alone, "nothing to compare"."""
    arms: dict[tuple[str, str], set[str]] = {}
    for ep in episodes:
        arms.setdefault((ep.model, ep.domain), set()).add(ep.arm)
    models = sorted({model for model, _ in arms})
    if len(models) < 2 or any(len(a) > 1 for a in arms.values()):
        return
    shown = ", ".join(models[:4]) + (", …" if len(models) > 4 else "")
    raise InputError(
        f"{len(models)} models ({shown}) with one arm each: nothing to compare. To compare them "
        "as precision arms of one model, import each file with the same --model and its own "
        "--arm: flatscore import tau2 FILE --model NAME --arm ARM --out runs/NAME.jsonl"
    )
