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


def _collectives_and_clocks(con: duckdb.DuckDBPyConnection) -> dict[str, pa.Table]:
    """Match collectives, estimate host clock offsets from them, then align member metrics."""
    import polars as pl

    from stallscope.analysis.clock import estimate_offsets, infer_hosts
    from stallscope.analysis.collectives import instances_and_members, match_rows, traceless_hosts, with_gating, with_readiness
    from stallscope.store.queries import arrow_of

    rows = match_rows(con)
    ranks: pl.DataFrame = pl.from_arrow(arrow_of(con.sql("SELECT rank, host, base_time_ns, trace_start_ns, world_size FROM ranks")))  # type: ignore[assignment]
    offsets = estimate_offsets(rows, ranks)
    out: dict[str, pa.Table] = {}
    if ranks.height and ranks["host"].null_count():
        # some ranks' host is named by no input: group them by clock, then estimate again per host
        inferred = infer_hosts(offsets, ranks)
        if inferred:
            hosts = pl.DataFrame({"rank": list(inferred), "host": list(inferred.values()), "source": ["clock"] * len(inferred)},
                                 schema={"rank": pl.Int32, "host": pl.String, "source": pl.String})
            out["rank_hosts"] = hosts.to_arrow()
            new_host = {f"rank-{r}": h for r, h in inferred.items()}
            rows = rows.with_columns(pl.col("host").replace(new_host))
            ranks = ranks.with_columns(pl.coalesce(pl.col("host"), pl.col("rank").replace_strict(inferred, default=None, return_dtype=pl.String)).alias("host"))
            offsets = estimate_offsets(rows, ranks)
    world = max(int(ranks["world_size"].max() or 0), int(ranks["rank"].max()) + 1) if ranks.height else 0  # type: ignore[arg-type]
    known = {int(r): str(h) for r, h in ranks.select("rank", "host").iter_rows() if h is not None}
    inst, members = instances_and_members(rows, offsets, traceless=traceless_hosts(known, world))
    members = with_gating(with_readiness(members, con, offsets), con, offsets)
    out.update({"clock_offsets": offsets.to_arrow(), "collective_instances": inst.to_arrow(), "collective_members": members.to_arrow()})
    return out


def _breakdown(con: duckdb.DuckDBPyConnection) -> dict[str, pa.Table]:
    from stallscope.analysis.breakdown import step_breakdown

    return {"step_breakdown": step_breakdown(con)}


#: analysis steps in dependency order; each sees the tables of the steps before it
STEPS: list[tuple[str, Step]] = [("collectives", _collectives_and_clocks), ("breakdown", _breakdown)]


def materialize(staging: Path, *, views: Sequence[SqlView]) -> list[dict[str, Any]]:
    """Compute every analysis table for the job staged in ``staging``; returns warnings."""
    from stallscope.ingest.writer import PartWriter
    from stallscope.store.catalog import connect_dir

    warnings: list[dict[str, Any]] = []
    if not STEPS:
        return warnings
    job = staging.name.rsplit(".", 1)[0]
    con = connect_dir(staging, views=views, job=job, comments=False)
    try:
        for name, step in STEPS:
            try:
                produced = step(con)
            except (duckdb.Error, ArithmeticError, ValueError) as exc:
                warnings.append({"file": None, "code": "analysis_failed", "message": f"analysis step {name} failed: {exc}".splitlines()[0]})
                continue
            pw = PartWriter(staging, name)
            for table, data in produced.items():
                pw.write(table, data)
            pw.close()
            # later steps read the fresh tables through their views
            con.close()
            con = connect_dir(staging, views=views, job=job, comments=False)
    finally:
        con.close()
    return warnings
