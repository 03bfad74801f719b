"""Arrow -> Parquet for one job, staged in a private directory and published by one rename.

Workers (other processes) write their parts straight into the staging directory with
:class:`PartWriter`; the coordinating process then writes job-level tables and calls
:meth:`JobWriter.publish`, which renames the staging directory to ``job=<id>``. Until that
rename nothing of the job is visible to readers; an interrupted ingest leaves only a
``.staging`` directory that the next ingest removes.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from stallscope.store.layout import JOB_META, StoreLayout
from stallscope.store.schema import SCHEMA_VERSION, table as table_spec

PARQUET_OPTS: dict[str, Any] = {"compression": "zstd", "compression_level": 1, "write_statistics": True}
#: rows per row group of a streamed table part (see :meth:`PartWriter.append`)
ROW_GROUP_ROWS = 1 << 16
#: staging directories older than this are leftovers of a killed ingest
STALE_STAGING_S = 6 * 3600


#: text columns whose row-group statistics are kept: they are constant or clustered within a part
#: (one file, one host), so min/max skip row groups; other text (names, messages) spans its whole
#: range in every row group, and its statistics cost a sixth of a table's write for nothing
TEXT_STATISTICS = ("host", "file")


def parquet_options(schema: pa.Schema, dictionary: tuple[str, ...] = ()) -> dict[str, Any]:
    """Writer options for a table: dictionary encoding for text columns and the columns named in
    ``dictionary`` (the table's :attr:`~stallscope.store.schema.TableSpec.dictionary`); statistics
    for all but text columns outside :data:`TEXT_STATISTICS`.

    Names, categories and dtype strings repeat and shrink several-fold in a dictionary; numbers
    (timestamps, ids) are mostly distinct, so a dictionary there costs CPU, then falls back; a
    table whose numbers repeat (ranks, devices) names them.
    """
    text = {f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
            or (pa.types.is_list(f.type) and pa.types.is_string(f.type.value_type))}
    stats = [f.name for f in schema if f.name not in text or f.name in TEXT_STATISTICS]
    return {**PARQUET_OPTS, "use_dictionary": [f.name for f in schema if f.name in text or f.name in dictionary] or False,
            "write_statistics": stats or False}


def _options(name: str, schema: pa.Schema) -> dict[str, Any]:
    """:func:`parquet_options` for the registered table ``name``."""
    return parquet_options(schema, table_spec(name).dictionary)


def conform(name: str, data: pa.Table | pa.RecordBatch) -> pa.Table:
    """Cast/reorder ``data`` to the registered schema of table ``name`` (missing columns = null)."""
    schema = table_spec(name).schema
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if data.schema.equals(schema, check_metadata=True):  # conformed already (a parser's batches are made so)
        return data
    cols = []
    for f in schema:
        if f.name in data.column_names:
            col = data.column(f.name)
            if col.type != f.type:
                col = col.cast(f.type)
            cols.append(col)
        else:
            cols.append(pa.nulls(data.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=schema)


class PartWriter:
    """Writes parts of tables for one input file into a staging directory."""

    def __init__(self, staging: str | Path, part: str) -> None:
        self.staging = Path(staging)
        self.part = part
        self._writers: dict[str, pq.ParquetWriter] = {}
        self._pending: dict[str, list[pa.Table]] = {}
        self.rows: dict[str, int] = {}

    def path(self, name: str) -> Path:
        d = self.staging / f"table={name}"
        d.mkdir(parents=True, exist_ok=True)
        return d / f"part-{self.part}.parquet"

    def append(self, name: str, data: pa.Table | pa.RecordBatch) -> None:
        """Stream rows into the table's part (one Parquet file per part, many row groups).

        Rows are buffered up to :data:`ROW_GROUP_ROWS` and written as one row group: a row group
        per parser chunk (~10k events) costs a quarter more to write and to read.
        """
        t = conform(name, data)
        pending = self._pending.setdefault(name, [])
        pending.append(t)
        self.rows[name] = self.rows.get(name, 0) + t.num_rows
        if sum(p.num_rows for p in pending) >= ROW_GROUP_ROWS:
            self._flush(name)

    def _flush(self, name: str) -> None:
        pending = self._pending.pop(name, None)
        if not pending:
            return
        t = pa.concat_tables(pending) if len(pending) > 1 else pending[0]
        w = self._writers.get(name)
        if w is None:
            w = pq.ParquetWriter(self.path(name), t.schema, **_options(name, t.schema))
            self._writers[name] = w
        w.write_table(t, row_group_size=1 << 20)

    def write(self, name: str, data: pa.Table | pa.RecordBatch) -> None:
        """Write a whole (small) table part at once."""
        if name in self._writers or name in self._pending:
            self.append(name, data)
            return
        t = conform(name, data)
        pq.write_table(t, self.path(name), **_options(name, t.schema))
        self.rows[name] = self.rows.get(name, 0) + t.num_rows

    def close(self) -> None:
        for name in list(self._pending):
            self._flush(name)
        for w in self._writers.values():
            w.close()
        self._writers.clear()

    def discard(self) -> None:
        self._pending.clear()
        self.close()
        for name in list(self.rows):
            p = self.staging / f"table={name}" / f"part-{self.part}.parquet"
            p.unlink(missing_ok=True)
        self.rows.clear()


class JobWriter:
    """Owns the staging directory of one job until it is published or aborted."""

    def __init__(self, layout: StoreLayout, job: str) -> None:
        self.layout = layout
        self.job = job
        layout.root.mkdir(parents=True, exist_ok=True)
        layout.staging_root.mkdir(exist_ok=True)
        _clean_stale(layout.staging_root)
        self.staging = layout.staging_root / f"{job}.{uuid.uuid4().hex[:8]}"
        self.staging.mkdir()

    def parts(self, part: str) -> PartWriter:
        return PartWriter(self.staging, part)

    def write(self, name: str, data: pa.Table, *, part: str = "0") -> None:
        """Write a job-level table (one part)."""
        pw = PartWriter(self.staging, part)
        pw.write(name, data)

    def ensure_all_tables(self, names: list[str]) -> None:
        """Write an empty part for each table that has none, so every view exists for every job."""
        for name in names:
            d = self.staging / f"table={name}"
            if not d.exists() or not any(d.glob("*.parquet")):
                PartWriter(self.staging, "empty").write(name, table_spec(name).empty())

    def publish(self, meta: dict[str, Any]) -> Path:
        """Write ``_job.json`` and rename the staging directory into place (replacing an old copy)."""
        meta = {**meta, "job_id": self.job, "schema_version": SCHEMA_VERSION, "published_at": time.time()}
        (self.staging / JOB_META).write_text(json.dumps(meta, indent=1, default=str))
        final = self.layout.job_dir(self.job)
        if final.exists():
            trash = self.layout.staging_root / f"old-{self.job}.{uuid.uuid4().hex[:8]}"
            os.replace(final, trash)
            os.replace(self.staging, final)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(self.staging, final)
        return final

    def abort(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


def _clean_stale(staging_root: Path) -> None:
    now = time.time()
    for d in staging_root.iterdir():
        try:
            if now - d.stat().st_mtime > STALE_STAGING_S:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            pass
