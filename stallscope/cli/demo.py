"""``stallscope demo``: the whole pipeline on a bundled sample job, no arguments needed."""

from __future__ import annotations

import time
from pathlib import Path

import click

#: the sample job: 2 hosts x 4 GPUs, rank 5 computes slower (samples/README.md)
DEMO = "demo-compute-straggler"


def demo_bundle(workdir: Path, *, root: Path | None = None) -> tuple[Path, str]:
    """The demo bundle: the repository's ``samples/`` copy when this is a source checkout (``root``:
    the checkout, default: the one the package sits in), else generated into ``workdir`` from the
    same fixed recipe (the generator is part of the package and reproduces the shipped archive
    byte for byte). Returns the path and where it came from."""
    import stallscope

    repo = root if root is not None else Path(stallscope.__file__).resolve().parents[1]
    shipped = repo / "samples" / DEMO / "bundle.tar.gz"
    if shipped.is_file():
        return shipped, "bundled sample"
    from stallscope.samples import generate
    from stallscope.samples.demo import DEMOS

    scenario, seed, knobs = DEMOS[DEMO]
    truth = generate(scenario, out=workdir, seed=seed, name=DEMO, **knobs)  # type: ignore[arg-type]
    return truth.bundle_path, "generated from the sample recipe"


@click.command()
@click.option("--out", "out", type=click.Path(file_okay=False), default="stallscope-demo", show_default=True,
              help="Folder for the report (report.html, findings.json) and, unless --store is given, the store.")
@click.option("--store", "store", type=click.Path(file_okay=False), default=None,
              help="Store to ingest into (default: OUT/store, so the demo leaves your own store alone).")
def demo(out: str, store: str | None) -> None:
    """Run the whole pipeline on a sample job with a known problem: ingest its traces and NCCL
    logs, analyse, print the verdict and write the HTML report.

    The sample is a generated 2-host x 4-GPU DDP job (PyTorch profiler traces and NCCL debug logs
    from every process) in which rank 5 computes slower and the other seven ranks wait for it.

    Example: stallscope demo
    """
    import json

    from stallscope.api import ingest, open_store
    from stallscope.cli.postmortem import render_text
    from stallscope.report import render
    from stallscope.rules.engine import postmortem

    t0 = time.perf_counter()
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    st = Path(store) if store else folder / "store"
    bundle, origin = demo_bundle(folder / "sample")
    click.echo(f"sample job: {bundle} ({origin})")
    res = ingest([bundle], store=st)
    s = open_store(st, job=res.job)
    click.echo(f"ingested into {st} as job {res.job}")
    doc = postmortem(s, res.job)
    click.echo("")
    click.echo(render_text(doc).rstrip())
    html = render(doc, fmt="html", store=st)
    report = folder / "report.html"
    report.write_text(html)
    (folder / "findings.json").write_text(json.dumps(doc, indent=2) + "\n")
    took = time.perf_counter() - t0
    click.echo("")
    click.echo(f"report: {report.resolve()}  (one offline file: open it in a browser)")
    click.echo(f"findings: {(folder / 'findings.json').resolve()}  ·  done in {took:.1f} s")
    click.echo(f"next: stallscope sql \"SELECT * FROM rank_collective_stats ORDER BY lateness_ms_median DESC\" --store {st} --job {res.job}")
