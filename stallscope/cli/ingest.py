"""``stallscope ingest``: bundle -> store."""

from __future__ import annotations

import time

import click

from stallscope.cli.options import quiet_option, resolved_store, store_option


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=False))
@store_option
@click.option("--job", "job", default=None, metavar="ID", help="Name the job (default: an id derived from the files' contents).")
@click.option("--workers", type=click.IntRange(1, 256), default=None, help="Parallel parser processes (default: one per CPU core).")
@click.option("--force", is_flag=True, help="Re-ingest even when the same content is already stored.")
@click.option("--no-analysis", is_flag=True, help="Only ingest; skip the analysis tables (clock offsets, collective instances, breakdown).")
@quiet_option
def ingest(paths: tuple[str, ...], store: str | None, job: str | None, workers: int | None, force: bool,
           no_analysis: bool, quiet: bool) -> None:
    """Ingest PATHS (files, directories, .tar.gz/.tgz/.zip bundles) into the store as one job.

    Files are recognized by content, whatever their names: Kineto traces (plain or gzip), NCCL
    debug logs and watchdog messages in any text log, a collector manifest. Bad files are
    reported one line each and never stop the rest. Re-ingesting the same content is a no-op.

    Example: stallscope ingest traces/ nccl_logs.tar.gz --store ./store --job run-42
    """
    import os

    # ingest does no linear algebra: OpenBLAS's thread pool would cost every process (this one and
    # each parser it spawns, which inherit the setting) 0.1 CPU-s of start-up
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from stallscope.ingest.pipeline import block_pandas

    block_pandas()  # this process is ours and hands pyarrow no pandas objects: skip its pandas probe
    from stallscope.api import ingest as run
    from stallscope.settings import resolve

    store = resolved_store(store)
    if workers is None and resolve("workers") is not None:
        workers = int(resolve("workers"))
    t0 = time.perf_counter()
    if quiet:
        res = run(list(paths), store=store, job=job, workers=workers, force=force, analyze=not no_analysis)
    else:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("[bold]ingest"), BarColumn(), TextColumn("{task.completed}/{task.total} files"),
                      TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("{task.fields[current]}"),
                      transient=True) as bar:
            task = bar.add_task("ingest", total=None, rate="", current="")

            def progress(done: int, total: int, done_b: int, total_b: int, current: str) -> None:
                dt = max(time.perf_counter() - t0, 1e-6)
                bar.update(task, total=total, completed=done, rate=f"{done_b / dt / 1e6:.0f} MB/s", current=current[-40:])

            res = run(list(paths), store=store, job=job, workers=workers, force=force, progress=progress,
                      analyze=not no_analysis)
    if quiet:
        return
    for w in res.warnings[:50]:
        click.echo(f"warning: {w}", err=True)
    if len(res.warnings) > 50:
        click.echo(f"warning: … {len(res.warnings) - 50} more (SELECT * FROM ingest_warnings)", err=True)
    if res.skipped:
        click.echo(f"job {res.job}: already in {res.store} (same content); nothing to do")
    else:
        mb = res.bytes / 1e6
        click.echo(f"job {res.job}: {res.ranks} ranks, {res.events:,} events from {res.files} files "
                   f"({mb:.1f} MB in {res.seconds:.1f} s) -> {res.store}")
