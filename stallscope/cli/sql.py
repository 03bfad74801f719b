"""``stallscope sql`` and ``stallscope tables``: ad-hoc SQL over the store's views."""

from __future__ import annotations

import sys

import click

from stallscope.cli.options import format_option, job_option, out_option, resolved_store, store_option


@click.command()
@click.argument("query")
@store_option
@job_option()
@format_option(("table", "csv", "json", "parquet"))
@out_option
def sql(query: str, store: str | None, job: str | None, fmt: str | None, out: str | None) -> None:
    """Run QUERY (DuckDB SQL) over the store's tables and views; '-' reads it from stdin.

    `stallscope tables` lists what there is to query, with documentation.

    Example: stallscope sql "SELECT rank, count(*) AS kernels FROM kernels GROUP BY rank" --job run-42 --format csv
    """
    import stallscope
    from stallscope.cli.output import emit
    from stallscope.settings import resolve

    if query == "-":
        query = sys.stdin.read()
    s = stallscope.open(resolved_store(store), job=job)
    emit(s.sql(query), fmt=fmt or resolve("format"), out=out)


@click.command()
@click.argument("name", required=False)
@store_option
@click.option("--all", "show_all", is_flag=True, help="Include helper views (names starting with '_').")
@format_option(("table", "csv", "json", "parquet"))
@out_option
def tables(name: str | None, store: str | None, show_all: bool, fmt: str | None, out: str | None) -> None:
    """List the tables and views you can query, or the documented columns of NAME.

    Example: stallscope tables collectives
    """
    import stallscope
    from stallscope.cli.output import emit

    s = stallscope.open(resolved_store(store))
    df = s.columns(name) if name else s.tables(helpers=show_all)
    emit(df, fmt=fmt or "table", out=out)
