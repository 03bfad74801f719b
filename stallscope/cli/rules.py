"""``stallscope rules``: the attribution rules and their documentation."""

from __future__ import annotations

import click


@click.group(invoke_without_command=True)
@click.pass_context
def rules(ctx: click.Context) -> None:
    """List the attribution rules (code, name, cause), or show one rule's documentation.

    Example: stallscope rules show SYN001
    """
    if ctx.invoked_subcommand is None:
        from stallscope.rules.registry import RULES

        for code, r in RULES.items():
            first = r.doc().splitlines()[0] if r.doc() else ""
            click.echo(f"{code}  {r.name:<34} {r.cause:<16} {first}")


@rules.command("show")
@click.argument("code")
def show(code: str) -> None:
    """Print the documentation of rule CODE (what it detects, why it matters, evidence, fix, options).

    Example: stallscope rules show LOC001
    """
    from stallscope.rules.registry import get

    r = get(code)
    click.echo(f"{r.code} {r.name} (cause: {r.cause})\n")
    click.echo(r.doc())
