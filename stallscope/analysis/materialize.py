"""Run the analysis stage on a staged job and store its tables beside the ingest tables.

Each step is a function ``(con) -> dict[table, Arrow table]`` over a DuckDB connection that sees
the staged job; results are written as parts of analysis tables (see ``store/schema/analysis.py``)
so that queries over analysis results read Parquet instead of recomputing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from stallscope.store.sqldoc import SqlView

Step = Callable[[duckdb.DuckDBPyConnection], dict[str, pa.Table]]
#: analysis steps in dependency order (filled by the analysis modules)
STEPS: list[tuple[str, Step]] = []


def materialize(staging: Path, *, views: Sequence[SqlView]) -> list[dict[str, Any]]:
    """Compute every analysis table for the job staged in ``staging``; returns warnings."""
    from stallscope.ingest.writer import PartWriter
    from stallscope.store.catalog import connect_dir

    warnings: list[dict[str, Any]] = []
    if not STEPS:
        return warnings
    job = staging.name.rsplit(".", 1)[0]
    con = connect_dir(staging, views=views, job=job)
    try:
        for name, step in STEPS:
            try:
                produced = step(con)
            except duckdb.Error as exc:
                warnings.append({"file": None, "code": "analysis_failed", "message": f"analysis step {name} failed: {exc}".splitlines()[0]})
                continue
            pw = PartWriter(staging, "analysis")
            for table, data in produced.items():
                pw.write(table, data)
            pw.close()
            # later steps read the fresh tables through their views
            con.close()
            con = connect_dir(staging, views=views, job=job)
    finally:
        con.close()
    return warnings
