"""Options shared by several commands, declared once (``--store``, ``--job``, ``--format``, ``--out``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def store_option(f: F) -> F:
    return click.option("--store", "store", type=click.Path(file_okay=False), default=None, envvar="STALLSCOPE_STORE",
                        show_envvar=True, help="Store directory (default: $STALLSCOPE_STORE, config file, or the per-user data dir).")(f)


def job_option(help: str = "Restrict every view to this job.") -> Callable[[F], F]:
    def deco(f: F) -> F:
        return click.option("--job", "job", default=None, metavar="ID", help=help)(f)

    return deco


def format_option(choices: tuple[str, ...], default: str = "table") -> Callable[[F], F]:
    def deco(f: F) -> F:
        return click.option("--format", "fmt", type=click.Choice(choices), default=None,
                            help=f"Output format (default: {default}).")(f)

    return deco


def out_option(f: F) -> F:
    return click.option("--out", "out", type=click.Path(dir_okay=False, writable=True), default=None,
                        help="Write the output to this file instead of standard output.")(f)


def quiet_option(f: F) -> F:
    return click.option("--quiet", "-q", is_flag=True, default=False, help="No progress bar or summary (for CI logs).")(f)


def resolved_store(store: str | None) -> str | None:
    from stallscope.settings import resolve

    value = resolve("store", store)
    return str(value) if value is not None else None
