"""``python -m stallscope.samples``: generate bundles with ground truth.

Commands::

    generate  one bundle:   --scenario NAME --nodes N --gpus G --steps S --seed X --logs all|some|none --out DIR
    suite     many bundles: --count 220 --out DIR [--seed X] [--workers 2]  (writes DIR/suite.json)
    scenarios list the scenarios with their cause
    demo      regenerate the small demo bundles shipped in the repository's samples/ folder
    large     a big job for performance tests: --ranks 64|256 --out DIR
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from stallscope.errors import StallscopeError

_LOGS = click.Choice(["all", "some", "none"])


def _parse_knob(values: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in values:
        if "=" not in kv:
            raise click.BadParameter(f"--knob expects key=value, got {kv!r}")
        k, v = kv.split("=", 1)
        try:
            out[k.replace("-", "_")] = json.loads(v)
        except json.JSONDecodeError:
            out[k.replace("-", "_")] = v
    return out


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Generate realistic synthetic multi-node training jobs (Kineto traces + NCCL logs) with
    ground truth beside each bundle.

    Example: python -m stallscope.samples generate --scenario compute_straggler --nodes 2 --gpus 4 --out /tmp/b
    """


@cli.command()
@click.option("--scenario", required=True, help="Scenario name (see `scenarios`).")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder to write <name>/bundle* and <name>/truth.json into.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--name", default=None, help="Sub-folder name (default <scenario>-s<seed>).")
@click.option("--nodes", type=int, default=None)
@click.option("--gpus", type=int, default=None, help="GPUs per node (4 or 8).")
@click.option("--steps", type=int, default=None)
@click.option("--logs", type=_LOGS, default=None, help="NCCL logs from all hosts, some hosts, or none.")
@click.option("--severity", type=click.Choice(["subtle", "moderate", "severe"]), default=None)
@click.option("--parallelism", type=click.Choice(["ddp", "fsdp", "hsdp", "tp_dp", "pipeline"]), default=None)
@click.option("--nccl-version", default=None)
@click.option("--torch-variant", type=click.Choice(["kineto_2022", "kineto_2024", "kineto_2025"]), default=None)
@click.option("--archive", type=click.Choice(["dir", "tar.gz", "zip"]), default=None)
@click.option("--naming", type=click.Choice(["tensorboard", "rank", "arbitrary"]), default=None)
@click.option("--gzip/--no-gzip", "gz", default=None)
@click.option("--knob", "knobs", multiple=True, help="Any other knob as key=value (JSON value), e.g. --knob drift=true.")
def generate(scenario: str, out: str, seed: int, name: str | None, knobs: tuple[str, ...], gz: bool | None, **opts: Any) -> None:
    """Write one bundle and its truth.json.

    Example: python -m stallscope.samples generate --scenario degraded_nic --nodes 4 --gpus 8 --steps 6 --seed 3 --logs some --out /tmp/b
    """
    from stallscope.samples import generate as gen

    kw = {k: v for k, v in opts.items() if v is not None}
    if gz is not None:
        kw["gzip"] = gz
    kw.update(_parse_knob(knobs))
    t = time.perf_counter()
    truth = gen(scenario, out=out, seed=seed, name=name, **kw)
    click.echo(f"{truth.name}: cause={truth.cause} ranks={_short(truth.culprit_ranks)} hosts={_short(truth.culprit_hosts)} "
               f"lost={truth.lost_time_fraction:.3f} -> {Path(out) / truth.name} ({time.perf_counter() - t:.1f} s)")


@cli.command()
@click.option("--out", required=True, type=click.Path(file_okay=False))
@click.option("--count", default=220, show_default=True, type=int)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--workers", default=None, type=int, help="Processes to generate with (default: CPU count, at most 4).")
@click.option("--knob", "knobs", multiple=True, help="A knob applied to every bundle, key=value.")
def suite(out: str, count: int, seed: int, workers: int | None, knobs: tuple[str, ...]) -> None:
    """Write COUNT bundles spread over every scenario and knob, plus OUT/suite.json.

    Example: python -m stallscope.samples suite --count 220 --out /tmp/suite --workers 2
    """
    import os

    from stallscope.samples import suite as run_suite

    workers = workers or min(4, os.cpu_count() or 1)
    t = time.perf_counter()

    def progress(i: int, n: int, name: str) -> None:
        click.echo(f"\r[{i}/{n}] {name:<60}", nl=False, err=True)

    res = run_suite(out, count, seed, workers=workers, progress=progress, **_parse_knob(knobs))
    click.echo("", err=True)
    by: dict[str, int] = {}
    for t_ in res:
        by[t_.scenario] = by.get(t_.scenario, 0) + 1
    click.echo(f"{len(res)} bundles in {time.perf_counter() - t:.0f} s -> {out}/suite.json  " + ", ".join(f"{k}={v}" for k, v in sorted(by.items())))


@cli.command()
def scenarios() -> None:
    """List the scenarios and the cause their ground truth names."""
    from stallscope.samples import SCENARIOS

    for s in SCENARIOS.values():
        click.echo(f"{s.name:28s} {s.cause:16s} {s.summary}")


@cli.command()
@click.option("--out", default="samples", show_default=True, type=click.Path(file_okay=False))
def demo(out: str) -> None:
    """Regenerate the demo bundles (small .tar.gz with NCCL logs, and their truth.json).

    Example: python -m stallscope.samples demo --out samples
    """
    from stallscope.samples.demo import write_demo

    for t in write_demo(Path(out)):
        click.echo(f"{t.name}: {t.cause} {t.culprit_hosts or t.culprit_ranks} lost={t.lost_time_fraction:.3f}")


@cli.command()
@click.option("--ranks", default=64, show_default=True, type=int, help="World size (a multiple of 8).")
@click.option("--out", required=True, type=click.Path(file_okay=False))
@click.option("--scenario", default="compute_straggler", show_default=True)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--steps", default=8, show_default=True, type=int)
def large(ranks: int, out: str, scenario: str, seed: int, steps: int) -> None:
    """A large job for performance tests (full kernel detail up to 64 ranks, lean beyond).

    Example: python -m stallscope.samples large --ranks 256 --out /tmp/big
    """
    from stallscope.samples.demo import large_job

    t = time.perf_counter()
    truth = large_job(Path(out), ranks=ranks, scenario=scenario, seed=seed, steps=steps)
    click.echo(f"{truth.name}: {ranks} ranks, cause={truth.cause} -> {Path(out) / truth.name} ({time.perf_counter() - t:.1f} s)")


def _short(x: list[Any]) -> str:
    return str(x) if len(x) <= 6 else f"[{x[0]}, {x[1]}, ... {len(x)} items]"


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2)
    except click.exceptions.Abort:
        sys.exit(130)
    except StallscopeError as exc:
        click.echo(f"stallscope.samples: error: {exc}", err=True)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
