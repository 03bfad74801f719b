"""Where things live in a store: one directory per job, hive-partitioned by job and table.

```
STORE/
  job=<id>/
    _job.json                       job metadata (sources, hashes, schema/analysis versions)
    table=<name>/part-<k>.parquet   one or more parts per table (one per rank file for traces)
  .staging/<id>.<nonce>/            a job being written; renamed to job=<id> when complete
  catalog.duckdb                    optional DuckDB database with the same views (rebuilt after ingest)
```

Any engine that reads hive-partitioned Parquet (DuckDB, polars, Spark, Trino) sees the columns
``job`` and ``table`` from the paths. A job appears only when its directory is renamed into
place, so a crash or Ctrl-C mid-ingest leaves nothing half-written visible.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stallscope.errors import StoreError

JOB_META = "_job.json"
_JOB_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def default_root() -> Path:
    """``$STALLSCOPE_STORE``, else the per-user data directory."""
    env = os.environ.get("STALLSCOPE_STORE")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("stallscope")) / "store"


def check_job_id(job: str) -> str:
    if not _JOB_RE.match(job):
        raise StoreError(f"invalid job id {job!r}: use letters, digits, '.', '_' or '-' (max 128)")
    return job


@dataclass(frozen=True)
class StoreLayout:
    root: Path

    @classmethod
    def at(cls, root: str | Path | None) -> "StoreLayout":
        return cls(Path(root).expanduser() if root is not None else default_root())

    def job_dir(self, job: str) -> Path:
        return self.root / f"job={check_job_id(job)}"

    def table_dir(self, job: str, table: str) -> Path:
        return self.job_dir(job) / f"table={table}"

    def table_glob(self, table: str, job: str | None = None) -> str:
        j = f"job={job}" if job else "job=*"
        return str(self.root / j / f"table={table}" / "*.parquet")

    def has_table(self, table: str, job: str | None = None) -> bool:
        if job:
            return any(self.table_dir(job, table).glob("*.parquet"))
        return any(self.root.glob(f"job=*/table={table}/*.parquet"))

    @property
    def staging_root(self) -> Path:
        return self.root / ".staging"

    @property
    def catalog_path(self) -> Path:
        return self.root / "catalog.duckdb"

    def jobs(self) -> list[str]:
        """Published job ids, oldest first."""
        if not self.root.is_dir():
            return []
        found = []
        for d in self.root.glob("job=*"):
            meta = d / JOB_META
            if d.is_dir() and meta.exists():
                found.append((meta.stat().st_mtime, d.name[4:]))
        return [j for _, j in sorted(found)]

    def job_meta(self, job: str) -> dict[str, Any]:
        path = self.job_dir(job) / JOB_META
        if not path.exists():
            raise StoreError(f"no job {job!r} in store {self.root}")
        return json.loads(path.read_text())

    def exists(self, job: str) -> bool:
        return (self.job_dir(job) / JOB_META).exists()
