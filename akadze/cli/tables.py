"""How a command prints: aligned tables without borders (and their time cells), and ``--output
json`` (one JSON document on stdout and nothing else)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypeVar

import typer

T = TypeVar("T")


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Columns aligned, without borders: one line per row, two spaces between columns, no trailing
    spaces, never wrapped or cut to the terminal's width (the output is read by scripts as often
    as by eyes). A cell is as wide as a terminal shows it (rich.cells: a wide character takes two
    columns). Aligned here, row by row, to the text rich's Table printed: for 10,000 rows (a
    workflow's steps) rich took 10.6 s, this 0.1-0.2 s (one run, side by side). A table with a
    control character in a cell (a newline, a tab) still goes through rich's Table."""
    from rich.cells import cell_len

    table = [list(header), *(list(row) for row in rows)]
    if not all(cell.isprintable() for row in table for cell in row):
        _rich_table(header, rows)
        return
    widths = [max(cell_len(row[column]) for row in table) for column in range(len(header))]
    for row in table:
        line = "  ".join(
            cell + " " * (width - cell_len(cell)) for cell, width in zip(row, widths, strict=True)
        )
        if line.strip():
            typer.echo(line.rstrip())


def _rich_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, show_edge=False, pad_edge=False, padding=(0, 2, 0, 0))
    for name in header:
        table.add_column(name, no_wrap=True, overflow="ignore")
    for row in rows:
        table.add_row(*row)
    console = Console(width=10_000, color_system=None, highlight=False, markup=False, emoji=False)
    with console.capture() as captured:
        console.print(table)
    for line in captured.get().splitlines():
        if line.strip():
            typer.echo(line.rstrip())


# -- output formats ----------------------------------------------------------------------------


class Output(enum.StrEnum):
    """What a listing prints: an aligned table for people, or one JSON document for scripts."""

    TABLE = "table"
    JSON = "json"


OutputOption = Annotated[
    Output,
    typer.Option(
        "--output",
        "-o",
        help="table, or json: one JSON document on stdout (an array for lists), nothing else.",
        case_sensitive=False,
    ),
]


def print_json(value: Any) -> None:
    """``value`` as one JSON document on stdout: datetimes ISO 8601, enums by value, structs by
    field name (the shape of ``--output json``)."""
    import msgspec

    typer.echo(msgspec.json.encode(value).decode())


def print_listing(
    output: Output,
    found: Sequence[T],
    header: Sequence[str],
    row: Callable[[T], Sequence[str]],
    *,
    document: Callable[[T], Any] | None = None,
    empty: str | None = None,
) -> None:
    """A listing as ``--output`` asks: one JSON array (of ``document(item)``, or the items as
    they are), else the table, one ``row(item)`` a line (``empty`` instead when nothing was found
    and it is given; else the header alone)."""
    if output is Output.JSON:
        print_json([document(item) for item in found] if document is not None else found)
        return
    if not found and empty is not None:
        typer.echo(empty)
        return
    print_table(header, [row(item) for item in found])


def when(value: Any) -> str:
    """A timestamp for a table cell, to the second in ISO 8601 with its offset; "-" for None."""
    return value.isoformat(timespec="seconds") if value is not None else "-"
