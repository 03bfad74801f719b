"""The public Python API: open a store, ingest a bundle (with analysis), list jobs.

This module sits above every stage (like the CLI), so it is where ingest and analysis meet:
``ingest()`` runs the parsers, then the analysis stage on the staged job, then publishes it and
refreshes the catalog file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stallscope.ingest.pipeline import IngestResult, Progress
from stallscope.store.queries import Store
from stallscope.store.sqldoc import SqlView


def views() -> list[SqlView]:
    """Every documented SQL view: table-level conveniences, then analysis views."""
    from pathlib import Path as _P

    from stallscope.analysis.views import ANALYSIS_SQL
    from stallscope.store.views import STORE_SQL, load_views

    compress_sql = _P(__file__).parent / "compress" / "sql"  # SQL only: no torch import
    return load_views([STORE_SQL, ANALYSIS_SQL, compress_sql])


def open_store(store: str | Path | None = None, *, job: str | None = None) -> Store:
    """Open a store for querying (``Store.sql(q) -> polars.DataFrame``)."""
    return Store.open(store, job=job, views=views())


def ingest(paths: Sequence[str | Path], *, store: str | Path | None = None, job: str | None = None,
           workers: int | None = None, progress: Progress | None = None, force: bool = False,
           analyze: bool = True) -> IngestResult:
    """Ingest a bundle as one job, run the analysis stage on it, and publish it."""
    from stallscope.ingest.pipeline import ingest as run_ingest
    from stallscope.store.catalog import write_catalog_file
    from stallscope.store.layout import StoreLayout

    finalize = None
    if analyze:
        from stallscope.analysis.materialize import materialize

        def finalize(staging: Path) -> list[dict[str, Any]]:
            return materialize(staging, views=views())

    result = run_ingest(paths, store=store, job=job, workers=workers, progress=progress, force=force, finalize=finalize)
    if not result.skipped:
        try:
            write_catalog_file(StoreLayout.at(store), views=views())
        except Exception:  # noqa: BLE001 - best effort: the Parquet files are the source of truth
            pass
    return result


def resolve_job(path_or_job: str | Path, *, store: str | Path | None = None, workers: int | None = None,
                progress: Progress | None = None) -> tuple[Store, IngestResult | None]:
    """A bundle path is ingested (a no-op if already stored); anything else must be a job id.

    Returns the store restricted to that job, and the ingest result when a path was given.
    """
    from stallscope.errors import UsageError
    from stallscope.store.layout import StoreLayout

    p = Path(path_or_job)
    if p.exists():
        res = ingest([p], store=store, workers=workers, progress=progress)
        return open_store(store, job=res.job), res
    layout = StoreLayout.at(store)
    if layout.exists(str(path_or_job)):
        return open_store(store, job=str(path_or_job)), None
    raise UsageError(f"{path_or_job}: neither a bundle path nor a job in store {layout.root}")


def postmortem(path_or_job: str | Path, *, store: str | Path | None = None, workers: int | None = None,
               progress: Progress | None = None) -> dict[str, Any]:
    """Ingest if needed, then run every rule: the findings document (DESIGN.md contract)."""
    from stallscope.rules.engine import postmortem as run

    s, res = resolve_job(path_or_job, store=store, workers=workers, progress=progress)
    job = s.job if s.job is not None else str(path_or_job)
    return run(s, job)
