"""The ``stallscope`` command: a thin click group whose sub-commands load lazily.

Each command family lives in its own module under ``stallscope.cli`` and is imported only when
invoked, so ``stallscope --help`` stays fast (no polars, duckdb, torch or altair at start-up).

Exit codes (every command): 0 ok; 1 a finding / regression at or above the requested threshold
(``postmortem --fail-on``, ``diff --fail-on-regression``); 2 usage or input error (one line on
stderr); 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import click

from stallscope import __version__

#: command name -> (module, attribute, one-line help shown by ``stallscope --help``)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "ingest": ("stallscope.cli.ingest", "ingest", "Ingest trace bundles (files, dirs, .tar.gz, .zip) into the store."),
    "jobs": ("stallscope.cli.jobs", "jobs", "List the jobs in the store."),
    "sql": ("stallscope.cli.sql", "sql", "Run a SQL query over the store's views."),
    "tables": ("stallscope.cli.sql", "tables", "List tables and views with their documentation."),
    "postmortem": ("stallscope.cli.postmortem", "postmortem", "Explain why a job was slow: findings with evidence."),
    "diff": ("stallscope.cli.diff", "diff", "Compare two jobs: step time, breakdown, bandwidth, findings."),
    "rules": ("stallscope.cli.rules", "rules", "List the attribution rules or show one rule's documentation."),
    "compress": ("stallscope.cli.compress", "compress", "Evaluate HQP model-compression candidates from profiler traces."),
    "export": ("stallscope.cli.export", "export", "Export a job (merged Perfetto timeline on aligned clocks)."),
    "collect": ("stallscope.cli.collect", "collect", "Run a training command so that it leaves a complete trace bundle."),
    "bundle": ("stallscope.cli.bundle", "bundle", "Work with trace bundles (pack a directory into one .tar.gz)."),
    "demo": ("stallscope.cli.demo", "demo", "Run the whole pipeline on a bundled sample job and write its report."),
}


class LazyGroup(click.Group):
    """A click group that imports a sub-command's module only when it is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name, (mod, _, _) in COMMANDS.items() if _module_exists(mod)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None or not _module_exists(spec[0]):
            return None
        module = importlib.import_module(spec[0])
        cmd: click.Command = getattr(module, spec[1])
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _module_exists(module: str) -> bool:
    from importlib.util import find_spec

    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:
        return False


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="stallscope")
def cli() -> None:
    """stallscope: why was this distributed training job slow?

    Ingest per-rank PyTorch profiler traces and NCCL logs, query them with SQL, and get a
    post-mortem that names the cause (fabric, synchronization, locality), the culprit
    ranks/hosts, the time lost, and SQL evidence you can rerun.

    Exit codes: 0 ok; 1 findings or regression at/above the threshold; 2 usage or input
    error; 130 interrupted.

    Example: stallscope demo
    """


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point: translate StallscopeError into one line + exit code."""
    import os

    from stallscope.errors import StallscopeError

    # the CLI parses bundles with one worker process per core by default (library callers: 1)
    os.environ.setdefault("STALLSCOPE_WORKERS", str(os.cpu_count() or 1))
    try:
        return cli.main(args=argv, prog_name="stallscope", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("stallscope: interrupted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("stallscope: interrupted", err=True)
        sys.exit(130)
    except click.exceptions.ClickException as exc:
        exc.show()
        sys.exit(2 if exc.exit_code in (1, 2) else exc.exit_code)
    except StallscopeError as exc:
        click.echo(f"stallscope: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except Exception as exc:  # a bug of ours: one line and exit 3; STALLSCOPE_DEBUG=1 shows the traceback
        if os.environ.get("STALLSCOPE_DEBUG"):
            raise
        where = exc.__traceback__
        while where is not None and where.tb_next is not None:
            where = where.tb_next
        at = f" at {Path(where.tb_frame.f_code.co_filename).name}:{where.tb_lineno}" if where else ""
        click.echo(f"stallscope: internal error: {type(exc).__name__}: {exc}{at} "
                   "(please report it; STALLSCOPE_DEBUG=1 shows the traceback)", err=True)
        sys.exit(3)
