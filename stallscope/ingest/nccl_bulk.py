"""Bulk (columnar) parsing of the line kinds that dominate big NCCL logs.

A multi-GB NCCL log is mostly one of three things: connection lines (``NCCL_DEBUG=INFO`` of a
large job: channels × peers per rank), COLL lines (``NCCL_DEBUG_SUBSYS=COLL``: one per
operation), or program output between them. Parsed one Python line at a time they cost ~10 µs
a line; here a block of lines becomes one Arrow string array (zero-copy over the bytes) and
polars' vectorized string kernels do the work:

* lines without ``NCCL`` are dropped by one substring test; lines with non-ASCII bytes stay with
  the per-line path (polars finds by byte offset but slices by character);
* the prefix ``host:pid:tid [dev] NCCL INFO`` is cut by position and splits after a capture-free
  regex check of its shape (capture groups are what make regex engines slow); ``[dev] NCCL INFO``
  without ``host:pid:tid`` (old logs) and prefixes behind launcher wrappers are read too;
* connection (``Ring``/``Channel`` and CollNet) and COLL messages are taken only when a capture-free
  regex (:data:`_CONN_SHAPE`, :data:`_COLLNET_SHAPE`, :data:`_COLL_SHAPE`) shows the per-line regex
  would read the same fields from them; they are
  then split on spaces and read by token position. Every other line goes back to the per-line
  handlers, in line order; INFO lines among them go with their prefix already cut
  (:attr:`Block.fed`), so the per-line path only routes the message, and those whose message the
  memo replays are replayed column by column (:mod:`stallscope.ingest.nccl_memo`);
* each distinct prefix and each distinct message of a block is read once and the result
  gathered back to its lines: a big init log repeats a few prefixes (one per thread) and a few
  thousand connection messages (channels × peers × transports) over and over;
* values with few distinct strings (the text after ``via``) are classified once per distinct
  value with the per-line path's own function, so both paths give identical rows (a test
  compares them on every real log and on lines at the edge of each shape).

Communicator attribution (the thread's last ``Init START``) is an as-of join against the Init
START/COMPLETE events the per-line handlers recorded for the block.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa

from stallscope.ingest import nccl_messages
from stallscope.ingest.nccl_state import distinct
from stallscope.ingest.schemas import nccl as F
from stallscope.store.schema.nccl import NCCL_CONNECTIONS

if TYPE_CHECKING:  # pragma: no cover
    from stallscope.ingest.nccl_state import Key, LogState

_INFO = "] NCCL INFO "
_KEY = ["host", "pid", "tid"]
#: the end of the text before "] NCCL INFO" (same host rule as the per-line path: no ":<>()[]" in it)
_PREFIX_TAIL = r"(?P<host>[^ :\[\]()<>]+):(?P<pid_s>[0-9]{1,18}):(?P<tid_s>[0-9]{1,18}) \[(?P<dev_s>-?[0-9]{1,9})$"
#: the whole text before "] NCCL INFO" is ``host:pid:tid [dev`` (ASCII digits: the per-line path's isdigit)
_PREFIX_PLAIN = r"^(?P<host>[^ :\[\]()<>]+):(?P<pid>[0-9]{1,18}):(?P<tid>[0-9]{1,18}) \[(?P<dev>-?[0-9]{1,9})$"
#: ... or ``[dev`` after blanks only (logs printed without host:pid:tid; the per-line path's PREFIX_RE gives no host)
_PREFIX_NOHOST = r"^[ \t]*\[-?[0-9]{1,9}$"
#: connection messages the bulk path takes: the per-line CONN_RE's shape with ASCII digits, numbers that fit
#: Int32 (<= 9 digits, <= 7 hex digits), and a printable-ASCII ``via`` text (so trailing blanks strip alike)
_CONN_SHAPE = (r"^(?:Ring|Channel) [0-9]{1,9}(?:/[0-9]{1,9})? : -?[0-9]{1,9}(?:\[[0-9a-fA-F]{0,7}\])?"
               r" -> -?[0-9]{1,9}(?:\[[0-9a-fA-F]{0,7}\])?(?: \[(?:send|receive)\])? via [ -~]*[!-~][ \t\r\n]*$")

#: CollNet connection messages the bulk path takes: the per-line COLLNET_RE's shape with the same limits as
#: :data:`_CONN_SHAPE` (a SHARP job prints them among its ring and tree connections; replayed, each one in a
#: block put the block's connection rows out of line order, and a whole-table gather put them back)
_COLLNET_SHAPE = (r"^(?:CollNet|Coll) [0-9]{1,9}(?:/[0-9]{1,9})? : -?[0-9]{1,9} \[(?:send|receive)\]"
                  r" via [ -~]*[!-~][ \t\r\n]*$")

#: COLL messages the bulk path takes: the per-line COLL_RE's shape with printable-ASCII tokens (so that a
#: split on spaces cuts where its ``\S+`` stops), ASCII digits and numbers that fit their columns; more
#: text only after a ``stream`` value (both paths ignore it), else the line ends after the last field
_COLL_SHAPE = (r"^[A-Za-z0-9_]+: opCount [0-9a-fA-F]{1,15} sendbuff [!-~]+ recvbuff [!-~]+ count [0-9]{1,18}"
               r" datatype -?[0-9]{1,9} op -?[0-9]{1,9} root -?[0-9]{1,9} comm [!-~]+(?: \[nranks=[0-9]{1,9}\])?"
               r"(?: stream [!-~]+(?: [ -~]*)?)?[\r\n]*$")

#: WARN lines the bulk path cuts: ``host:pid:tid [dev] src:line [(func)] NCCL WARN ...`` whose level word is the
#: first, within the 200 characters the per-line path's PREFIX_RE looks back, and every group of PREFIX_RE in its
#: plainest form (ASCII names and digits; no blanks in the function), so that both read the same fields
_WARN_SHAPE = (r"^[A-Za-z0-9_.-]+:[0-9]{1,18}:[0-9]{1,18} \[-?[0-9]{1,9}\] [A-Za-z0-9_./+-]+:[0-9]{1,9}(?: \([A-Za-z0-9_]*\))?"
               r" NCCL WARN(?: |\r?\n$)")
#: ... and its fields; the message is the rest of the line, sliced after the first ``"] "`` (the end of this
#: match in a line of that shape): a capture group over it would walk the whole message
_WARN_PARTS = r"^(?P<host>[^:]+):(?P<pid>[0-9]+):(?P<tid>[0-9]+) \[(?P<cuda_dev>-?[0-9]+)\] "


def lines_array(data: bytes, start: int = 0, end: int | None = None
                ) -> tuple[pa.LargeStringArray, np.ndarray, np.ndarray | None] | None:
    """The lines of ``data[start:end]`` (which ends with a newline) as a string array over ``data``,
    each value keeping its ``\\n``.

    Returns (array, offsets, ascii) with offsets[i] the start of line i in ``data`` and ``ascii`` the mask
    of the pure-ASCII lines (None when all are: the common case, one byte scan); None when the block is
    not valid UTF-8 (the caller then uses the per-line path, which decodes with replacement).
    """
    end = len(data) if end is None else end
    buf = np.frombuffer(data, dtype=np.uint8, count=end - start, offset=start)
    nl = np.flatnonzero(buf == 10)
    offs = np.empty(len(nl) + 1, dtype=np.int64)
    offs[0] = start
    offs[1:] = nl + (start + 1)
    arr = pa.LargeStringArray.from_buffers(len(nl), pa.py_buffer(offs), pa.py_buffer(data))
    if not len(buf) or buf.max() < 0x80:  # ASCII is valid UTF-8
        return arr, offs, None
    # the lines with other bytes are a few (a name, a quote): only they are checked, taken on their own
    wide = np.unique(np.searchsorted(offs, np.flatnonzero(buf >= 0x80) + start, side="right") - 1)
    try:
        arr.take(pa.array(wide)).validate(full=True)
    except pa.ArrowInvalid:
        return None
    ascii_ok = np.ones(len(arr), dtype=bool)
    ascii_ok[wide] = False
    return arr, offs, ascii_ok


@dataclass
class Block:
    """One block's bulk work: which NCCL lines the bulk path took, and the parsed frames to finish."""

    nccl: np.ndarray  #: positions of every line containing ``NCCL``
    taken: np.ndarray  #: positions the bulk path parsed (the per-line path skips them)
    #: connection lines (CollNet ones included): i, host, pid, tid, cuda_dev and ``m``, their row of ``conn_msgs``
    conn: pl.DataFrame | None
    coll: pl.DataFrame | None
    #: other INFO lines whose prefix was cut here, in line order: columns i, msg, host, pid, tid, cuda_dev
    fed: pl.DataFrame | None = None
    #: the distinct connection messages of the block, parsed (:func:`_connections`, :func:`_collnets`; column
    #: ``collnet`` tells them apart)
    conn_msgs: pl.DataFrame | None = None
    #: WARN lines whose prefix was cut here (:data:`_WARN_SHAPE`), in line order: columns i, msg (the text
    #: after ``host:pid:tid [dev] ``, for ``nccl_errors.warn_message``), host, pid, tid, cuda_dev
    warn: pl.DataFrame | None = None
    #: the messages of :attr:`fed` as (codes, distinct values), ``msg == values[codes]``: taken from the block's
    #: distinct messages, so that the memo's split (``nccl_memo.split_block``) does not hash them again
    fed_msgs: tuple[np.ndarray, pl.Series] | None = None


def _tok(col: str, k: int) -> pl.Expr:
    return pl.col(col).list.get(k, null_on_oob=True)


def _uint(e: pl.Expr, dtype: pl.DataType | type[pl.DataType] = pl.Int32) -> pl.Expr:
    """Digits only (no sign) -> integer, else null. Cheaper than a validating regex."""
    return pl.when(~e.str.starts_with("+") & ~e.str.starts_with("-")).then(e.cast(dtype, strict=False))


def _int(e: pl.Expr, dtype: pl.DataType | type[pl.DataType] = pl.Int32) -> pl.Expr:
    """Optionally negative digits -> integer, else null."""
    return pl.when(~e.str.starts_with("+")).then(e.cast(dtype, strict=False))


def _prefixes(heads: pl.Series) -> pl.DataFrame:
    """Columns host, pid, tid, cuda_dev, keep for each distinct text before ``"] NCCL INFO "`` (ASCII lines only).

    ``keep``: the per-line path reads that prefix the same way (other lines stay with it).
    Three shapes: ``host:pid:tid [dev`` from the line start (nearly every line; one anchored
    regex on the distinct prefixes), and the few of the other two (:func:`_other_prefixes`) read
    on their own: a column computed over every head costs as much as the regex.
    """
    df = pl.DataFrame({"head": heads}).with_columns(p=pl.col("head").str.extract_groups(_PREFIX_PLAIN)).unnest("p")
    df = df.select("head", "host", pid=pl.col("pid").cast(pl.Int64), tid=pl.col("tid").cast(pl.Int64),
                   cuda_dev=pl.col("dev").cast(pl.Int32), keep=pl.col("host").is_not_null())
    other = np.flatnonzero(~df["keep"].to_numpy())
    if len(other):
        o = _other_prefixes(df["head"].gather(other))
        df = df.with_columns(df[c].scatter(other, o[c]) for c in ("host", "pid", "tid", "cuda_dev", "keep"))
    return df.drop("head")


def _other_prefixes(heads: pl.Series) -> pl.DataFrame:
    """:func:`_prefixes` of heads not of the plain shape: ``[dev`` alone after blanks (old logs without
    ``host:pid:tid``, host null), or ``host:pid:tid [dev`` as the last words, behind a launcher wrapper
    (a short regex on a short tail; ``[0-9]`` where the heads are ASCII anyway: the Unicode digit class
    makes the unanchored search ~3x as costly)."""
    head = pl.col("head")
    nohost = head.str.contains(_PREFIX_NOHOST)
    df = pl.DataFrame({"head": heads}).with_columns(p=head.str.tail(200).str.extract_groups(_PREFIX_TAIL)).unnest("p").select(
        "host", pid=_uint(pl.col("pid_s"), pl.Int64), tid=_uint(pl.col("tid_s"), pl.Int64), nohost=nohost,
        cuda_dev=pl.when(nohost).then(head.str.strip_chars_start(" \t").str.slice(1).cast(pl.Int32, strict=False))
        .otherwise(_int(pl.col("dev_s"))))
    found = pl.col("host").is_not_null() & pl.col("pid").is_not_null() & pl.col("tid").is_not_null()
    return df.with_columns(keep=(found | pl.col("nohost")) & pl.col("cuda_dev").is_not_null())


def prepare(arr: pa.LargeStringArray, offs: np.ndarray, ascii_ok: np.ndarray | None, *, feed: bool = True) -> Block:
    """Find the NCCL lines of a block, cut the INFO prefixes, and parse the connection and COLL lines.

    Each distinct prefix and each distinct message is read once (a connection line is parsed
    by its text, whatever rank printed it) and the results gathered back to the lines. Only the
    lines of ``ascii_ok`` (None: all) are cut here: polars finds substrings by byte offset but
    slices by character, and on ASCII lines the two agree. With ``feed``, the other prefixed INFO
    lines come back cut (``Block.fed``) for the per-line message handlers, which then skip the
    prefix work.
    """
    lines = pl.Series("l", arr)
    pos = lines.str.find(_INFO, literal=True)
    # lines with "] NCCL INFO " contain NCCL: the substring search only on the others
    found = pos.is_not_null().to_numpy()
    if ascii_ok is not None:  # only ASCII lines are cut here (a mask: no nulls scattered into ``pos``)
        found = found & ascii_ok
    other = np.flatnonzero(~found)
    others = pl.DataFrame({"i": pl.Series(other, dtype=pl.UInt32), "l": lines.gather(other)})
    others = others.filter(pl.col("l").str.contains("NCCL", literal=True))
    nccl_mask = found.copy()
    nccl_mask[others["i"].to_numpy()] = True
    nccl = np.flatnonzero(nccl_mask)
    warn = _warnings(others, ascii_ok) if feed else None
    at = np.flatnonzero(found)
    if len(at) == 0:
        return Block(nccl, np.empty(0, dtype=np.int64), None, None, warn=warn)
    df = _cut(arr.buffers()[2], offs, at, pos.gather(at).to_numpy())
    hcode, heads = distinct(df["head"])
    pre = _prefixes(heads)
    keep = pre["keep"].to_numpy()[hcode]
    if keep.all():  # (nearly every block: no gather of the lines)
        df = df.select("i", "msg").hstack(pre.drop("keep")[hcode])
    else:
        kept = np.flatnonzero(keep)
        df = df.select("i", "msg")[kept].hstack(pre.drop("keep")[hcode[kept]])
    mcode, msgs = distinct(df["msg"])
    # the messages of kept lines, classified once each
    msg = pl.col("msg")
    kinds = pl.DataFrame({"msg": msgs}).select(
        conn=msg.str.contains(_CONN_SHAPE),
        # ("Bootstrap:" and "bootstrapSplit:" have handlers of their own in the per-line path)
        coll=msg.str.contains(_COLL_SHAPE) & ~msg.str.starts_with("Bootstrap:") & ~msg.str.starts_with("bootstrapSplit:"))
    is_conn, is_coll = kinds["conn"].to_numpy()[mcode], kinds["coll"].to_numpy()[mcode]
    kinds = kinds.with_columns(collnet=_collnet_messages(msgs) if is_conn.any() else pl.lit(False))
    is_cn = kinds["collnet"].to_numpy()[mcode]
    if is_cn.any():
        # only lines with host, pid and tid: the per-line path looks up the thread's communicator with null keys too,
        # the as-of join matches none (their replay stays with the per-line path for the same reason)
        is_cn &= df.select(pl.all_horizontal(pl.col(_KEY).is_not_null())).to_series().to_numpy()
    conn = conn_msgs = None
    is_any = is_conn | is_cn
    if is_any.any():
        rows, parsed = [], []
        for kind, parse in (("conn", _connections), ("collnet", _collnets)):
            used = np.flatnonzero(kinds[kind].to_numpy())
            if len(used):
                rows.append(used)
                parsed.append(parse(pl.DataFrame({"msg": msgs[used]}), "msg").with_columns(collnet=pl.lit(kind == "collnet")))
        used = np.concatenate(rows)
        slot = np.full(len(msgs), -1, dtype=np.int64)
        slot[used] = np.arange(len(used))
        conn_msgs = pl.concat(parsed)
        conn = df.filter(pl.Series(is_any)).select("i", "host", "pid", "tid", "cuda_dev", m=pl.Series(slot[mcode[is_any]]))
    coll = _colls(df.filter(pl.Series(is_coll)).with_columns(msg=msg.str.strip_chars_end("\r\n")))
    taken = np.concatenate([f["i"].to_numpy().astype(np.int64) for f in (conn, coll) if f is not None] or [np.empty(0, np.int64)])
    block = Block(nccl, taken, conn, coll, conn_msgs=conn_msgs, warn=warn)
    if feed:
        fed = ~(is_any | is_coll)
        block.fed = df.filter(pl.Series(fed))
        codes = mcode[fed]
        used = np.flatnonzero(np.bincount(codes, minlength=len(msgs)))
        slot = np.zeros(len(msgs), dtype=np.int64)
        slot[used] = np.arange(len(used))
        block.fed_msgs = slot[codes], msgs.gather(used)
    return block


def _collnet_messages(msgs: pl.Series) -> pl.Series:
    """Which of a block's distinct messages are CollNet connections the bulk path takes (:data:`_COLLNET_SHAPE`).

    Asked only of blocks with ring or channel connection lines: among them a CollNet row would put the
    block's bulk connection rows out of line order; alone, the few replayed rows cost less than the bulk
    path's fixed work per block (COLL logs). The regex runs on the messages that start with ``Coll`` only
    (a COLL log's messages are nearly all distinct).
    """
    at = np.flatnonzero(msgs.str.starts_with("Coll").to_numpy())
    out = np.zeros(len(msgs), dtype=bool)
    out[at] = msgs.gather(at).str.contains(_COLLNET_SHAPE).to_numpy()
    return pl.Series("collnet", out)


def _cut(data: pa.Buffer, offs: np.ndarray, at: np.ndarray, pos: np.ndarray) -> pl.DataFrame:
    """Columns i, head, msg: lines ``at`` cut around ``"] NCCL INFO "`` (at byte ``pos`` of each; ASCII lines).

    No text is copied: one string array over the block's bytes takes four values per line (head,
    the cut text, message, the line's end and the bytes up to the next such line), and the heads and
    messages are every fourth value of it. The message stops before the line's newline and one CR
    before it, as the per-line path reads it (the shape checks allow line ends; the COLL split
    strips any others): cut here, not stripped by a pass over every message.
    """
    start = offs[at]
    cuts = np.empty(4 * len(at), dtype=np.int64)
    cuts[0::4] = start
    cuts[1::4] = start + pos
    cuts[2::4] = cuts[1::4] + len(_INFO)
    end = offs[at + 1] - 1  # the newline (every line of the array ends with one)
    buf = np.frombuffer(data, dtype=np.uint8)
    end -= (buf[end - 1] == ord("\r")) & (end > cuts[2::4])
    cuts[3::4] = end
    parts = pl.Series(pa.LargeStringArray.from_buffers(len(cuts) - 1, pa.py_buffer(cuts), data))
    return pl.DataFrame({"i": pl.Series(at, dtype=pl.UInt32), "head": parts.gather(np.arange(0, len(cuts) - 1, 4)),
                         "msg": parts.gather(np.arange(2, len(cuts) - 1, 4))})


def _warnings(df: pl.DataFrame, ascii_ok: np.ndarray | None) -> pl.DataFrame | None:
    """The WARN lines among ``df`` (columns i, l: NCCL lines without an INFO prefix) that have :data:`_WARN_SHAPE`,
    cut after ``host:pid:tid [dev] `` (:attr:`Block.warn`); None when there are none."""
    df = df.filter(pl.col("l").str.contains(" NCCL WARN", literal=True))
    if ascii_ok is not None:
        df = df.filter(pl.Series(ascii_ok[df["i"].to_numpy()]))
    df = df.filter(pl.col("l").str.contains(_WARN_SHAPE) & (pl.col("l").str.find(" NCCL WARN", literal=True) < 200))
    if df.height == 0:
        return None
    line = pl.col("l")
    msg = line.str.slice(line.str.find("] ", literal=True) + 2).str.strip_suffix("\n").str.strip_suffix("\r")
    parts = df.select("i", msg=msg, p=line.str.extract_groups(_WARN_PARTS)).unnest("p")
    return parts.select("i", "msg", host="host", pid=pl.col("pid").cast(pl.Int64),
                        tid=pl.col("tid").cast(pl.Int64), cuda_dev=pl.col("cuda_dev").cast(pl.Int32))


def _connections(df: pl.DataFrame, text: str) -> pl.DataFrame:
    """``Ring|Channel CH[/CI] : SRC[dev] -> DST[dev] [send|receive] via TEXT``, messages already of that shape.

    The shape check (:data:`_CONN_SHAPE`, capture-free) guarantees every field is where the
    splits look for it and fits its column; the fields are then cut by splitting on spaces.
    """
    df = df.with_columns(t=pl.col(text).str.splitn(" ", 7), v=pl.col(text).str.find(" via ", literal=True)
                         ).unnest("t", separator="_")
    tok = lambda k: f"t_field_{k}"  # noqa: E731
    df = df.with_columns(c=pl.col(tok(1)).str.splitn("/", 2), s=pl.col(tok(3)).str.splitn("[", 2),
                         d=pl.col(tok(5)).str.splitn("[", 2)).unnest("c", "s", "d", separator="_")
    dir_t = pl.col(tok(6))
    return df.select(
        kw=tok(0), via=pl.col(text).str.slice(pl.col("v") + 5).str.strip_chars_end(" \t\r\n"),
        channel=pl.col("c_field_0").cast(pl.Int32), conn_index=pl.col("c_field_1").cast(pl.Int32),
        src_rank=pl.col("s_field_0").cast(pl.Int32), dst_rank=pl.col("d_field_0").cast(pl.Int32),
        src_br=pl.col("s_field_1").str.strip_suffix("]").fill_null(""), dst_br=pl.col("d_field_1").str.strip_suffix("]").fill_null(""),
        direction=pl.when(dir_t.str.starts_with("[send]")).then(pl.lit("send"))
        .when(dir_t.str.starts_with("[receive]")).then(pl.lit("receive")))


def _collnets(df: pl.DataFrame, text: str) -> pl.DataFrame:
    """``CollNet|Coll CH[/CI] : RANK [send|receive] via TEXT``, messages already of that shape (:data:`_COLLNET_SHAPE`):
    the columns of :func:`_connections`, the rank as the source, no destination and no brackets (as the per-line
    ``collnet`` handler reads them)."""
    df = df.with_columns(t=pl.col(text).str.splitn(" ", 6), v=pl.col(text).str.find(" via ", literal=True)
                         ).unnest("t", separator="_").with_columns(c=pl.col("t_field_1").str.splitn("/", 2)).unnest("c", separator="_")
    return df.select(
        kw="t_field_0", via=pl.col(text).str.slice(pl.col("v") + 5).str.strip_chars_end(" \t\r\n"),
        channel=pl.col("c_field_0").cast(pl.Int32), conn_index=pl.col("c_field_1").cast(pl.Int32),
        src_rank=pl.col("t_field_3").cast(pl.Int32), dst_rank=pl.lit(None, pl.Int32), src_br=pl.lit(""), dst_br=pl.lit(""),
        direction=pl.col("t_field_4").str.strip_prefix("[").str.strip_suffix("]"))


def _colls(df: pl.DataFrame) -> pl.DataFrame | None:
    """``Op: opCount X sendbuff P recvbuff P count N datatype D op R root T comm P [nranks=N] stream P``.

    Rows already have :data:`_COLL_SHAPE` (and no trailing CR/LF), so the fields are the tokens at
    fixed positions of a split on spaces; 21 parts keep ``stream``'s value a token of its own.
    """
    if df.height == 0:
        return None
    df = df.with_columns(t=pl.col("msg").str.splitn(" ", 21)).unnest("t", separator="_")
    t = lambda k: pl.col(f"t_field_{k}")  # noqa: E731
    nr = t(17).str.starts_with("[nranks=").fill_null(False)
    return df.select(
        "i", "host", "pid", "tid", "cuda_dev", op=t(0).str.strip_suffix(":"), op_count=t(2).str.to_integer(base=16),
        count=t(8).cast(pl.Int64), datatype=t(10).cast(pl.Int32), redop=t(12).cast(pl.Int32), root=t(14).cast(pl.Int32),
        nranks=pl.when(nr).then(t(17).str.slice(8).str.strip_suffix("]").cast(pl.Int32)),
        stream=pl.when(nr & (t(18) == "stream") & (t(19) != "")).then(t(19))
        .when(~nr & (t(17) == "stream") & (t(18) != "")).then(t(18)),
        sendbuff=t(4), recvbuff=t(6), comm_ptr=t(16))


# -- finishing rows (after the per-line handlers ran on the rest of the block) ----------------


class BlockComms:
    """Which communicator each thread is initializing, through one block: the state at the block's start
    (``snapshot``) and the Init START/COMPLETE events the block's lines record (``state.comm_events``,
    complete once the per-line handlers ran). Made a frame once, for every as-of join of the block."""

    def __init__(self, state: LogState, snapshot: dict[Key, tuple[str | None, str | None]]) -> None:
        self.state, self.snapshot = state, snapshot

    @cached_property
    def events(self) -> pl.DataFrame | None:
        """host, pid, tid, line_no (-1: before the block), comm_id, comm_ptr, by line; None when there are none."""
        events: list[tuple[Any, ...]] = [(k[0], k[1], k[2], -1, v[0], v[1]) for k, v in self.snapshot.items()]
        events += [(k[0], k[1], k[2], ln, cid, ptr) for k, ln, cid, ptr in self.state.comm_events]
        events = [e for e in events if e[0] is not None and e[1] is not None and e[2] is not None]
        if not events:
            return None
        return pl.DataFrame(events, orient="row", schema={"host": pl.String, "pid": pl.Int64, "tid": pl.Int64, "line_no": pl.Int64,
                                                          "comm_id": pl.String, "comm_ptr": pl.String}).sort("line_no")


def comm_attribution(df: pl.DataFrame, comms: BlockComms) -> pl.DataFrame:
    """Add comm_id/comm_ptr: the last Init START (not yet COMPLETE) of the row's thread before the row."""
    ev = comms.events
    if ev is None:
        return df.with_columns(comm_id=pl.lit(None, pl.String), comm_ptr=pl.lit(None, pl.String))
    return df.join_asof(ev, on="line_no", by=_KEY, strategy="backward", check_sortedness=False)


_VIA_SCHEMA = {"via": pl.String, "transport": pl.String, "mechanism": pl.String, "net": pl.String, "net_dev": pl.Int32,
               "gdr": pl.Boolean, "gdr_pci": pl.Boolean, "pxn_proxy_rank": pl.Int32, "shared": pl.Boolean, "read": pl.Boolean,
               "ce": pl.Boolean, "indirect_rank": pl.Int32}


def _brackets(side: str) -> list[pl.Expr]:
    """``{side}_dev``, ``{side}_bus_id`` and ``_{side}_bus`` from the bracket text ``{side}_br`` (``""`` when none).

    A bracket is a bus id when it has 4+ characters or a hex letter (the per-line rule); the
    shape checks allow only ``[0-9a-fA-F]{0,7}`` there, so "has a hex letter" is "is not a decimal
    number", which the decimal parse that non-bus brackets need anyway already says.
    """
    br = pl.col(f"{side}_br")
    dec = br.str.to_integer(base=10, strict=False)
    bus = (br.str.len_bytes() >= 4) | (dec.is_null() & (br != ""))
    return [pl.when(bus).then(br.str.to_integer(base=16, strict=False)).otherwise(dec).alias(f"{side}_dev"),
            pl.when(bus).then(br).alias(f"{side}_bus_id"), bus.alias(f"_{side}_bus")]


def finish(state: LogState, block: Block, base: int, comms: BlockComms) -> None:
    """Add the block's bulk rows to the state (``base``: lines before the block)."""
    if block.conn is not None and block.conn_msgs is not None:
        _finish_connections(state, block.conn, block.conn_msgs, base, comms)
    if block.coll is not None:
        df = block.coll.with_columns(line_no=pl.col("i").cast(pl.Int64) + base + 1)
        dt = pl.col("datatype")
        df = df.with_columns(
            datatype_name=dt.replace_strict(_DT_NAME, default=None, return_dtype=pl.String),
            bytes=pl.col("count") * dt.replace_strict(_DT_SIZE, default=None, return_dtype=pl.Int64),
            redop_name=pl.col("redop").replace_strict(F.REDOPS, default=None, return_dtype=pl.String),
            peer=pl.when(pl.col("op").is_in(["Send", "Recv"])).then("root"), file=pl.lit(state.label))
        state.add_frame("nccl_colls", df)


def _finish_connections(state: LogState, rows: pl.DataFrame, msgs: pl.DataFrame, base: int,
                        comms: BlockComms) -> None:
    """Complete the distinct messages (via classification, device brackets, every column the text
    decides), then gather them to the rows, which add their prefix, line and communicator.

    CollNet rows (``collnet``) differ as the per-line handlers do: fingerprints of their own, the rank
    prints, the connection is inter-node, and they say nothing of which host holds a rank."""
    fp = state.fingerprints
    used = np.flatnonzero(np.bincount(rows["m"].to_numpy(), minlength=msgs.height))
    msgs = msgs[used]
    vias = [(v, *nccl_messages.classify_via(v, fp)) for v in msgs["via"].unique().to_list()]
    has_br = (pl.col("src_br") != "") | (pl.col("dst_br") != "")
    msgs = msgs.with_columns(*_brackets("src"), *_brackets("dst"))
    msgs = msgs.with_columns(dev_is_bus_id=pl.when(has_br).then(pl.col("_src_bus") | pl.col("_dst_bus"))).join(
        pl.DataFrame(vias, orient="row", schema=_VIA_SCHEMA), on="via", how="left", maintain_order="left")
    shapes = msgs.select("collnet", "kw", no_ci=pl.col("conn_index").is_null(), bus="dev_is_bus_id", t="transport").unique()
    for collnet, kw, no_ci, bus, t in shapes.iter_rows():
        if collnet:
            fp.add("collnet_coll" if kw == "Coll" else "collnet_noci" if no_ci else "collnet_ci")
        else:
            nccl_messages.connection_fingerprints(fp, kw, None if no_ci else "0", bus, t)
    collnet = pl.col("collnet")
    msgs = msgs.with_columns(
        printer_rank=pl.when(~collnet & (pl.col("direction") == "receive")).then("dst_rank").otherwise("src_rank"),
        inter_node=pl.when(collnet).then(True).when(pl.col("transport").is_in(["P2P", "SHM"])).then(False),
        transport_detail=pl.col("via"))
    msgs = msgs.select(*_MESSAGE_COLUMNS, "collnet")
    slot = np.full(int(used[-1]) + 1, -1, dtype=np.int64)
    slot[used] = np.arange(len(used))
    df = comm_attribution(rows.with_columns(line_no=pl.col("i").cast(pl.Int64) + base + 1), comms)
    df = df.hstack(msgs[slot[df["m"].to_numpy()]]).with_columns(file=pl.lit(state.label))
    for cid, r, h in (df.filter(pl.col("comm_id").is_not_null() & ~collnet).select("comm_id", "printer_rank", "host")
                      .unique(maintain_order=True).iter_rows()):
        state.rank_host[(cid, r)] = h
    state.add_frame("nccl_connections", df)  # (the table's columns: ``collnet`` is dropped)


#: the columns of a connection row that its message decides (the rest: prefix, communicator, provenance)
_MESSAGE_COLUMNS = [c for c in NCCL_CONNECTIONS.schema.names
                    if c not in ("host", "pid", "tid", "cuda_dev", "comm_id", "comm_ptr", "file", "line_no")]


_DT_NAME = {k: v[0] for k, v in F.DATATYPES.items()}
_DT_SIZE = {k: v[1] for k, v in F.DATATYPES.items()}
