"""stallscope: why was this distributed training job slow?

Ingest per-rank PyTorch profiler (Kineto) traces and NCCL debug logs into a Parquet store,
query them with SQL, and attribute slowdowns to a cause (fabric, synchronization, locality)
and a culprit (ranks, hosts) with evidence.

Python API: ``stallscope.open(store).sql(query)`` returns polars DataFrames;
``stallscope.api.ingest(paths, store=...)`` ingests a bundle (``stallscope.ingest`` is the
ingest stage's package).

>>> import stallscope
>>> stallscope.__version__
'0.3.0'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.3.0"

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    from stallscope.store.queries import Store


def open(store: "str | Path | None" = None, *, job: str | None = None) -> "Store":  # noqa: A001
    """Open a store (default: ``$STALLSCOPE_STORE`` or the per-user data dir).

    ``job`` restricts every view to one job. Returns a :class:`~stallscope.store.queries.Store`
    whose ``sql()`` returns polars DataFrames.
    """
    from stallscope.api import open_store

    return open_store(store, job=job)


__all__ = ["__version__", "open"]
