"""Markdown tables, built one way for every file flatscore writes (summary.md, tables.md,
model cards, benchmark and evaluation tables), so a pipe or an alignment row cannot drift
between them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

_ALIGN = {"l": "---", "r": "---:", "c": ":---:", "L": ":---"}


def row(cells: Sequence[object]) -> str:
    """One table line: `| a | b |`."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def table_lines(header: Sequence[str], rows: Iterable[Sequence[object]], align: str) -> list[str]:
    """The header, the alignment line and one line per row. `align` has a letter per
    column — `l` plain (`---`), `r` right (`---:`), `c` centred (`:---:`), `L` explicitly
    left (`:---`) — and its last letter stands for every column after it ("llr": two text
    columns, then numbers)."""
    if not align or set(align) - set(_ALIGN):
        raise ValueError(f"align {align!r}: one of l, r, c, L per column")
    letters = align[: len(header)].ljust(len(header), align[-1])
    return [
        row(header),
        "|" + "|".join(_ALIGN[a] for a in letters) + "|",
        *(row(r) for r in rows),
    ]
