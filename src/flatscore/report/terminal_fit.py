"""Terminal tables that stay readable in a narrow window: a table wider than the console is
shown vertically, one block per row (its first cell as a heading, then `column  value`
lines), instead of letting rich cut every cell to "int4-…"."""

from __future__ import annotations

from rich import box
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text


def fits(table: Table, console: Console) -> bool:
    """The table's natural width (no cell cut or wrapped) fits the console."""
    unbounded = console.options.update_width(10_000)  # measured unclamped by the console
    return Measurement.get(console, unbounded, table).maximum <= console.width


def vertical(table: Table) -> RenderableType:
    """The same rows as blocks: the first column's cell as the block's heading, then one line
    per other column (its header, its cell; long cells wrap, nothing is cut)."""
    headers = [Text.from_markup(str(c.header)).plain.replace("\n", " ") for c in table.columns]
    cells = [list(c.cells) for c in table.columns]
    out = Table(
        title=table.title,
        title_justify="left",
        show_header=False,
        box=box.SIMPLE,
        pad_edge=False,
        expand=False,
    )
    out.add_column("column", style="dim", no_wrap=True)
    out.add_column("value", overflow="fold")
    for r in range(table.row_count):
        head = cells[0][r] if cells else ""
        out.add_row(
            Text(headers[0] + ":", style="bold") if headers else "", head, end_section=False
        )
        for name, column in zip(headers[1:], cells[1:], strict=True):
            out.add_row(f"  {name}", column[r])
        out.add_section()
    caption = table.caption
    return Group(out, caption) if caption is not None else out


def fit(table: Table, console: Console) -> RenderableType:
    """The table as is where it fits, else `vertical`."""
    return table if fits(table, console) else vertical(table)
