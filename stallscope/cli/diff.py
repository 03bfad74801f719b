"""``stallscope diff``: compare two jobs (the nightly-scaling check)."""

from __future__ import annotations

import json
import sys

import click

from stallscope.cli.options import quiet_option, resolved_store, store_option


@click.command()
@click.argument("base")
@click.argument("new")
@store_option
@click.option("--format", "fmt", type=click.Choice(("md", "html", "json")), default="md", show_default=True,
              help="md: tables for a job summary; html: one offline page with charts; json: the diff document.")
@click.option("--out", "out", type=click.Path(dir_okay=False, writable=True), default=None, help="Write the diff to FILE.")
@click.option("--fail-on-regression", "fail_pct", type=click.FloatRange(min=0.0), default=None, metavar="PCT",
              help="Exit 1 when NEW's median step time is more than PCT percent above BASE's.")
@click.option("--workers", type=click.IntRange(1, 256), default=None, help="Parallel parsers when a bundle is ingested first.")
@quiet_option
def diff(base: str, new: str, store: str | None, fmt: str, out: str | None, fail_pct: float | None, workers: int | None,
         quiet: bool) -> None:
    """Compare two jobs: step time, stall breakdown, collective bandwidth, and new, worsened or
    resolved findings.

    BASE and NEW are bundles (ingested first, a no-op if already stored) or ids of jobs in the
    store — e.g. a baseline job kept in a persistent store. Exit codes: 0 ok, 1 median step time
    regressed more than --fail-on-regression PCT, 2 usage or input error.

    Example: stallscope diff baseline.tar.gz tonight.tar.gz --format md --fail-on-regression 5

    Example: stallscope diff nightly-2025-01-01 bundle/ --store ./store --format html --out diff.html
    """
    from stallscope.api import resolve_job
    from stallscope.errors import AnalysisError
    from stallscope.report.diff import compare, headline, render_html, render_markdown
    from stallscope.rules.engine import postmortem

    st = resolved_store(store)
    docs, stores = [], []
    for arg in (base, new):
        s, _ = resolve_job(arg, store=st, workers=workers)
        job = s.job if s.job is not None else arg
        docs.append(postmortem(s, job))
        stores.append(s)
    d = compare(stores[0], docs[0], stores[1], docs[1])
    text = json.dumps(d, indent=2, default=str) + "\n" if fmt == "json" else render_html(d) if fmt == "html" else render_markdown(d)
    if out:
        from pathlib import Path

        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text)
        if not quiet:
            click.echo(f"{headline(d)}\nwrote {out}", err=True)
    else:
        click.echo(text, nl=False)
    if fail_pct is not None:
        pct = d["regression_pct"]
        if pct is None:
            raise AnalysisError("cannot check --fail-on-regression: a job has no profiler steps to time")
        if pct > fail_pct:
            if not quiet:
                click.echo(f"stallscope: median step time regressed {pct:.1f}% (> {fail_pct:g}%)", err=True)
            sys.exit(1)
