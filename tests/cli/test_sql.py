"""`stallscope sql` / `tables` / `jobs`: formats, --job, --out, one-line errors, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from stallscope.api import ingest
from tests.conftest import TRACES


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("sqlstore")
    ingest([TRACES / "cpu_gloo"], store=store, job="gloo")
    ingest([TRACES / "hta/nccl_parser_config"], store=store, job="nccl")
    return store


def ss(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stallscope", *args], capture_output=True, text=True)


def test_formats(loaded: Path, tmp_path: Path) -> None:
    q = "SELECT job, count(*) AS n FROM ranks GROUP BY job ORDER BY job"
    r = ss("sql", q, "--store", str(loaded), "--format", "csv")
    assert r.returncode == 0 and r.stdout.splitlines() == ["job,n", "gloo,2", "nccl,1"]
    r = ss("sql", q, "--store", str(loaded), "--format", "json")
    assert json.loads(r.stdout) == [{"job": "gloo", "n": 2}, {"job": "nccl", "n": 1}]
    out = tmp_path / "x.parquet"
    r = ss("sql", q, "--store", str(loaded), "--format", "parquet", "--out", str(out))
    assert r.returncode == 0 and pl.read_parquet(out).height == 2
    r = ss("sql", q, "--store", str(loaded))
    assert r.returncode == 0 and "gloo" in r.stdout


def test_job_filter(loaded: Path) -> None:
    r = ss("sql", "SELECT DISTINCT job FROM events", "--store", str(loaded), "--job", "nccl", "--format", "csv")
    assert r.stdout.splitlines() == ["job", "nccl"]


@pytest.mark.parametrize("query,needle", [("SELEC 1", "syntax"), ("SELECT nope FROM ranks", "nope"), ("SELECT * FROM missing_table", "missing_table")])
def test_query_errors_are_one_line(loaded: Path, query: str, needle: str) -> None:
    r = ss("sql", query, "--store", str(loaded))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and needle.lower() in r.stderr.lower() and "Traceback" not in r.stderr


def test_unknown_job_is_usage_error(loaded: Path) -> None:
    r = ss("sql", "SELECT 1", "--store", str(loaded), "--job", "nope")
    assert r.returncode == 2 and "no job 'nope'" in r.stderr


def test_tables_and_jobs(loaded: Path) -> None:
    r = ss("tables", "--store", str(loaded), "--format", "csv")
    assert "collectives" in r.stdout and "ranks" in r.stdout
    r = ss("tables", "collectives", "--store", str(loaded), "--format", "csv")
    assert "bytes" in r.stdout and "nccl-tests" in r.stdout
    r = ss("jobs", "--store", str(loaded), "--format", "json")
    assert {j["job"] for j in json.loads(r.stdout)} == {"gloo", "nccl"}


def test_python_api_returns_polars(loaded: Path) -> None:
    import stallscope

    df = stallscope.open(loaded).sql("SELECT * FROM collectives")
    assert isinstance(df, pl.DataFrame) and df.height > 0
    t = stallscope.open(loaded).arrow("SELECT * FROM steps")
    assert t.num_rows > 0


def test_help_is_fast_and_light() -> None:
    """--help must not import torch, altair, HTA, duckdb or polars."""
    code = ("import sys; from stallscope.cli.main import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit: pass\n"
            "heavy = [m for m in ('torch', 'altair', 'hta', 'duckdb', 'polars', 'pyarrow', 'sklearn') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY []" in r.stdout, r.stdout + r.stderr


def test_table_output_prints_brackets_as_data(loaded: Path) -> None:
    """Cell values are data, never rich markup: doc strings and values with `[/X]` print as they are."""
    r = ss("tables", "--store", str(loaded))
    assert r.returncode == 0 and "Traceback" not in r.stderr and "nccl_env" in r.stdout
    r = ss("sql", "SELECT '[/CI] [bold]x' AS s", "--store", str(loaded))
    assert r.returncode == 0 and "[/CI] [bold]x" in r.stdout


def test_a_store_written_by_another_version_says_to_ingest_again(loaded: Path, tmp_path: Path) -> None:
    """A stored table without a column a view now reads (``collective_instances.absent`` came in
    a later version): one line naming the store and what to do, exit code 2."""
    import shutil

    import pyarrow.parquet as pq

    old = tmp_path / "old"
    shutil.copytree(loaded, old)
    parts = [p for p in old.rglob("*.parquet") if "collective_instances" in str(p)]
    assert parts
    for p in parts:
        pq.write_table(pq.read_table(p).drop_columns(["absent"]), p)
    r = ss("sql", "SELECT 1", "--store", str(old))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert str(old) in r.stderr and "ingest the bundle again" in r.stderr
