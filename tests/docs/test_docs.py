"""Code and docs agree: generated reference docs are current, every column of every view is
documented, every command has help with an example and appears in the README/docs."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import stallscope
from stallscope.cli.main import COMMANDS, cli
from stallscope.docs import generated

ROOT = Path(__file__).resolve().parents[2]


def test_generated_docs_are_current() -> None:
    stale = [str(p.relative_to(ROOT)) for p, text in generated().items() if not p.exists() or p.read_text() != text]
    assert not stale, f"run `python -m stallscope.docs` (stale: {stale})"


def test_every_view_column_is_documented(tmp_path: Path) -> None:
    s = stallscope.open(tmp_path / "empty-store")
    views = s.tables()["name"].to_list()
    assert {"events", "kernels", "collectives", "ranks", "steps", "ingest_warnings"} <= set(views)
    undocumented = s.sql("""SELECT table_name, column_name FROM duckdb_columns()
                            WHERE schema_name = 'main' AND NOT internal AND table_name NOT LIKE '\\_%' ESCAPE '\\'
                              AND database_name = current_database()
                              AND (comment IS NULL OR comment = '')""").rows()
    assert undocumented == []
    nodoc = s.sql("SELECT view_name FROM duckdb_views() WHERE NOT internal AND (comment IS NULL OR comment = '')").rows()
    assert nodoc == []


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help_with_example_and_is_documented(name: str) -> None:
    from stallscope.cli.main import _module_exists

    if not _module_exists(COMMANDS[name][0]):
        pytest.fail(f"command {name} is registered but {COMMANDS[name][0]} does not exist")
    r = CliRunner().invoke(cli, [name, "--help"])
    assert r.exit_code == 0, r.output
    assert "Example" in r.output, f"`stallscope {name} --help` has no Example"
    text = (ROOT / "README.md").read_text() + "".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    assert f"stallscope {name}" in text, f"`stallscope {name}` is not in README.md or docs/"
