"""Parse each distinct NCCL INFO message once per file, replay it for every line that repeats it.

Setup lines repeat: every rank of a job prints the same ``NCCL_SOCKET_IFNAME set by environment
to ..``, ``NET/IB : Using ..``, ``Using network IB``, ``cudaDriverVersion ..``, ``Connected all
rings`` ..., and only the prefix (host, pid, tid, device) and the line number differ. Most
message handlers are *pure*: what they add depends on the message alone, plus the prefix fields
and the thread's communicator, which they copy into rows without looking at them.

:func:`dispatch` runs the handler once against a :class:`_Recorder` that stands in for the
:class:`~stallscope.ingest.nccl_state.LogState`: prefix fields and the communicator are
placeholder objects, and rows, deferred rows and fingerprints are recorded. Later lines with
the same message replay the recording with their own values in place of the placeholders, so
the rows are identical to what the handler would have added. A handler that touches any other
part of the state (per-thread communicator tracking, topology indentation, versions, rank ->
host) raises ``AttributeError`` on the recorder (computing with a placeholder raises
``TypeError``): that message is marked impure and always runs for real. The handlers were checked
for branches on a prefix field that do not touch the state (there are none). Connection,
communicator, version, topology and COLL messages are not tried at all (``nccl_messages``).

Where a block has many replayable lines, :func:`split_block` and :func:`add_rows` replay them
column by column instead (one join on the message, constant columns per recorded row, the
lines' own values in the placeholder columns); the rows are the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from stallscope.ingest.nccl_state import DEFERRED_FRAMES, RowBuffer, distinct

if TYPE_CHECKING:  # pragma: no cover
    from stallscope.ingest.nccl_state import LogState

#: distinct messages remembered per file before the memo is emptied (bounded memory)
MAX_MESSAGES = 50_000


class _Slot:
    """A placeholder for one per-line value in a recorded row (``index`` into the values of :meth:`Replay.apply`)."""

    __slots__ = ("name", "index")

    def __init__(self, name: str, index: int) -> None:
        self.name, self.index = name, index

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<{self.name}>"

    def _used(self, *_: Any) -> Any:
        """A handler that looks at a per-line value (tests it, compares, formats or hashes it) is
        not pure: raising here makes :func:`dispatch` mark the message impure."""
        raise TypeError(f"handler used the per-line value {self.name}")

    __bool__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = __str__ = __format__ = _used  # type: ignore[assignment]


HOST, PID, TID, DEV, LINE, COMM_ID, COMM_PTR = (_Slot(n, i) for i, n in enumerate(
    ("host", "pid", "tid", "dev", "line", "comm_id", "comm_ptr")))


class _DeferredRecorder:
    """``state.deferred[name]`` while recording: appends are kept as ``("deferred", name, dict)``."""

    def __init__(self, out: list[tuple[str, str, Any]], name: str) -> None:
        self.out, self.name = out, name

    def append(self, d: dict[str, Any]) -> None:
        self.out.append(("deferred", self.name, d))


class _Recorder:
    """The part of LogState a pure handler may use; anything else is missing (AttributeError)."""

    def __init__(self, state: LogState) -> None:
        self.label = state.label
        self.effects: list[tuple[str, str, Any]] = []
        self.fingerprints: set[str] = set()
        self.deferred = {name: _DeferredRecorder(self.effects, name) for name in state.deferred}
        self._columns = {name: buf.columns for name, buf in state.buffers.items()}

    def ctx(self, host: Any, pid: Any, tid: Any, dev: Any, ln: Any) -> dict[str, Any]:
        return {"host": host, "pid": pid, "tid": tid, "cuda_dev": dev, "file": self.label, "line_no": ln}

    def comm_of(self, host: Any, pid: Any, tid: Any) -> tuple[Any, Any]:
        return COMM_ID, COMM_PTR

    def add(self, table: str, row: tuple[Any, ...]) -> None:
        self.effects.append(("row", table, row))

    def add_dict(self, table: str, d: dict[str, Any]) -> None:
        self.add(table, tuple(map(d.get, self._columns[table])))


class Replay:
    """What one message did: the handler's answer, fingerprints, and rows with placeholder positions."""

    __slots__ = ("ok", "fingerprints", "rows", "comm", "deferred", "columnar")

    def __init__(self, ok: bool, rec: _Recorder) -> None:
        self.ok = ok
        self.fingerprints = frozenset(rec.fingerprints)
        self.comm = False  # whether some row holds the thread's communicator
        self.rows: list[tuple[str, str, Any, tuple[tuple[Any, int], ...]]] = []
        for kind, table, data in rec.effects:
            items = enumerate(data) if kind == "row" else data.items()
            subs = tuple((k, v.index) for k, v in items if isinstance(v, _Slot))
            self.comm = self.comm or any(v >= COMM_ID.index for _, v in subs)
            self.rows.append((kind, table, list(data) if kind == "row" else data, subs))
        #: whether some row goes to a table completed at the end of the file
        self.deferred = any(kind != "row" for kind, *_ in self.rows)
        #: whether :func:`add_rows` can replay it (decided on first use: :func:`_columnar`)
        self.columnar: bool | None = None

    def apply(self, state: LogState, host: Any, pid: Any, tid: Any, dev: Any, ln: int) -> bool:
        """Add this message's rows for one line (the values that replace the placeholders)."""
        if self.fingerprints:
            state.fingerprints |= self.fingerprints
        vals = (host, pid, tid, dev, ln, *(state.comm_of(host, pid, tid) if self.comm else (None, None)))
        for kind, table, data, subs in self.rows:
            out = data.copy()
            for k, slot in subs:
                out[k] = vals[slot]
            if kind == "row":
                state.add(table, tuple(out))
            else:
                state.deferred[table].append(out)
        return self.ok


Handler = Callable[..., bool]
_UNSEEN = object()


def record(state: LogState, memo: dict[str, Replay | None], handler: Handler, msg: str) -> Replay | None:
    """The replay of ``msg`` (recorded on first sight), or None when its handler is not pure."""
    rep = memo.get(msg, _UNSEEN)
    if rep is not _UNSEEN:
        return rep  # type: ignore[return-value]
    if len(memo) >= MAX_MESSAGES:
        memo.clear()
    rec = _Recorder(state)
    try:
        ok = handler(rec, msg, HOST, PID, TID, DEV, LINE)
    except (AttributeError, TypeError):  # it used the state, or computed with a placeholder
        memo[msg] = None
        return None
    rep = memo[msg] = Replay(ok, rec)
    return rep


def dispatch(state: LogState, memo: dict[str, Replay | None], handler: Handler, msg: str, host: Any, pid: Any, tid: Any,
             dev: Any, ln: int) -> bool:
    """``handler(state, msg, ...)``, parsed once per distinct ``msg`` when the handler proves pure."""
    rep = record(state, memo, handler, msg)
    if rep is None:  # impure: always for real
        return handler(state, msg, host, pid, tid, dev, ln)
    return rep.apply(state, host, pid, tid, dev, ln)


# -- a block's replays, column by column ------------------------------------------------------
#
# In a big job's init log most setup lines are replays. Replayed one at a time they cost a Python
# row tuple each, and the tuples then cost again on their way to Arrow. Here the block's cut INFO
# lines (a frame from the bulk path) are matched to their replays by one join on the message; each
# recorded row becomes one row of constant columns, joined to the lines that replay it, with the
# line's own values put in the placeholder columns. Only what the per-line replay would add is
# added: the same rows (``tests/ingest/test_nccl_log.py`` compares the two on every real log).

#: fewest lines of a block replayed column by column: the column-by-column replay has a fixed cost
#: of about a millisecond per table and block, which fewer lines replayed one by one do not reach
MIN_COLUMN_LINES = 2048

#: the lines frame's column of each placeholder (by ``_Slot.index``)
_SLOT_COLUMNS = ("host", "pid", "tid", "cuda_dev", "line_no", "comm_id", "comm_ptr")


def split_block(state: LogState, lines: pl.DataFrame, replay_of: Callable[[LogState, str], Replay | None],
                msgs: tuple[np.ndarray, pl.Series] | None = None) -> tuple[pl.DataFrame, list[Replay], pl.DataFrame]:
    """Split a block's cut INFO lines (columns ``i, msg, host, pid, tid, cuda_dev``, in line order) into
    the lines replayed column by column (:func:`add_rows`) and the rest, for the per-line handlers.

    A line is replayed here when its message has a replay (``replay_of``, recording it on first sight)
    that understood it and that :func:`_columnar` allows; a replay that holds the thread's communicator
    also needs host, pid and tid (the as-of join that finds the communicator matches no nulls).
    ``msgs``: the lines' messages as (codes, distinct values) where the caller has them (else found here).
    Returns (those lines with a column ``rid``, the replays by ``rid``, the other lines).
    """
    # one hash pass: each distinct message looked up once, no join on text
    codes, msgs = distinct(lines["msg"]) if msgs is None else msgs
    reps: list[Replay] = []
    rid_of = np.full(len(msgs), -1, dtype=np.int32)  # distinct message -> its replay's rid
    comm = np.zeros(len(msgs), dtype=bool)  # ... which holds the thread's communicator
    for c, msg in enumerate(msgs.to_list()):
        rep = replay_of(state, msg)
        if rep is None or not rep.ok:
            continue
        if rep.columnar is None:
            rep.columnar = _columnar(state, rep)
        if not rep.columnar:
            continue
        rid_of[c], comm[c] = len(reps), rep.comm
        reps.append(rep)
    if not reps:
        return lines.clear(), reps, lines
    rid = rid_of[codes]
    go = rid >= 0
    if comm.any():
        no_key = (lines["host"].is_null() | lines["pid"].is_null() | lines["tid"].is_null()).to_numpy()
        go &= ~(comm[codes] & no_key)
    if go.sum() < MIN_COLUMN_LINES:
        return lines.clear(), [], lines
    keep = pl.Series(go)
    return lines.filter(keep).with_columns(rid=pl.Series(rid[go])), reps, lines.filter(~keep)


def _columnar(state: LogState, rep: Replay) -> bool:
    """Whether the rows of ``rep`` can be added column by column: rows of plain tables always; rows of
    deferred tables only where their completion takes frames (:data:`DEFERRED_FRAMES`) and every
    recorded value fits its column as it is (the completion matches rows by value: a value made to
    fit would match where the dict it came from would not)."""
    for kind, table, data, _subs in rep.rows:
        if kind == "row":
            continue
        if table not in DEFERRED_FRAMES:
            return False
        buf = state.buffers[table]
        row = [None if isinstance(v, _Slot) else v for v in map(data.get, buf.columns)]
        try:
            pl.DataFrame([row], schema=buf.pl_schema, orient="row", strict=True)
        except (pl.exceptions.PolarsError, OverflowError, TypeError, ValueError):
            return False
    return True


def add_rows(state: LogState, lines: pl.DataFrame, reps: list[Replay], base: int,
             with_comm: Callable[[pl.DataFrame], pl.DataFrame]) -> None:
    """Add the rows of the lines :func:`split_block` kept (``base``: lines before the block).

    ``with_comm`` adds each line's communicator (``comm_id``, ``comm_ptr``) to a frame with host, pid,
    tid and line_no in line order; it runs after the block's per-line handlers (which record the
    communicator events). Rows of one table come out in line order, a line's rows in recorded order.
    """
    if lines.height == 0:
        return
    groups: list[tuple[str, tuple[tuple[Any, int], ...], list[list[Any]]]] = []
    gids: dict[tuple[str, tuple[tuple[Any, int], ...]], int] = {}
    plan: list[tuple[int, int, int, int]] = []  # (rid, seq, group, row of the group's constants)
    for rid, rep in enumerate(reps):
        if rep.fingerprints:
            state.fingerprints |= rep.fingerprints
        for seq, (kind, table, data, subs) in enumerate(rep.rows):
            if kind != "row":  # a dict: its values in column order, placeholders by column position
                cols = state.buffers[table].columns
                data = list(map(data.get, cols))
                subs = tuple((cols.index(k), slot) for k, slot in subs if k in cols)
            g = gids.setdefault((table, subs), len(groups))
            if g == len(groups):
                groups.append((table, subs, []))
            const = groups[g][2]
            plan.append((rid, seq, g, len(const)))
            row = list(data)
            for k, _slot in subs:
                row[k] = None
            const.append(row)
    if not plan:
        return
    df = lines.with_columns(line_no=pl.col("i").cast(pl.Int64) + (base + 1))
    if any(rep.comm for rep in reps):
        df = with_comm(df)
    else:
        df = df.with_columns(comm_id=pl.lit(None, pl.String), comm_ptr=pl.lit(None, pl.String))
    df = df.select("rid", "line_no", *(pl.col(c).alias(f"_slot{k}") for k, c in enumerate(_SLOT_COLUMNS)))
    plan_df = pl.DataFrame(plan, orient="row", schema={"rid": pl.Int32, "_seq": pl.Int32, "_g": pl.Int32, "_c": pl.UInt32})
    df = df.join(plan_df, on="rid", how="inner").rename({"line_no": "_ln"})
    out: dict[str, list[pl.DataFrame]] = {}
    for (g,), part in df.partition_by("_g", as_dict=True).items():
        table, subs, const_rows = groups[g]  # type: ignore[index]
        buf = RowBuffer(table, state.buffers[table].schema)
        buf.rows = const_rows
        consts = pl.from_arrow(buf.to_arrow())
        assert isinstance(consts, pl.DataFrame)
        names = buf.columns
        slots = {names[k]: pl.col(f"_slot{slot}").cast(consts.schema[names[k]], strict=False) for k, slot in subs}
        rows = consts.drop(list(slots)).select(pl.all().gather(part["_c"]))
        t = pl.concat([part.select("_ln", "_seq", **slots), rows], how="horizontal")
        out.setdefault(table, []).append(t.select("_ln", "_seq", *names))
    for table, parts in out.items():  # each in line order once sorted by (line, _seq): left to who writes them
        t = pl.concat(parts)
        if table in state.deferred:
            state.deferred_frames.setdefault(table, []).append(t)
        else:
            state.add_frame(table, t)
