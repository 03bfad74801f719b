"""``stallscope export``: a job in formats other tools open."""

from __future__ import annotations

import click

from stallscope.cli.options import quiet_option, resolved_store, store_option


@click.group()
def export() -> None:
    """Export a job for other tools.

    Example: stallscope export perfetto bundle.tar.gz --out merged.json
    """


@export.command("perfetto")
@click.argument("path_or_job")
@store_option
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, writable=True), help="Chrome-trace JSON to write.")
@click.option("--python", "include_python", is_flag=True, help="Include python_function events (with_stack traces; large).")
@quiet_option
def perfetto(path_or_job: str, store: str | None, out: str, include_python: bool, quiet: bool) -> None:
    """Write one Chrome-trace JSON with every rank on aligned clocks (open it in ui.perfetto.dev).

    PATH_OR_JOB is a bundle (ingested first, a no-op if already stored) or a job id. One process
    per rank, grouped by host; a 'collectives' track shows each call's wait and transfer.

    Example: stallscope export perfetto run-42 --out run-42.json
    """
    from stallscope.api import resolve_job
    from stallscope.report.perfetto import export_perfetto

    s, _ = resolve_job(path_or_job, store=resolved_store(store))
    counts = export_perfetto(s, out, include_python=include_python)
    if not quiet:
        click.echo(f"wrote {out}: {counts['ranks']} ranks, {counts['events']:,} events, "
                   f"{counts['collective_slices']:,} collective slices (open in https://ui.perfetto.dev)")
