"""The DuckDB catalog: one view per stored table, then the documented SQL views on top.

Every stored table ``T`` is exposed twice: ``_T`` reads the Parquet parts (all jobs, or one job
when the store is opened with ``job=``), and ``T`` is ``SELECT * FROM _T`` unless a SQL view file
redefines ``T`` (``events`` adds ``step``, for example). A table with no parts yet is an empty
view of the right types, so queries never fail for lack of data. Column docs from
``store.schema`` and the SQL doc blocks are attached with ``COMMENT ON``.
"""

from __future__ import annotations

import glob as globmod
import re
from collections.abc import Sequence
from pathlib import Path

import duckdb

from stallscope.store.layout import StoreLayout
from stallscope.store.schema import Column, TableSpec, tables
from stallscope.store.sqldoc import SqlView


_PARQUET_GLOB_RE = re.compile(r"read_parquet\('((?:[^']|'')*)'")
_JOB_COLUMN = Column("job", None, "job id (hive partition of the store; one job per directory)")  # type: ignore[arg-type]


def _q(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _ident(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def _duck_type(t: object) -> str:
    import pyarrow as pa

    if t == pa.int32():
        return "INTEGER"
    if t == pa.int64():
        return "BIGINT"
    if t == pa.float64():
        return "DOUBLE"
    if t == pa.bool_():
        return "BOOLEAN"
    if t == pa.string():
        return "VARCHAR"
    if isinstance(t, pa.ListType):
        return _duck_type(t.value_type) + "[]"
    return "VARCHAR"


def base_view_sql(layout: StoreLayout | None, spec: TableSpec, job: str | None, *, job_dir: Path | None = None) -> str:
    """SQL reading a stored table: all jobs, one job, or one (staged) job directory."""
    if job_dir is not None:
        parts = list(job_dir.glob(f"table={spec.name}/*.parquet"))
        if parts:
            glob = str(job_dir / f"table={spec.name}" / "*.parquet")
            return f"SELECT *, {_q(job or job_dir.name)} AS job FROM read_parquet({_q(glob)}, hive_partitioning = false)"
    elif layout is not None and layout.has_table(spec.name, job):
        glob = layout.table_glob(spec.name, job)
        # every part is written with the registered schema, so the first file's schema holds for all
        # (no union_by_name: that would read every file's footer to build each view)
        return (f"SELECT * EXCLUDE ({_ident('table')}) FROM read_parquet({_q(glob)}, hive_partitioning = true, "
                f"hive_types = {{'job': 'VARCHAR', 'table': 'VARCHAR'}})")
    cols = ", ".join(f"CAST(NULL AS {_duck_type(c.type)}) AS {_ident(c.name)}" for c in spec.columns)
    return f"SELECT {cols}, CAST(NULL AS VARCHAR) AS job WHERE false"


def build(con: duckdb.DuckDBPyConnection, layout: StoreLayout | None, *, job: str | None = None,
          views: Sequence[SqlView] = (), job_dir: Path | None = None, comments: bool = True) -> None:
    """Create every view in ``con`` (an open DuckDB connection).

    ``comments=False`` skips the ``COMMENT ON`` docs (two thirds of the cost: DuckDB rewrites a
    view's catalog entry per commented column); connections that only compute (the analysis
    stage) do not need them.
    """
    specs = tables()
    for spec in specs.values():
        con.execute(f"CREATE OR REPLACE VIEW {_ident('_' + spec.name)} AS {base_view_sql(layout, spec, job, job_dir=job_dir)}")
        con.execute(f"CREATE OR REPLACE VIEW {_ident(spec.name)} AS SELECT * FROM {_ident('_' + spec.name)}")
    root = str(layout.root if layout is not None else (job_dir.parent if job_dir is not None else "."))
    present = []
    for v in views:
        if "{store}" in v.sql:
            # a view over side datasets of the store (compress runs): only when they exist
            sql = v.sql.replace("{store}", root.replace("'", "''"))
            if not all(globmod.glob(g.replace("''", "'")) for g in _PARQUET_GLOB_RE.findall(sql)):
                continue
            try:
                con.execute(sql)
            except duckdb.Error:
                continue
        else:
            con.execute(v.sql)
        present.append(v)
    if comments:
        _comment(con, specs, present)


def _comment(con: duckdb.DuckDBPyConnection, specs: dict[str, TableSpec], views: Sequence[SqlView]) -> None:
    """Attach the column and view docs (stored tables first, then SQL views)."""
    have = set(con.execute("SELECT table_name, column_name FROM duckdb_columns()").fetchall())
    columns_of: dict[str, list[str]] = {}
    for view, name in have:
        columns_of.setdefault(view, []).append(name)
    done: set[tuple[str, str]] = set()

    def col(view: str, name: str, doc: str) -> None:
        if (view, name) in have:
            done.add((view, name))
            con.execute(f"COMMENT ON COLUMN {_ident(view)}.{_ident(name)} IS {_q(doc)}")

    # a SQL view that redefines a stored table keeps the stored columns' docs
    for spec in specs.values():
        con.execute(f"COMMENT ON VIEW {_ident('_' + spec.name)} IS {_q('helper: the stored Parquet parts of ' + spec.name)}")
        con.execute(f"COMMENT ON VIEW {_ident(spec.name)} IS {_q(spec.doc)}")
        for c in [*spec.columns, _JOB_COLUMN]:
            col(spec.name, c.name, c.doc + (f" ({c.unit})" if c.unit else ""))
    # columns a view passes through (``SELECT e.*``) keep the doc of the column they come from
    known: dict[str, str] = {}
    for spec in specs.values():
        for c in spec.columns:
            known.setdefault(c.name, c.doc + (f" ({c.unit})" if c.unit else ""))
    for v in views:
        if v.kind != "VIEW":
            continue
        con.execute(f"COMMENT ON VIEW {_ident(v.name)} IS {_q(v.doc)}")
        for name, doc in v.columns.items():
            col(v.name, name, doc)  # a documented column the view does not have: caught by the docs test
            known.setdefault(name, doc)
        for name in sorted(columns_of.get(v.name, ())):
            if (v.name, name) not in done and name in known:
                col(v.name, name, known[name])


def connect(layout: StoreLayout, *, job: str | None = None, views: Sequence[SqlView] = (),
            threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the catalog built over ``layout``."""
    config = {"threads": threads} if threads else {}
    con = duckdb.connect(":memory:", config=config)
    build(con, layout, job=job, views=views)
    return con


def connect_dir(job_dir: Path, *, views: Sequence[SqlView] = (), job: str | None = None,
                comments: bool = True) -> duckdb.DuckDBPyConnection:
    """A connection over one job directory (used on a staged job before it is published)."""
    con = duckdb.connect(":memory:")
    build(con, None, job=job, views=views, job_dir=Path(job_dir), comments=comments)
    return con


def write_catalog_file(layout: StoreLayout, *, views: Sequence[SqlView] = ()) -> Path:
    """Write ``catalog.duckdb`` (same views, absolute paths) for users of the duckdb CLI."""
    tmp = layout.catalog_path.with_suffix(".duckdb.tmp")
    tmp.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        # one transaction: a file database otherwise commits (and syncs) every statement
        con.execute("BEGIN TRANSACTION")
        try:
            build(con, layout, views=views)
            con.execute("COMMIT")
        except duckdb.Error:
            con.execute("ROLLBACK")
            build(con, layout, views=views)
    finally:
        con.close()
    tmp.replace(layout.catalog_path)
    return layout.catalog_path
