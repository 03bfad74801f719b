"""The Python face of a store: ``Store.sql(query) -> polars.DataFrame``.

>>> import stallscope, tempfile
>>> s = stallscope.open(tempfile.mkdtemp())
>>> s.sql("SELECT count(*) AS n FROM ranks")["n"][0]
0
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stallscope.errors import QueryError, StoreError
from stallscope.store.layout import StoreLayout
from stallscope.store.sqldoc import SqlView

if TYPE_CHECKING:  # pragma: no cover
    import duckdb
    import polars as pl
    import pyarrow as pa


def one_line(exc: BaseException) -> str:
    """DuckDB errors span several lines (query echo, caret): keep the informative first line."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    for line in text.splitlines()[1:]:
        if line.startswith("LINE "):
            first += f" ({line.strip()[:120]})"
            break
    return first


def arrow_of(rel: Any) -> "pa.Table":
    """Arrow table of a DuckDB relation (``to_arrow_table`` in DuckDB 2, ``arrow`` in 1.x)."""
    f = getattr(rel, "to_arrow_table", None) or getattr(rel, "fetch_arrow_table", None) or rel.arrow
    out = f()
    return out.read_all() if hasattr(out, "read_all") else out


class Store:
    """A store opened for querying. Construction does no I/O; the DuckDB catalog is built on first use."""

    def __init__(self, layout: StoreLayout, *, job: str | None = None, views: Sequence[SqlView] = ()) -> None:
        self.layout = layout
        self.job = job
        self.views = list(views)
        self._con: duckdb.DuckDBPyConnection | None = None

    @classmethod
    def open(cls, root: str | Path | None = None, *, job: str | None = None, views: Sequence[SqlView] | None = None) -> "Store":
        layout = StoreLayout.at(root)
        if job is not None and not layout.exists(job):
            known = layout.jobs()
            hint = f"; jobs: {', '.join(known[-5:])}" if known else "; the store is empty"
            raise StoreError(f"no job {job!r} in store {layout.root}{hint}")
        if views is None:
            from stallscope.store.views import STORE_SQL, load_views

            views = load_views([STORE_SQL])
        return cls(layout, job=job, views=views)

    @property
    def root(self) -> Path:
        return self.layout.root

    @property
    def con(self) -> "duckdb.DuckDBPyConnection":
        if self._con is None:
            from stallscope.store.catalog import connect

            try:
                self._con = connect(self.layout, job=self.job, views=self.views)
            except Exception as exc:  # noqa: BLE001 - a broken store must be one line too
                # a view naming a column its stored table lacks: tables written by an older version
                hint = ("; its tables were written by another stallscope version: ingest the bundle again"
                        if "Binder Error" in str(exc) and "not found" in str(exc) else "")
                raise StoreError(f"cannot open store {self.layout.root}: {one_line(exc)}{hint}") from None
        return self._con

    def _relation(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> Any:
        import duckdb

        if not query or not query.strip():
            raise QueryError("empty query")
        try:
            return self.con.sql(query, params=params) if params is not None else self.con.sql(query)
        except duckdb.Error as exc:
            raise QueryError(one_line(exc)) from None

    def sql(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> "pl.DataFrame":
        """Run a query; the result as a polars DataFrame (empty for statements without rows)."""
        import duckdb
        import polars as pl

        rel = self._relation(query, params)
        if rel is None:
            return pl.DataFrame()
        try:
            return rel.pl()
        except duckdb.Error as exc:
            raise QueryError(one_line(exc)) from None

    def arrow(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> "pa.Table":
        """Run a query; the result as an Arrow table."""
        import duckdb
        import pyarrow as pa

        rel = self._relation(query, params)
        if rel is None:
            return pa.table({})
        try:
            return arrow_of(rel)
        except duckdb.Error as exc:
            raise QueryError(one_line(exc)) from None

    def jobs(self) -> "pl.DataFrame":
        """Published jobs with their metadata (id, ranks, files, warnings, when)."""
        import datetime as dt

        import polars as pl

        rows = []
        for j in self.layout.jobs():
            m = self.layout.job_meta(j)
            rows.append({"job": j, "ranks": int(m.get("ranks", 0)), "files": len(m.get("files", {})),
                         "warnings": len(m.get("warnings", [])), "sources": ", ".join(m.get("sources", []))[:200],
                         "ingested_at": dt.datetime.fromtimestamp(m.get("published_at", 0), tz=dt.timezone.utc).replace(microsecond=0)})
        schema = {"job": pl.String, "ranks": pl.Int64, "files": pl.Int64, "warnings": pl.Int64, "sources": pl.String,
                  "ingested_at": pl.Datetime(time_zone="UTC")}
        return pl.DataFrame(rows, schema=schema)

    def tables(self, *, helpers: bool = False) -> "pl.DataFrame":
        """Tables and views with their documentation."""
        q = """SELECT view_name AS name, comment AS doc FROM duckdb_views()
               WHERE NOT internal AND schema_name = 'main' ORDER BY view_name"""
        df = self.sql(q)
        if not helpers:
            import polars as pl

            df = df.filter(~pl.col("name").str.starts_with("_"))
        return df

    def columns(self, name: str) -> "pl.DataFrame":
        """Columns of one table or view: name, type, doc."""
        df = self.sql("""SELECT column_name AS name, data_type AS type, comment AS doc FROM duckdb_columns()
                         WHERE table_name = ? AND schema_name = 'main' ORDER BY column_index""", [name])
        if df.height == 0:
            raise QueryError(f"no table or view named {name!r} (see `stallscope tables`)")
        return df

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
