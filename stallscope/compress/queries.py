"""SQL over a compress run's Parquet tables (DuckDB), until the store registers them as views.

The queries are plain SQL over ``read_parquet(...)`` so they run unchanged in the DuckDB CLI,
and, once the tables are registered in the store, in ``stallscope sql`` with the table name in
place of the ``read_parquet`` call.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from stallscope.errors import CompressError

#: Median time per inference of each layer: node durations are summed per inference first
#: (a layer may run as several nodes), then the median is taken over inferences. ``$table`` is
#: ``read_parquet('<run>/layer_latency.parquet')`` or the store's ``compress_layer_latency``.
LAYER_MEDIANS_SQL = """
WITH per_inference AS (
    SELECT candidate, layer, run_index,
           string_agg(DISTINCT op_type, '+' ORDER BY op_type) AS op_type,
           sum(dur_ns) AS dur_ns
    FROM $table
    WHERE runtime = ? AND batch = ? AND (? IS NULL OR candidate = ?)
    GROUP BY candidate, layer, run_index
), ranked AS (
    SELECT candidate, layer, any_value(op_type) AS op_type,
           median(dur_ns) / 1e3 AS median_us,
           quantile_cont(dur_ns, 0.9) / 1e3 AS p90_us,
           count(*) AS runs,
           row_number() OVER (PARTITION BY candidate ORDER BY median(dur_ns) DESC) AS rank
    FROM per_inference
    GROUP BY candidate, layer
)
SELECT candidate, rank, layer, op_type, median_us, p90_us, runs
FROM ranked WHERE rank <= ?
ORDER BY candidate, rank
"""


def layer_medians(
    run_dir: Path, *, candidate: str | None = None, runtime: str = "onnxruntime", batch: int = 1, top: int = 15
) -> pl.DataFrame:
    """The ``top`` slowest layers per candidate (median µs per inference) of one run."""
    import duckdb

    table = Path(run_dir) / "layer_latency.parquet"
    if not table.is_file():
        raise CompressError(f"{run_dir} is not a compress run folder (no layer_latency.parquet)")
    sql = LAYER_MEDIANS_SQL.replace("$table", f"read_parquet('{_quote(table)}')")
    with duckdb.connect() as con:
        return con.sql(sql, params=[runtime, batch, candidate, candidate, top]).pl()


def _quote(path: Path) -> str:
    return str(path).replace("'", "''")
