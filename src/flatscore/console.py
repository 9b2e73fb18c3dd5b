"""Terminal output where data is always text: never rich markup, emoji codes or highlighting.

Paths, arm, model, domain and termination-reason names come from users and files; a `[/]`
in any of them crashed rich's markup parser, and `results[run1].json` printed as
`results.json`. Every console flatscore prints through is made here with markup off, so a
plain string is printed exactly as it is; styling is explicit, with `styled`.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text


def make_console(*, stderr: bool = False) -> Console:
    """A console that prints strings literally and never wraps lines (pipes stay greppable)."""
    return Console(stderr=stderr, markup=False, emoji=False, highlight=False, soft_wrap=True)


def styled(*parts: str | tuple[str, str]) -> Text:
    """Literal text with explicit styles: `styled(("error:", "bold red"), " ", message)`."""
    return Text.assemble(*parts)


console = make_console()
err_console = make_console(stderr=True)
