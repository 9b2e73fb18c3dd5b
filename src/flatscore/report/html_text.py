"""Text the report's HTML shows: sentences whose `code` spans become <code> (no literal
backticks in the page), Markdown pipe tables (repair, margins, cost) as real HTML tables,
and notes gathered as numbered footnotes under a table instead of wrapped inside its cells."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from markupsafe import Markup, escape

_CODE = re.compile(r"`([^`]+)`")


def prose(text: object) -> Markup:
    """Escaped text with `x` spans as <code>x</code>."""
    return Markup(_CODE.sub(lambda m: f"<code>{m.group(1)}</code>", str(escape(str(text)))))


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def markdown_table(text: str | None) -> Markup:
    """A Markdown block (pipe tables and lines of text) as HTML: each table a <table> in its
    own scrolling box, other lines paragraphs."""
    if not text:
        return Markup("")
    out: list[str] = []
    rows: list[list[str]] = []

    def flush() -> None:
        if not rows:
            return
        head, body = rows[0], [r for r in rows[1:] if not all(set(c) <= set("-: ") for c in r)]
        html = ['<div class="scroll"><table class="num"><thead><tr>']
        html += [f"<th>{prose(c)}</th>" for c in head]
        html.append("</tr></thead><tbody>")
        for r in body:
            html.append("<tr>" + "".join(f"<td>{prose(c)}</td>" for c in r) + "</tr>")
        html.append("</tbody></table></div>")
        out.append("".join(html))
        rows.clear()

    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            rows.append(_cells(line))
            continue
        flush()
        stripped = line.strip().lstrip("#").strip()
        if stripped:
            out.append(f'<p class="note">{prose(stripped)}</p>')
    flush()
    return Markup("\n".join(out))


@dataclass
class Footnotes:
    """Notes numbered in the order a table first cites them."""

    notes: list[str] = field(default_factory=list)

    def cite(self, note: str) -> int:
        if note not in self.notes:
            self.notes.append(note)
        return self.notes.index(note) + 1
