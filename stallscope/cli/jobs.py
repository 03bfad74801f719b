"""``stallscope jobs``: what is in the store."""

from __future__ import annotations

import click

from stallscope.cli.options import format_option, out_option, resolved_store, store_option


@click.command()
@store_option
@format_option(("table", "csv", "json", "parquet"))
@out_option
def jobs(store: str | None, fmt: str | None, out: str | None) -> None:
    """List the jobs in the store (id, ranks, files, warnings, sources, when).

    Example: stallscope jobs --format json
    """
    from stallscope.cli.output import emit
    from stallscope.settings import resolve
    from stallscope.store.queries import Store

    s = Store.open(resolved_store(store), views=[])
    emit(s.jobs(), fmt=fmt or resolve("format"), out=out, title=f"jobs in {s.root}")
