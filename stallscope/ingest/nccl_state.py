"""What one NCCL log parse accumulates: row buffers per table and the cross-line state.

The handlers (``nccl_messages``, ``nccl_setup``, ``nccl_topology``, ``nccl_errors``, ``watchdog``,
``nccl_tests``) share one :class:`LogState`. Hot tables are built as positional tuples in the
TableSpec's column order; the rest as dicts. Tables in :data:`DEFERRED` stay in memory (as dicts)
until the end of the file because later lines complete them (version, nNodes, GDR per HCA).

A table's rows are written in line order whatever the read block: a block's rows come from the
bulk path, the column replay (both as polars frames) and the per-line handlers (tuples) in no common
order, so at the block's end (:meth:`LogState.end_block`) a table's frames and tuples are put in line
order while they are still polars frames (a gather of string views, no string copy) and made one
Arrow batch; batches are written only there and at the end of the file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from stallscope.ingest.writer import conform
from stallscope.store.schema.nccl import NCCL_TABLES

#: rows buffered per table before a batch is written (at the end of the block that reaches it)
BATCH_ROWS = 50_000
#: connection rows kept for end-of-file resolution of ``inter_node`` before they are written anyway
MAX_DEFERRED_CONNECTIONS = 200_000
#: a batch out of line order in runs this long on average is reordered as slices (:func:`in_line_order`)
MIN_RUN = 256
#: frames' column of a row's place among its line's rows in the table, where a line has several
#: (the column replay's rows); rows without it are their line's only rows, or in order already
SEQ = "_seq"
#: buffers with fewer rows are built by pyarrow (:meth:`RowBuffer.to_arrow`)
ARROW_ROWS = 4096
#: tables kept whole (as dicts; watchdog rows as (shared record, line number) pairs) until the end of the file
DEFERRED = ("nccl_comms", "nccl_net", "watchdog_timeouts")
#: deferred tables whose end-of-file completion also takes frames of rows (replayed column by column)
DEFERRED_FRAMES = ("nccl_net",)

Key = tuple[str | None, int | None, int | None]


class TableSink(Protocol):
    """Where finished batches go (a :class:`~stallscope.ingest.writer.PartWriter`, or a collector in tests)."""

    def append(self, name: str, data: pa.Table) -> None: ...


def in_line_order(data: pa.Table, key: np.ndarray | None = None) -> pa.Table:
    """``data``'s rows by ``key`` (default: ``line_no``, rows without one last), stably (the rows of one line
    keep their order).

    The rows come in runs already in order: a block's bulk rows, its replayed rows (e.g. ~70
    connection rows among 72k bulk ones), its per-line rows; at the end of the file, completed dicts
    and replayed frames. Runs of :data:`MIN_RUN` rows on average are put in order as slices (no
    copy); shorter ones are gathered by ``take`` (a copy).
    """
    if key is None:
        key = data.column("line_no").to_numpy()  # float with NaN where null
        if np.isnan(key).any():
            key = np.where(np.isnan(key), np.inf, key)
    plan = _line_order(key)
    if plan is None:
        return data
    order, cuts = plan
    if len(cuts) * MIN_RUN > len(order):
        return data.take(order)
    return _in_runs(data, order, cuts)


def _line_order(key: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(the stable order of ``key``, where it breaks into runs of consecutive rows), or None when in order."""
    if len(key) < 2 or bool(np.all(key[1:] >= key[:-1])):
        return None
    order = np.argsort(key, kind="stable")
    return order, np.flatnonzero(np.diff(order) != 1) + 1


def _in_runs(data: pa.Table, order: np.ndarray, cuts: np.ndarray) -> pa.Table:
    """``data`` in ``order`` as zero-copy slices, one per run of consecutive rows (cut at ``cuts``)."""
    starts = [0, *cuts.tolist()]
    return pa.concat_tables([data.slice(int(order[a]), b - a) for a, b in zip(starts, [*starts[1:], len(order)])])


def _line_key(df: pl.DataFrame) -> np.ndarray:
    """Each row's ``line_no << 16 | _seq`` (:data:`SEQ`, 0 where absent): sorted, the rows are in line order,
    a line's rows in their place. A row without a line sorts after every line (``line_no`` < 2^46)."""
    key = df["line_no"].fill_null(1 << 46).to_numpy().astype(np.int64, copy=False) << 16
    if SEQ in df.columns:
        key |= df[SEQ].to_numpy()
    return key


def distinct(s: pl.Series) -> tuple[np.ndarray, pl.Series]:
    """(codes, values): ``s == values[codes]``, values in order of first appearance. A big log repeats its
    prefixes and most of its messages."""
    enc = pc.dictionary_encode(s.to_arrow(compat_level=pl.CompatLevel.newest()))
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    idx = enc.indices  # int32 without nulls (every kept line has a prefix and a message)
    codes = np.frombuffer(idx.buffers()[1], dtype=np.int32)[idx.offset: idx.offset + len(idx)]
    return codes.astype(np.int64), pl.Series(s.name, enc.dictionary)


def opt_int(s: str | None) -> int | None:
    """``"12"`` -> 12; None or ``""`` -> None."""
    return int(s) if s is not None and s != "" else None


class RowBuffer:
    """Rows of one table as tuples in the TableSpec's column order; flushed as Arrow tables."""

    def __init__(self, name: str, schema: pa.Schema) -> None:
        self.name = name
        self.schema = schema
        self.columns: tuple[str, ...] = tuple(schema.names)
        self.rows: list[tuple[Any, ...]] = []

    def to_frame(self) -> pl.DataFrame:
        """The buffered rows as a polars frame of the table's columns, with the values :meth:`to_arrow` gives."""
        if len(self.rows) >= ARROW_ROWS and self._flat:
            try:
                return self.polars_columns()
            except (pl.exceptions.PolarsError, OverflowError, TypeError, ValueError):
                pass
        df = pl.from_arrow(self.to_arrow())
        assert isinstance(df, pl.DataFrame)
        return df

    def to_arrow(self) -> pa.Table:
        """The buffered rows as a table of the registered schema; values that do not fit become null.

        Built column by column where every value already has its column's type: by pyarrow for
        fewer than :data:`ARROW_ROWS` rows or a table with list columns (polars' setup of a column
        costs more than its values), else by polars; otherwise by polars from the row tuples (which
        also converts, e.g. ``"1"`` in an integer column), and only when some value still does not
        fit, one value at a time.
        """
        if not self.rows:
            return self.schema.empty_table()
        by_columns = self.by_arrow_columns if len(self.rows) < ARROW_ROWS or not self._flat else self.by_polars_columns
        for build in (by_columns, self.by_rows):
            try:
                return build()
            except (pl.exceptions.PolarsError, pa.ArrowException, OverflowError, TypeError, ValueError):
                pass
        cols: list[Any] = list(zip(*self.rows))
        arrays = [pa.array([coerce(v, f.type) for v in values], type=f.type) for f, values in zip(self.schema, cols)]
        return pa.Table.from_arrays(arrays, schema=self.schema)

    def by_arrow_columns(self) -> pa.Table:
        """The rows by pyarrow, column by column; raises when a value is not of its column's kind."""
        return pa.Table.from_arrays([pa.array(v, type=f.type) for f, v in zip(self.schema, zip(*self.rows))], schema=self.schema)

    def by_polars_columns(self) -> pa.Table:
        """The rows by polars, column by column (strict: raises when a value is not of its column's type)."""
        return arrow_table(self.polars_columns(), self.schema)

    def polars_columns(self) -> pl.DataFrame:
        """The rows as a polars frame, column by column (strict: raises when a value is not of its column's type)."""
        schema = self.pl_schema
        return pl.DataFrame([pl.Series(n, v, dtype=schema[n], strict=True) for n, v in zip(self.columns, zip(*self.rows))])

    def by_rows(self) -> pa.Table:
        """The rows by polars from the row tuples (converts what it can; raises on what it cannot)."""
        return arrow_table(pl.DataFrame(self.rows, schema=self.pl_schema, orient="row", strict=True), self.schema)

    @property
    def _flat(self) -> bool:
        """No nested (list) column: polars builds those slowly column by column."""
        return not any(t.is_nested() for t in self.pl_schema.values())

    @property
    def pl_schema(self) -> dict[str, pl.DataType]:
        """The table's polars schema (computed once per process)."""
        got = _PL_SCHEMAS.get(self.name)
        if got is None:
            got = _PL_SCHEMAS[self.name] = dict(pl.DataFrame(self.schema.empty_table()).schema)
        return got


def arrow_table(df: pl.DataFrame, schema: pa.Schema) -> pa.Table:
    """``df`` (the columns of ``schema``, in order) as an Arrow table of exactly ``schema``.

    Text leaves polars as string views and is copied into the schema's string type by one cast:
    a quarter faster than polars' default conversion to large strings (64k connection rows: 4.5 vs
    6.0 ms), after which only the offsets are narrowed.
    """
    return df.to_arrow(compat_level=pl.CompatLevel.newest()).cast(schema)


#: polars schema of each table (computed once per process)
_PL_SCHEMAS: dict[str, dict[str, pl.DataType]] = {}


def coerce(v: Any, t: pa.DataType) -> Any:
    """One value made to fit an Arrow type, or None (mutated input must never crash a write)."""
    if v is None:
        return None
    try:
        if pa.types.is_integer(t):
            bits = t.bit_width - 1
            iv = int(v)
            return iv if -(1 << bits) <= iv < (1 << bits) else None
        if pa.types.is_floating(t):
            return float(v)
        if pa.types.is_boolean(t):
            return bool(v)
        if pa.types.is_list(t):
            return [x for x in (coerce(x, t.value_type) for x in v) if x is not None]
        return str(v)
    except (TypeError, ValueError, OverflowError):
        return None


@dataclass
class LogState:
    """Everything one file's parse accumulates."""

    label: str
    sink: TableSink
    buffers: dict[str, RowBuffer] = field(default_factory=dict)
    deferred: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: rows of :data:`DEFERRED_FRAMES` tables replayed column by column (the schema's columns, then
    #: ``_ln`` and ``_seq``: line number and place among the line's rows, for line order)
    deferred_frames: dict[str, list[pl.DataFrame]] = field(default_factory=dict)
    #: Arrow batches in line order (one per block that gave the table frames), waiting to be written
    chunks: dict[str, list[pa.Table]] = field(default_factory=dict)
    #: polars frames of rows made in bulk (:meth:`add_frame`), per table, until the end of the block
    frames: dict[str, list[pl.DataFrame]] = field(default_factory=dict)
    #: applied to a table's batch just before it is written
    on_flush: Callable[[LogState, str, pa.Table], pa.Table] | None = None
    #: names of version fingerprints seen (see schemas.nccl.FINGERPRINTS)
    fingerprints: set[str] = field(default_factory=set)
    #: (host, pid) -> (version, cuda) from `NCCL version` lines with a prefix
    proc_versions: dict[tuple[str | None, int | None], tuple[str, str | None]] = field(default_factory=dict)
    #: every distinct (version, cuda) printed in the file
    file_versions: set[tuple[str, str | None]] = field(default_factory=set)
    #: (host, pid, tid) -> (comm_id, comm_ptr) of the communicator that thread is initializing
    thread_comm: dict[Key, tuple[str | None, str | None]] = field(default_factory=dict)
    #: Init START / COMPLETE seen in the current block: ((host, pid, tid), line_no, comm_id, comm_ptr)
    comm_events: list[tuple[Key, int, str | None, str | None]] = field(default_factory=list)
    #: (comm_id, rank) -> host, for telling whether a NET connection crosses hosts
    rank_host: dict[tuple[str, int], str] = field(default_factory=dict)
    #: per-thread topology-dump state: indentation column -> node, and the graph-search counter
    topo_cols: dict[Key, dict[int, str]] = field(default_factory=dict)
    graph_seq: dict[Key, int] = field(default_factory=dict)
    #: distinct INFO message -> its recorded effects, or None when its handler is not pure (nccl_memo)
    memo: dict[str, Any] = field(default_factory=dict)
    #: the same for WARN lines, by their text after ``host:pid:tid [dev] `` (``nccl_errors.warn_message``)
    warn_memo: dict[str, Any] = field(default_factory=dict)
    #: tables with a batch to write at the end of the block (:meth:`end_block`)
    due: set[str] = field(default_factory=set)
    #: inside an nccl-tests result table
    tests_table: bool = False
    unknown: int = 0
    unknown_example: str | None = None
    unknown_offset: int | None = None
    junk: int = 0
    junk_offset: int | None = None
    long_lines: int = 0
    lines: int = 0
    warnings: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for spec in NCCL_TABLES:
            self.buffers[spec.name] = RowBuffer(spec.name, spec.schema)
        for name in DEFERRED:
            self.deferred[name] = []

    def ctx(self, host: str | None, pid: int | None, tid: int | None, dev: int | None, ln: int | None) -> dict[str, Any]:
        """The prefix and provenance fields every row starts with."""
        return {"host": host, "pid": pid, "tid": tid, "cuda_dev": dev, "file": self.label, "line_no": ln}

    def comm_of(self, host: str | None, pid: int | None, tid: int | None) -> tuple[str | None, str | None]:
        """(comm_id, comm_ptr) the thread is initializing, or (None, None)."""
        return self.thread_comm.get((host, pid, tid), (None, None))

    def _pending(self, table: str) -> int:
        return (len(self.buffers[table].rows) + sum(t.num_rows for t in self.chunks.get(table, ()))
                + sum(f.height for f in self.frames.get(table, ())))

    def _maybe_flush(self, table: str, n: int) -> None:
        if n >= BATCH_ROWS and (table != "nccl_connections" or n >= MAX_DEFERRED_CONNECTIONS):
            self.due.add(table)

    def end_block(self) -> None:
        """Put the rows of the block in line order, and write the batches due (every line before is parsed).

        A table's rows are then in line order: its Arrow batches, then its tuple rows (of blocks that
        gave it no frame, which follow every batch). A block that gave a table frames makes them and
        its tuple rows one batch (:meth:`_settle`): one block's rows at a time, not a whole batch of
        200k rows at its flush (whose copy touches ~50 MB of fresh memory).
        """
        for table in list(self.frames):
            self._settle(table)
        for table in self.due:
            self.flush(table)
        self.due.clear()

    def _settle(self, table: str) -> None:
        """The table's frames and tuple rows as one Arrow batch in line order, after its other batches.

        The rows of one line come from one path (bulk, column replay or per-line handler), each part in
        line order but the replay's, whose rows carry their place in the line (:data:`SEQ`): a stable
        sort by line and place. Short runs are gathered on the polars frames (string views), so the text
        is copied once, into Arrow; long runs are sliced. Rows without a line go last.
        """
        parts = self.frames.pop(table)
        buf = self.buffers[table]
        if buf.rows:
            parts.append(buf.to_frame())
            buf.rows.clear()
        cols = buf.columns
        plan = _line_order(np.concatenate([_line_key(p) for p in parts])) if len(parts) > 1 or SEQ in parts[0].columns else None
        if plan is not None and len(plan[1]) * MIN_RUN <= len(plan[0]):
            # long runs (a few rows among many bulk ones): slices of the parts made Arrow, as a gather would
            # copy every row (and a polars frame of many slices costs more to make Arrow than its parts)
            data = _in_runs(pa.concat_tables([arrow_table(p.select(cols), buf.schema) for p in parts]), *plan)
        else:
            df = pl.concat([p.select(cols) for p in parts], how="vertical_relaxed") if len(parts) > 1 else parts[0]
            if plan is not None:
                df = df.rechunk()[plan[0]]  # one chunk first: a gather across chunks costs ~4x
            data = arrow_table(df.select(cols), buf.schema)
        self.chunks.setdefault(table, []).append(data)

    def add(self, table: str, row: tuple[Any, ...]) -> None:
        buf = self.buffers[table]
        buf.rows.append(row)
        if len(buf.rows) >= BATCH_ROWS:
            self._maybe_flush(table, self._pending(table))

    def add_frame(self, table: str, df: pl.DataFrame) -> None:
        """Rows made in bulk: the table's columns in line order, or with :data:`SEQ` in any order (types
        are made exact when the block's rows become a batch, :meth:`_settle`)."""
        if df.height:
            cols = self.buffers[table].columns
            self.frames.setdefault(table, []).append(df.select(*cols, SEQ) if SEQ in df.columns else df.select(cols))
            self._maybe_flush(table, self._pending(table))

    def add_dict(self, table: str, d: dict[str, Any]) -> None:
        self.add(table, tuple(map(d.get, self.buffers[table].columns)))

    def add_gathered(self, table: str, rows: list[dict[str, Any]], at: list[int] | np.ndarray,
                     line_nos: list[int] | np.ndarray) -> None:
        """Rows of lines that repeat a few distinct rows: line k's row is ``rows[at[k]]`` with ``line_no``
        ``line_nos[k]`` (the lines in order, after every row added so far). Each distinct row is made
        once, and the table is gathered from them: no dict and no tuple per line."""
        buf = self.buffers[table]
        distinct = RowBuffer(table, buf.schema)
        distinct.rows = [tuple(map(d.get, buf.columns)) for d in rows]
        data = distinct.to_frame()[at]
        self.add_frame(table, data.with_columns(pl.Series("line_no", line_nos, data.schema["line_no"])))

    def flush(self, table: str) -> None:
        if table in self.frames:
            self._settle(table)
        buf = self.buffers[table]
        parts = self.chunks.pop(table, [])
        if buf.rows:
            parts.append(buf.to_arrow())
            buf.rows.clear()
        if not parts:
            return
        data = in_line_order(pa.concat_tables([conform(table, p) for p in parts]) if len(parts) > 1 else conform(table, parts[0]))
        if self.on_flush is not None:
            data = self.on_flush(self, table, data)
        self.sink.append(table, data)

    def warn(self, code: str, message: str, *, byte_offset: int | None = None, count: int = 1) -> None:
        self.warnings.append({"file": self.label, "rank": None, "code": code, "message": message,
                              "byte_offset": byte_offset, "count": count})
