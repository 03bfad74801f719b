"""``stallscope bundle``: work with trace bundles (pack a directory into one archive)."""

from __future__ import annotations

import click


@click.group()
def bundle() -> None:
    """Work with trace bundles.

    Example: stallscope bundle pack run-42 -o run-42.tar.gz
    """


@bundle.command("pack")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("-o", "--out", "out", required=True, type=click.Path(dir_okay=False), help="Archive to write (.tar.gz).")
@click.option("--force", is_flag=True, help="Replace OUT if it exists.")
@click.option("--quiet", "-q", is_flag=True, default=False, help="No summary line.")
def pack(directory: str, out: str, force: bool, quiet: bool) -> None:
    """Pack the bundle DIRECTORY into one .tar.gz that ingest, postmortem and the server accept.

    Regular files only (links and special files are left out and listed), sorted, owners
    cleared: the same bundle gives the same bytes. The archive is complete or absent.

    Example: stallscope bundle pack run-42 -o run-42.tar.gz && stallscope postmortem run-42.tar.gz
    """
    from stallscope.collectors.bundle import pack as run

    res = run(directory, out, overwrite=force)
    for s in res.skipped:
        click.echo(f"warning: left out {s}", err=True)
    if not quiet:
        click.echo(f"wrote {res.out}: {res.files} files, {res.bytes_in:,} bytes -> {res.bytes_out:,} bytes")
