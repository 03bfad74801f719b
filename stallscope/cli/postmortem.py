"""``stallscope postmortem``: why was this job slow?"""

from __future__ import annotations

import json
import sys

import click

from stallscope.cli.options import quiet_option, resolved_store, store_option

FAIL_LEVELS = ("critical", "high", "medium", "never")


@click.command()
@click.argument("path_or_job")
@store_option
@click.option("--format", "fmt", type=click.Choice(("text", "json", "md", "html")), default="text", show_default=True,
              help="text: a summary for the terminal; json: the findings contract; md/html: reports.")
@click.option("--out", "out", type=click.Path(dir_okay=False, writable=True), default=None, help="Write the report to FILE.")
@click.option("--fail-on", "fail_on", type=click.Choice(FAIL_LEVELS), default="never", show_default=True,
              help="Exit 1 when a finding is at or above this severity.")
@click.option("--images", "images", type=click.Choice(("auto", "files", "inline", "none")), default="auto", show_default=True,
              help="md charts: files (PNG beside --out), inline (data: URIs), none; auto = files with --out, else none.")
@click.option("--workers", type=click.IntRange(1, 256), default=None, help="Parallel parsers when a bundle is ingested first.")
@quiet_option
def postmortem(path_or_job: str, store: str | None, fmt: str, out: str | None, fail_on: str, images: str, workers: int | None,
               quiet: bool) -> None:
    """Explain why a job was slow: the causes, the culprit ranks and hosts, the time each cost,
    and the SQL evidence behind every finding.

    PATH_OR_JOB is a bundle (directory, .tar.gz, .zip; ingested first, a no-op if already
    stored) or the id of a job in the store. Exit codes: 0 ok, 1 a finding at or above
    --fail-on, 2 usage or input error.

    Example: stallscope postmortem bundle.tar.gz --format json --fail-on high

    Example: stallscope postmortem bundle.tar.gz --format md --out report.md  (PNG charts beside it)

    Example: stallscope postmortem JOB_ID --format html --out report.html  (one offline file)
    """
    from stallscope.api import postmortem as run

    if fmt == "md" and images == "files" and not out:
        from stallscope.errors import UsageError

        raise UsageError("--images files writes PNGs beside the report: give --out FILE (or --images inline|none)")
    doc = run(path_or_job, store=resolved_store(store), workers=workers)
    if fmt == "json":
        text = json.dumps(doc, indent=2) + "\n"
    elif fmt == "text":
        text = render_text(doc)
    else:
        from stallscope.report import render

        text = render(doc, fmt=fmt, store=resolved_store(store), out=out, images=images)  # type: ignore[arg-type]
    if out:
        from pathlib import Path

        Path(out).parent.mkdir(parents=True, exist_ok=True)
        with open(out, "w") as f:
            f.write(text)
        if not quiet:
            click.echo(f"wrote {out}", err=True)
    elif not (quiet and fmt == "text"):
        click.echo(text, nl=False)
    if fail_on != "never":
        from stallscope.rules.base import SEVERITY_ORDER

        worst = max((SEVERITY_ORDER[f["severity"]] for f in doc["findings"]), default=-1)
        if worst >= SEVERITY_ORDER[fail_on]:
            sys.exit(1)


def render_text(doc: dict) -> str:
    """A plain summary: verdict first, then one paragraph per finding."""
    job = doc["job"]
    st = job["step_time_ms"]
    lines = [f"job {job['id']}: {job['world_size']} ranks on {len(job['hosts'])} host(s), {job['steps']} steps, "
             f"step time median {st['median']} ms (p90 {st['p90']} ms)"]
    main = [f for f in doc["findings"] if f["severity"] in ("critical", "high", "medium")]
    if not main:
        lines.append("verdict: no significant slowdown found (no finding of medium severity or above)")
    else:
        f = main[0]
        cost = "time lost not measured" if f["lost_time_fraction"] is None else f"~{100 * f['lost_time_fraction']:.0f}% of the time"
        lines.append(f"verdict: {f['cause']} — {f['title']} ({f['severity']}, {cost})")
    for f in doc["findings"]:
        lost = "n/a" if f["lost_time_fraction"] is None else f"{100 * f['lost_time_fraction']:.1f}%"
        lines += ["", f"[{f['severity'].upper()}] {f['rule']} {f['cause']}: {f['title']}  (time lost {lost}, confidence {f['confidence']:.2f})",
                  f"  {f['summary']}", f"  fix: {f['recommendation']}"]
        for e in f["evidence"][:3]:
            lines.append(f"  evidence: {e['description']}\n    stallscope sql \"{e['sql']}\"")
    if doc["warnings"]:
        lines += ["", f"{len(doc['warnings'])} ingest warning(s), e.g.: {doc['warnings'][0]}"]
    return "\n".join(lines) + "\n"
