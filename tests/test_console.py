"""Console output prints data literally: rich markup, emoji codes and highlighting are off."""

from __future__ import annotations

import io

from rich.table import Table

from flatscore.analysis.summary import verdict_lines
from flatscore.console import make_console, styled


def printed(*renderables: object) -> str:
    console = make_console()
    console.file = io.StringIO()
    for r in renderables:
        console.print(r)
    out = console.file.getvalue()
    assert isinstance(out, str)
    return out


def test_markup_looking_data_prints_as_is() -> None:
    for text in ["d[/].json", "results[run1].json", "[bold]x[/bold]", "[link=x]y", ":smile:"]:
        assert printed(text).strip() == text
        assert printed(styled(("error:", "bold red"), " ", text)).strip() == f"error: {text}"
    table = Table("arm", title="written to r[/].jsonl")
    table.add_row("[/]arm")
    out = printed(table)
    assert "[/]arm" in out and "r[/].jsonl" in out


def test_long_lines_are_not_wrapped() -> None:
    line = "x/" * 200
    assert printed(line).strip() == line


def test_verdict_lines_are_text_not_markup() -> None:
    from types import SimpleNamespace

    cell = SimpleNamespace(
        model="[red]m", domain="d[/]", verdict="inconclusive", verdict_reason="[/]why",
        risk_screen=SimpleNamespace(verdict="[b]"),
    )  # fmt: skip
    (line,) = verdict_lines(SimpleNamespace(cells=[cell]))  # type: ignore[arg-type]
    assert printed(line).strip() == "[red]m / d[/]: inconclusive — [/]why  (risk screen: [b])"
