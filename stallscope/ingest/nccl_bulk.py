"""Bulk (columnar) parsing of the line kinds that dominate big NCCL logs.

A multi-GB NCCL log is mostly one of three things: connection lines (``NCCL_DEBUG=INFO`` of a
large job: channels × peers per rank), COLL lines (``NCCL_DEBUG_SUBSYS=COLL``: one per
operation), or program output between them. Parsed one Python line at a time they cost ~10 µs
a line; here a block of lines becomes one Arrow string array (zero-copy over the bytes) and
polars' vectorized string kernels do the work:

* lines without ``NCCL`` are dropped by one substring test;
* the prefix ``host:pid:tid [dev] NCCL INFO`` is cut by position (``find``/``slice``/``split``),
  not by a capturing regex (capture groups are what make regex engines slow);
* connection and COLL messages are split on spaces and read by token position; the literal
  tokens (``->``, ``via``, ``opCount``, ``sendbuff`` ...) are checked, and every line that does
  not have exactly the expected shape goes back to the per-line handlers, in line order;
* values with few distinct strings (the text after ``via``) are classified once per distinct
  value with the per-line path's own function, so both paths give identical rows (a test
  compares them on every real log).

Communicator attribution (the thread's last ``Init START``) is an as-of join against the Init
START/COMPLETE events the per-line handlers recorded for the block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa

from stallscope.ingest import nccl_messages
from stallscope.ingest.schemas import nccl as F
from stallscope.store.schema.nccl import NCCL_COLLS, NCCL_CONNECTIONS

if TYPE_CHECKING:  # pragma: no cover
    from stallscope.ingest.nccl_state import Key, LogState

_INFO = "] NCCL INFO "
_KEY = ["host", "pid", "tid"]
#: the end of the text before "] NCCL INFO" (same host rule as the per-line path: no ":<>()[]" in it)
_PREFIX_TAIL = r"(?P<host>[^ :\[\]()<>]+):(?P<pid_s>\d{1,18}):(?P<tid_s>\d{1,18}) \[(?P<dev_s>-?\d{1,9})$"


def lines_array(data: bytes) -> tuple[pa.LargeStringArray, np.ndarray] | None:
    """The lines of ``data`` (which ends with a newline) as a string array, each value keeping its ``\\n``.

    Returns (array, offsets) with offsets[i] the start of line i; None when the block is not
    valid UTF-8 (the caller then uses the per-line path, which decodes with replacement).
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    nl = np.flatnonzero(buf == 10)
    offs = np.empty(len(nl) + 1, dtype=np.int64)
    offs[0] = 0
    offs[1:] = nl + 1
    arr = pa.LargeStringArray.from_buffers(len(nl), pa.py_buffer(offs), pa.py_buffer(data))
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid:
        return None
    return arr, offs


@dataclass
class Block:
    """One block's bulk work: which NCCL lines the bulk path took, and the parsed frames to finish."""

    nccl: np.ndarray  #: positions of every line containing ``NCCL``
    taken: np.ndarray  #: positions the bulk path parsed (the per-line path skips them)
    conn: pl.DataFrame | None
    coll: pl.DataFrame | None


def _tok(col: str, k: int) -> pl.Expr:
    return pl.col(col).list.get(k, null_on_oob=True)


def _uint(e: pl.Expr, dtype: pl.DataType | type[pl.DataType] = pl.Int32) -> pl.Expr:
    """Digits only (no sign) -> integer, else null. Cheaper than a validating regex."""
    return pl.when(~e.str.starts_with("+") & ~e.str.starts_with("-")).then(e.cast(dtype, strict=False))


def _int(e: pl.Expr, dtype: pl.DataType | type[pl.DataType] = pl.Int32) -> pl.Expr:
    """Optionally negative digits -> integer, else null."""
    return pl.when(~e.str.starts_with("+")).then(e.cast(dtype, strict=False))


def prepare(arr: pa.LargeStringArray) -> Block:
    """Find the NCCL lines of a block and parse the connection and COLL lines among them."""
    lines = pl.Series("l", arr)
    nccl_mask = lines.str.contains("NCCL", literal=True)
    nccl = np.flatnonzero(nccl_mask.to_numpy())
    df = pl.DataFrame({"l": lines, "pos": lines.str.find(_INFO, literal=True)}).with_row_index("i")
    df = df.filter(pl.col("pos").is_not_null())
    if df.height == 0:
        return Block(nccl, np.empty(0, dtype=np.int64), None, None)
    pos = pl.col("pos")
    # host:pid:tid [dev are the last words before "] NCCL INFO": a short regex on a short tail
    df = df.with_columns(p=pl.col("l").str.slice(0, pos).str.tail(200).str.extract_groups(_PREFIX_TAIL),
                         msg=pl.col("l").str.slice(pos + len(_INFO)).str.strip_chars_end("\r\n")).unnest("p")
    df = df.filter(pl.col("host").is_not_null()).select(
        "i", "msg", "host", pid=_uint(pl.col("pid_s"), pl.Int64), tid=_uint(pl.col("tid_s"), pl.Int64),
        cuda_dev=_int(pl.col("dev_s")))
    df = df.filter(pl.col("pid").is_not_null() & pl.col("tid").is_not_null() & pl.col("cuda_dev").is_not_null())
    msg = pl.col("msg")
    conn = _connections(df.filter(msg.str.contains(" via ", literal=True)
                                  & (msg.str.starts_with("Channel ") | msg.str.starts_with("Ring "))))
    coll = _colls(df.filter(pl.col("msg").str.contains(": opCount ", literal=True)))
    taken = np.concatenate([f["i"].to_numpy().astype(np.int64) for f in (conn, coll) if f is not None] or [np.empty(0, np.int64)])
    return Block(nccl, taken, conn, coll)


def _rank_dev(col: str, out: str) -> tuple[list[pl.Expr], list[pl.Expr]]:
    """``3[3]`` / ``155[3d000]`` / ``3`` -> rank, bracket text ('' when none), shape ok."""
    parts = pl.col(col).str.split("[")
    br = _tok(f"_{out}", 1)
    return [parts.alias(f"_{out}")], [
        _tok(f"_{out}", 0).alias(f"{out}_rank_s"),
        pl.when(pl.col(f"_{out}").list.len() == 1).then(pl.lit("")).otherwise(br.str.strip_suffix("]")).alias(f"{out}_br"),
        ((pl.col(f"_{out}").list.len() == 1) | ((pl.col(f"_{out}").list.len() == 2) & br.str.ends_with("]"))).alias(f"{out}_ok"),
    ]


def _connections(df: pl.DataFrame) -> pl.DataFrame | None:
    """``Ring|Channel CH[/CI] : SRC[dev] -> DST[dev] [send|receive] via TEXT`` by token position."""
    if df.height == 0:
        return None
    v = pl.col("msg").str.find(" via ", literal=True)
    df = df.with_columns(head=pl.col("msg").str.slice(0, v).str.split(" "),
                         via=pl.col("msg").str.slice(v + 5).str.strip_chars_end())
    df = df.with_columns(n=pl.col("head").list.len(), kw=_tok("head", 0), chci=_tok("head", 1).str.split("/"),
                         s=_tok("head", 3), d=_tok("head", 5), dir_t=_tok("head", 6))
    a1, a2 = _rank_dev("s", "src")
    b1, b2 = _rank_dev("d", "dst")
    df = df.with_columns(*a1, *b1).with_columns(*a2, *b2)
    df = df.with_columns(channel=_uint(_tok("chci", 0)), ci_s=_tok("chci", 1),
                         src_rank=_int(pl.col("src_rank_s")), dst_rank=_int(pl.col("dst_rank_s")))
    df = df.with_columns(conn_index=_uint(pl.col("ci_s")))
    hexok = lambda c: (pl.col(c) == "") | pl.col(c).str.to_integer(base=16, strict=False).is_not_null()  # noqa: E731
    ok = (pl.col("n").is_in([6, 7]) & (_tok("head", 2) == ":") & (_tok("head", 4) == "->")
          & ((pl.col("n") == 6) | pl.col("dir_t").is_in(["[send]", "[receive]"]))
          & (pl.col("chci").list.len() <= 2) & pl.col("channel").is_not_null()
          & (pl.col("ci_s").is_null() | pl.col("conn_index").is_not_null())
          & pl.col("src_ok") & pl.col("dst_ok") & pl.col("src_rank").is_not_null() & pl.col("dst_rank").is_not_null()
          & hexok("src_br") & hexok("dst_br") & (pl.col("via") != ""))
    df = df.filter(ok.fill_null(False))
    if df.height == 0:
        return None
    return df.select(
        "i", "host", "pid", "tid", "cuda_dev", "kw", "via", "channel", "conn_index", "src_rank", "dst_rank",
        "src_br", "dst_br", direction=pl.when(pl.col("n") == 7).then(pl.col("dir_t").str.strip_chars("[]")))


def _colls(df: pl.DataFrame) -> pl.DataFrame | None:
    """``Op: opCount X sendbuff P recvbuff P count N datatype D op R root T comm P [nranks=N] stream P``."""
    if df.height == 0:
        return None
    df = df.with_columns(t=pl.col("msg").str.split(" "))
    t = lambda k: _tok("t", k)  # noqa: E731
    lits = {1: "opCount", 3: "sendbuff", 5: "recvbuff", 7: "count", 9: "datatype", 11: "op", 13: "root", 15: "comm"}
    ok = pl.lit(True)
    for k, word in lits.items():
        ok = ok & (t(k) == word)
    nr17 = t(17).str.starts_with("[nranks=")
    df = df.with_columns(
        op=t(0).str.strip_suffix(":"), op_count=pl.when(t(2).str.len_chars() <= 15).then(t(2).str.to_integer(base=16, strict=False)),
        count=_uint(t(8), pl.Int64), datatype=_int(t(10)), redop=_int(t(12)), root=_int(t(14)),
        nranks=pl.when(nr17).then(_uint(t(17).str.slice(8).str.strip_suffix("]"))),
        stream=pl.when(t(17) == "stream").then(t(18)).when(t(18) == "stream").then(t(19)))
    ok = (ok & t(0).str.ends_with(":") & pl.col("op").str.contains(r"^\w+$") & pl.col("op_count").is_not_null()
          & pl.col("count").is_not_null() & pl.col("datatype").is_not_null() & pl.col("redop").is_not_null()
          & pl.col("root").is_not_null() & t(16).is_not_null()
          & (nr17.is_null() | ~nr17 | pl.col("nranks").is_not_null()))
    df = df.filter(ok.fill_null(False))
    if df.height == 0:
        return None
    return df.select("i", "host", "pid", "tid", "cuda_dev", "op", "op_count", "count", "datatype", "redop", "root",
                     "nranks", "stream", sendbuff=t(4), recvbuff=t(6), comm_ptr=t(16))


# -- finishing rows (after the per-line handlers ran on the rest of the block) ----------------


def _comm_attribution(state: LogState, df: pl.DataFrame, snapshot: dict[Key, tuple[str | None, str | None]]) -> pl.DataFrame:
    """Add comm_id/comm_ptr: the last Init START (not yet COMPLETE) of the row's thread before the row."""
    events: list[tuple[Any, ...]] = [(k[0], k[1], k[2], -1, v[0], v[1]) for k, v in snapshot.items()]
    events += [(k[0], k[1], k[2], ln, cid, ptr) for k, ln, cid, ptr in state.comm_events]
    events = [e for e in events if e[0] is not None and e[1] is not None and e[2] is not None]
    if not events:
        return df.with_columns(comm_id=pl.lit(None, pl.String), comm_ptr=pl.lit(None, pl.String))
    ev = pl.DataFrame(events, orient="row", schema={"host": pl.String, "pid": pl.Int64, "tid": pl.Int64,
                                                    "line_no": pl.Int64, "comm_id": pl.String, "comm_ptr": pl.String})
    return df.join_asof(ev.sort("line_no"), on="line_no", by=_KEY, strategy="backward", check_sortedness=False)


_VIA_SCHEMA = {"via": pl.String, "transport": pl.String, "mechanism": pl.String, "net": pl.String, "net_dev": pl.Int32,
               "gdr": pl.Boolean, "gdr_pci": pl.Boolean, "pxn_proxy_rank": pl.Int32, "shared": pl.Boolean, "read": pl.Boolean,
               "ce": pl.Boolean, "indirect_rank": pl.Int32}


def _bracket_value(br: pl.Expr, is_bus: pl.Expr) -> pl.Expr:
    s = pl.when(br != "").then(br)
    return pl.when(is_bus).then(s.str.to_integer(base=16, strict=False)).otherwise(s.str.to_integer(base=10, strict=False))


def finish(state: LogState, block: Block, base: int, snapshot: dict[Key, tuple[str | None, str | None]]) -> None:
    """Add the block's bulk rows to the state (``base``: lines before the block)."""
    if block.conn is not None:
        _finish_connections(state, block.conn, base, snapshot)
    if block.coll is not None:
        df = block.coll.with_columns(line_no=pl.col("i").cast(pl.Int64) + base + 1)
        dt = pl.col("datatype")
        df = df.with_columns(
            datatype_name=dt.replace_strict(_DT_NAME, default=None, return_dtype=pl.String),
            bytes=pl.col("count") * dt.replace_strict(_DT_SIZE, default=None, return_dtype=pl.Int64),
            redop_name=pl.col("redop").replace_strict(F.REDOPS, default=None, return_dtype=pl.String),
            peer=pl.when(pl.col("op").is_in(["Send", "Recv"])).then("root"), file=pl.lit(state.label))
        state.add_arrow("nccl_colls", df.select(NCCL_COLLS.schema.names).to_arrow())


def _finish_connections(state: LogState, df: pl.DataFrame, base: int, snapshot: dict[Key, tuple[str | None, str | None]]) -> None:
    fp = state.fingerprints
    vias = [(v, *nccl_messages.classify_via(v, fp)) for v in df["via"].unique().to_list()]
    s_bus = (pl.col("src_br").str.len_chars() >= 4) | pl.col("src_br").str.contains("[a-fA-F]")
    d_bus = (pl.col("dst_br").str.len_chars() >= 4) | pl.col("dst_br").str.contains("[a-fA-F]")
    has_br = (pl.col("src_br") != "") | (pl.col("dst_br") != "")
    df = df.with_columns(
        line_no=pl.col("i").cast(pl.Int64) + base + 1,
        src_dev=_bracket_value(pl.col("src_br"), s_bus), dst_dev=_bracket_value(pl.col("dst_br"), d_bus),
        src_bus_id=pl.when(s_bus).then("src_br"), dst_bus_id=pl.when(d_bus).then("dst_br"),
        dev_is_bus_id=pl.when(has_br).then(s_bus | d_bus),
    ).join(pl.DataFrame(vias, orient="row", schema=_VIA_SCHEMA), on="via", how="left", maintain_order="left")
    shapes = df.select("kw", no_ci=pl.col("conn_index").is_null(), bus="dev_is_bus_id", t="transport").unique()
    for kw, no_ci, bus, t in shapes.iter_rows():
        nccl_messages.connection_fingerprints(fp, kw, None if no_ci else "0", bus, t)
    df = _comm_attribution(state, df, snapshot).with_columns(
        printer_rank=pl.when(pl.col("direction") == "receive").then("dst_rank").otherwise("src_rank"),
        inter_node=pl.when(pl.col("transport").is_in(["P2P", "SHM"])).then(False),
        file=pl.lit(state.label), transport_detail=pl.col("via"))
    for cid, r, h in df.filter(pl.col("comm_id").is_not_null()).select("comm_id", "printer_rank", "host").unique().iter_rows():
        state.rank_host[(cid, r)] = h
    state.add_arrow("nccl_connections", df.select(NCCL_CONNECTIONS.schema.names).to_arrow())


_DT_NAME = {k: v[0] for k, v in F.DATATYPES.items()}
_DT_SIZE = {k: v[1] for k, v in F.DATATYPES.items()}
