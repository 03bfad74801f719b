"""Render a polars DataFrame as table | csv | json | parquet, to stdout or a file."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from stallscope.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

#: rows shown by --format table before the rest is summarized (other formats write everything)
TABLE_ROWS = 200


def emit(df: "pl.DataFrame", *, fmt: str, out: str | None = None, title: str | None = None) -> None:
    if fmt == "parquet":
        if out is None:
            if sys.stdout.isatty():
                raise UsageError("--format parquet writes binary data: give --out FILE or redirect stdout")
            buf = io.BytesIO()
            df.write_parquet(buf)
            sys.stdout.buffer.write(buf.getvalue())
            return
        df.write_parquet(out)
        return
    if fmt == "csv":
        text = _stringify_nested(df).write_csv()
    elif fmt == "json":
        text = df.write_json() + "\n"
    elif fmt == "table":
        if out is not None:
            text = _plain_table(df)
        else:
            _rich_table(df, title=title)
            return
    else:  # pragma: no cover - click validates choices
        raise UsageError(f"unknown format {fmt!r}")
    if out is None:
        click.echo(text, nl=False)
    else:
        Path(out).write_text(text)


def _stringify_nested(df: "pl.DataFrame") -> "pl.DataFrame":
    import polars as pl

    nested = [c for c, t in df.schema.items() if isinstance(t, (pl.List, pl.Struct, pl.Array))]
    if not nested:
        return df
    return df.with_columns([pl.col(c).map_elements(lambda v: str(v.to_list() if hasattr(v, "to_list") else v), return_dtype=pl.String) for c in nested])


def _cell(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _rich_table(df: "pl.DataFrame", *, title: str | None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, show_lines=False, header_style="bold")
    for c in df.columns:
        table.add_column(Text(c), overflow="fold")
    for row in df.head(TABLE_ROWS).iter_rows():
        # Text, not str: cell values are data, never rich markup ("[/CI]" in a doc string must print)
        table.add_row(*[Text(_cell(v)) for v in row])
    console = Console()
    console.print(table)
    if df.height > TABLE_ROWS:
        console.print(f"[dim]… {df.height - TABLE_ROWS} more rows (use --format csv/json/parquet for all of them)[/dim]")
    else:
        console.print(f"[dim]{df.height} row{'s' if df.height != 1 else ''}[/dim]")


def _plain_table(df: "pl.DataFrame") -> str:
    cols = df.columns
    rows = [[_cell(v) for v in r] for r in df.iter_rows()]
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in rows]
    return "\n".join(lines) + "\n"
