"""PyTorch ProcessGroupNCCL watchdog lines -> ``watchdog_timeouts``.

Six formats are known (PyTorch 1.x to 2.x), found anywhere in a line (Ray, glog and tqdm
prefixes are common):

* timed-out work, ``WorkNCCL(...) ran for N milliseconds before timing out``, with fields
  ``OpType, TensorShape, Timeout(ms)`` (oldest, ``RuntimeError: [Rank R] Caught collective ...``),
  ``SeqNum, OpType, Timeout(ms)``, or ``SeqNum, OpType, NumelIn, NumelOut, Timeout(ms)``;
* PG status lines, ``[PG <id> [PG GUID <guid>[(desc)]] Rank R]`` followed by ``Timeout at NCCL work: S,
  last enqueued NCCL work: E, last completed NCCL work: C.``, ``Exception (either an error or
  timeout) detected by watchdog at work: S, ...`` or ``failure detected by watchdog at work
  sequence id: S PG status: last enqueued work: E, last completed work: C``.

Teardown notices, the FlightRecorder notice and the C++ exception site (``Exception raised from
checkTimeout at .../ProcessGroupNCCL.cpp:565``) are kept as their own records. At the end of the
file each timeout row takes the PG and last enqueued/completed fields of the status line of the
same process, rank and work sequence number.

A record depends on the line's text alone (plus the file and line number), and a log repeats
its watchdog lines (every rank prints the same teardown notice; a grep of many logs repeats
whole lines), so each distinct text is read once (:func:`_record`, cached) and copied per line.
"""

from __future__ import annotations

import re
from functools import lru_cache
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from stallscope.ingest.schemas.nccl import RAY_WRAPPER_RE

if TYPE_CHECKING:  # pragma: no cover
    from stallscope.ingest.nccl_state import LogState

_GLOG_RE = re.compile(r"\[(?P<lvl>[EWIF])(?P<ts>\d{3,4} \d{2}:\d{2}:\d{2}\.\d+)? ?(?:\S*/)?(?P<src>ProcessGroupNCCL\.cpp:\d+)\]")
_GLOG_RANK_RE = re.compile(r"\[rank(?P<r>-?\d+)\]:")
_PG_TAG_RE = re.compile(
    r"\[PG (?:ID )?(?P<pg>[^\s\]()]+)(?: PG GUID (?P<guid>[^\s\]()]+))?(?:\s*\((?P<desc>[^)]*)\))? Rank (?P<rank>-?\d+)\]"
)
_RANK_TAG_RE = re.compile(r"\[Rank (?P<rank>-?\d+)\]")
_WORK_RE = re.compile(r"WorkNCCL\((?P<f>.*?)\) ran for (?P<ran>-?\d+) milliseconds")
_FIELD_RE = re.compile(r"(?P<k>\w+)(?:\(ms\))?=(?P<v>\[[^\]]*\]|[^,]+)")
_STATUS_RES = (
    ("timeout_at_work", re.compile(r"Timeout at NCCL work: (?P<seq>-?\d+), last enqueued NCCL work: (?P<enq>-?\d+),"
                                   r" last completed NCCL work: (?P<comp>-?\d+)")),
    ("exception_at_work", re.compile(r"Exception \(either an error or timeout\) detected by watchdog at work: (?P<seq>-?\d+),"
                                     r" last enqueued NCCL work: (?P<enq>-?\d+), last completed NCCL work: (?P<comp>-?\d+)")),
    ("failure_at_seq", re.compile(r"failure detected by watchdog at work sequence id: (?P<seq>-?\d+) PG status:"
                                  r" last enqueued work: (?P<enq>-?\d+), last completed work: (?P<comp>-?\d+)")),
)
_TEARDOWN = ("Some NCCL operations have failed or timed out", "To avoid data inconsistency")
_RAISED_RE = re.compile(r"Exception raised from (?P<fn>\S+) at (?P<loc>\S*ProcessGroupNCCL\.cpp:\d+)")


def _int(s: str | None) -> int | None:
    try:
        return int(s) if s is not None else None
    except ValueError:
        return None


#: distinct texts whose record is kept
MAX_MESSAGES = 1 << 14


def parse_line(state: LogState, text: str, ln: int) -> bool:
    """Add the watchdog record in ``text`` (if any); True when the line was one."""
    rec = _record(text)
    if rec is None:
        return False
    state.deferred["watchdog_timeouts"].append((rec, ln))  # type: ignore[arg-type]
    return True


def record_of(text: str) -> dict[str, Any] | None:
    """The record of one line's text without file and line number (cached and shared: copy it before
    changing it), or None when the line is no watchdog line."""
    return _record(text)


def add_records(state: LogState, records: list[dict[str, Any]], line_nos: list[int]) -> None:
    """Add the records of lines read in bulk (``record_of`` each line's text; ``line_nos`` theirs)."""
    state.deferred["watchdog_timeouts"].extend(zip(records, line_nos))  # type: ignore[arg-type]


@lru_cache(maxsize=MAX_MESSAGES)
def _record(text: str) -> dict[str, Any] | None:
    """The record of one line without its file and line number (shared: copied before use); None when the
    line is none of the known shapes."""
    work = _WORK_RE.search(text)
    status = None
    fmt = None
    if work is None:
        for fmt, rx in _STATUS_RES:
            status = rx.search(text)
            if status is not None:
                break
    if work is not None:
        record = "timeout"
    elif status is not None:
        record = "status"
    elif any(t in text for t in _TEARDOWN):
        record, fmt = "teardown", None
    elif "FlightRecorder" in text:
        record, fmt = "flight_recorder", None
    else:
        raised = _RAISED_RE.search(text)
        if raised is None:
            return None
        return {"record": "exception_site", "src": raised.group("loc"), "message": raised.group(0)}
    pg, tag, glog, grank = _PG_TAG_RE.search(text), _RANK_TAG_RE.search(text), _GLOG_RE.search(text), _GLOG_RANK_RE.search(text)
    ray = RAY_WRAPPER_RE.search(text)
    rank = pg.group("rank") if pg else tag.group("rank") if tag else grank.group("r") if grank else None
    starts = [m.start() for m in (pg, tag) if m is not None]
    start = min(starts) if starts else (glog.end() if glog else 0)
    d: dict[str, Any] = {"pid": _int(ray.group("pid")) if ray else None, "ip": ray.group("ip") if ray else None,
                         "rank": _int(rank), "pg_id": pg.group("pg") if pg else None, "pg_guid": pg.group("guid") if pg else None,
                         "pg_desc": pg.group("desc") if pg else None, "record": record, "format": fmt,
                         "log_time": (glog.group("lvl") + glog.group("ts")) if glog and glog.group("ts") else None,
                         "src": glog.group("src") if glog else None, "message": text[start:].strip()[:2000]}
    if work is not None:
        f = {m.group("k"): m.group("v").strip() for m in _FIELD_RE.finditer(work.group("f"))}
        d.update(seq=_int(f.get("SeqNum")), op_type=f.get("OpType"), numel_in=_int(f.get("NumelIn")),
                 numel_out=_int(f.get("NumelOut")), tensor_shape=f.get("TensorShape"), timeout_ms=_int(f.get("Timeout")),
                 elapsed_ms=_int(work.group("ran")),
                 format="tensor_shape" if "TensorShape" in f else "seqnum_numel" if "NumelIn" in f else "seqnum")
    elif status is not None:
        d.update(seq=_int(status.group("seq")), last_enqueued=_int(status.group("enq")),
                 last_completed=_int(status.group("comp")))
    return d


def finish(state: LogState) -> None:
    """Complete timeout rows from the status line of the same work, then move every row to the table.

    The file's rows are kept as (shared record, line number) pairs: a row is its record, completed,
    plus the file and line. Completion depends on the record alone (and the file's first status line of
    each work), so each distinct record is completed once and becomes one row of a small table, which
    is gathered to the lines.
    """
    rows: list[tuple[dict[str, Any], int]] = state.deferred["watchdog_timeouts"]  # type: ignore[assignment]
    if not rows:
        return
    rows.sort(key=itemgetter(1))  # lines read in bulk (nccl_log) came before the block's others
    status: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    for d, _ in rows:
        if d["record"] == "status":
            status.setdefault((d["pid"], d["rank"], d["seq"]), d)
    codes: dict[int, int] = {}  # id(record) -> its row (the records are alive: rows hold them)
    distinct: list[dict[str, Any]] = []
    at = []
    for d, _ in rows:
        c = codes.get(id(d))
        if c is None:
            c = codes[id(d)] = len(distinct)
            distinct.append(_completed(d, status, state.label))
        at.append(c)
    state.add_gathered("watchdog_timeouts", distinct, at, [ln for _, ln in rows])


def _completed(d: dict[str, Any], status: dict[tuple[Any, Any, Any], dict[str, Any]], label: str) -> dict[str, Any]:
    """A record's row but its line number: a timeout takes the PG and last enqueued/completed fields it lacks
    from the status line of the same process, rank and work."""
    d = {**d, "file": label}
    if d["record"] == "timeout":
        s = status.get((d["pid"], d["rank"], d["seq"]))
        if s is not None:
            for k in ("pg_id", "pg_guid", "pg_desc", "last_enqueued", "last_completed"):
                if d.get(k) is None:
                    d[k] = s[k]
    return d
