"""A server flatscore starts, in words: the line a run prints as it starts one
(`models.servers.ServerPool` calls back with the arm and its spec; the run says it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from flatscore.console import styled
from flatscore.study.server import ServerSpec

if TYPE_CHECKING:
    from rich.console import Console


def starting_line(arm: str, spec: ServerSpec) -> str:
    """ "starting the llama-cpp server for m/q4 (model.gguf)"."""
    return f"starting the {spec.kind} server for {arm} ({spec.weights})"


def say_starting(console: Console | None) -> Callable[[str, ServerSpec], None] | None:
    """`ServerPool`'s `on_start` for a run printing on `console` (dim, printed as text, not
    markup); None without a console."""
    if console is None:
        return None

    def say(arm: str, spec: ServerSpec) -> None:
        console.print(styled((starting_line(arm, spec), "dim")), highlight=False)

    return say
