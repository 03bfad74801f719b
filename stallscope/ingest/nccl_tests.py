"""nccl-tests output (``all_reduce_perf`` and friends) -> ``nccl_tests_ranks``, ``nccl_tests_results``, ``nccl_facts``.

nccl-tests prints a device table (``#  Rank  0 Group  0 Pid 123 on host device  0 [0x1b] GPU``),
the result table after a ``#  size  count  type  redop ...`` header, and a summary
(``# Avg bus bandwidth : x``, ``# Out of bounds values : 0 OK``). These lines carry no NCCL
prefix; they are recognized by their ``#`` start and, for result rows, only after a header.

What a line gives depends on its text alone, so each distinct text is read once (:func:`_parse`,
cached) and its row copied per line: logs that gather repeated runs (sweeps, the same test on
many nodes) repeat whole lines.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stallscope.ingest.schemas import nccl as F

if TYPE_CHECKING:  # pragma: no cover
    from stallscope.ingest.nccl_state import LogState


def _wrong(s: str) -> int | None:
    return int(s) if s.isdigit() else None


#: distinct texts whose reading is kept
MAX_MESSAGES = 1 << 14

#: one line read: (table of its row or None, the row without file and line number, whether a result table
#: is open after it (None: as before), whether it was nccl-tests output)
Parsed = tuple[str | None, dict[str, Any] | None, bool | None, bool]


def parse_line(state: LogState, text: str, ln: int) -> bool:
    """One line that starts with ``#`` or follows a result header; True when it was nccl-tests output."""
    table, row, table_open, ok = _parse(text)
    if table_open is not None:
        state.tests_table = table_open
    if table is not None:
        state.add_dict(table, {**row, "file": state.label, "line_no": ln})  # type: ignore[dict-item]
    return ok


def parse_lines(state: LogState, lines: pa.LargeStringArray, line_nos: np.ndarray) -> tuple[np.ndarray, bool]:
    """The lines of a block that :func:`parse_line` may read, in line order (each with its newline; ``line_nos``
    their line numbers): the ``#`` lines and, while a result table may be open, program output. Each distinct
    text is read once.

    The result table opens and closes line by line, and :func:`parse_line` reads a line only while it is
    open or when it starts with ``#``. Each line either sets the state to what it says (a ``#`` line that
    opens or closes it; any other line that closes it: it is read only while the table is open) or leaves
    it, so the state before each line is the last such setting before it, found for all lines at once.
    Lines that give an ``nccl_facts`` row are left to the per-line path (that table also takes rows of NCCL
    lines, which must stay in line order): returns the mask of those lines and whether a result table is
    open after the last line (the caller sets ``state.tests_table`` once the per-line path is done; the
    lines it reads start with ``#`` and do not look at it).
    """
    if len(lines) == 0:
        return np.zeros(0, dtype=bool), state.tests_table
    enc = pc.dictionary_encode(lines)
    texts = enc.dictionary.to_pylist()
    parsed = [_parse(t[:-1].rstrip("\r") if t[-1:] == "\n" else t.rstrip("\r")) for t in texts]
    codes = enc.indices.to_numpy()
    hashed = np.array([t[:1] == "#" for t in texts], dtype=bool)[codes]
    after = np.array([-1 if p[2] is None else int(p[2]) for p in parsed], dtype=np.int8)[codes]  # -1: as before
    sets = np.where(hashed, after, np.where(after == 0, 0, -1))  # the state a line leaves, whatever it was: 0/1, -1 none
    last = np.maximum.accumulate(np.where(sets >= 0, np.arange(len(sets)), -1))  # the last line that set it, so far
    before = np.empty(len(sets), dtype=bool)  # open before each line
    before[0] = state.tests_table
    before[1:] = np.where(last[:-1] >= 0, sets[np.maximum(last[:-1], 0)] == 1, state.tests_table)
    read = before | hashed
    table_open = bool(sets[last[-1]] == 1) if last[-1] >= 0 else state.tests_table
    tables = [p[0] for p in parsed]
    kinds = {t for t in tables if t is not None}
    left = np.zeros(len(codes), dtype=bool)
    for table in sorted(kinds):
        at_table = read & np.array([t == table for t in tables], dtype=bool)[codes]
        if table == "nccl_facts":
            left = at_table
            continue
        if not at_table.any():
            continue
        which = codes[at_table]
        distinct, first, back = np.unique(which, return_index=True, return_inverse=True)
        order = np.argsort(first)  # the table's distinct texts in order of first appearance
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        state.add_gathered(table, [{**parsed[c][1], "file": state.label} for c in distinct[order].tolist()],  # type: ignore[dict-item]
                           rank[back], line_nos[at_table])
    return left, table_open


@lru_cache(maxsize=MAX_MESSAGES)
def _parse(text: str) -> Parsed:
    """What one line gives (:data:`Parsed`; the row is shared: copied before use)."""
    if text[:1] != "#":
        m = F.NCCLTESTS_ROW_RE.match(text)
        if m is None:
            return None, None, False, False
        g = m.group
        return "nccl_tests_results", {
            "size_bytes": int(g("size")), "count": int(g("count")), "type": g("type"), "redop": g("redop"),
            "root": int(g("root")), "oop_time_us": float(g("t1")), "oop_algbw_gbs": float(g("a1")),
            "oop_busbw_gbs": float(g("b1")), "oop_wrong": _wrong(g("w1")), "ip_time_us": float(g("t2")),
            "ip_algbw_gbs": float(g("a2")), "ip_busbw_gbs": float(g("b2")), "ip_wrong": _wrong(g("w2"))}, None, True
    if F.NCCLTESTS_HEADER_RE.match(text):
        return None, None, True, True
    m = F.NCCLTESTS_RANK_RE.match(text)
    if m is not None:
        return "nccl_tests_ranks", {
            "rank": int(m.group("rank")), "group": int(m.group("group")) if m.group("group") else None,
            "pid": int(m.group("pid")), "host": m.group("host"), "device": int(m.group("dev")), "bus": m.group("bus"),
            "gpu_name": m.group("name") or None}, None, True
    for key, rx in (("nccltests.avg_busbw_gbs", F.NCCLTESTS_AVG_RE), ("nccltests.out_of_bounds", F.NCCLTESTS_OOB_RE)):
        m = rx.match(text)
        if m is not None:  # a fact row: no prefix fields (host, pid, tid, cuda_dev are null)
            return "nccl_facts", {"key": key, "value": m.group("v"), "message": text.lstrip("# ").strip()}, False, True
    return None, None, None, False
