"""nccl-tests output (``all_reduce_perf`` and friends) -> ``nccl_tests_ranks``, ``nccl_tests_results``, ``nccl_facts``.

nccl-tests prints a device table (``#  Rank  0 Group  0 Pid 123 on host device  0 [0x1b] GPU``),
the result table after a ``#  size  count  type  redop ...`` header, and a summary
(``# Avg bus bandwidth : x``, ``# Out of bounds values : 0 OK``). These lines carry no NCCL
prefix; they are recognized by their ``#`` start and, for result rows, only after a header.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stallscope.ingest.schemas import nccl as F

if TYPE_CHECKING:  # pragma: no cover
    from stallscope.ingest.nccl_state import LogState


def _wrong(s: str) -> int | None:
    return int(s) if s.isdigit() else None


def parse_line(state: LogState, text: str, ln: int) -> bool:
    """One line that starts with ``#`` or follows a result header; True when it was nccl-tests output."""
    if text[:1] != "#":
        m = F.NCCLTESTS_ROW_RE.match(text)
        if m is None:
            state.tests_table = False
            return False
        g = m.group
        state.add_dict("nccl_tests_results", {
            "size_bytes": int(g("size")), "count": int(g("count")), "type": g("type"), "redop": g("redop"),
            "root": int(g("root")), "oop_time_us": float(g("t1")), "oop_algbw_gbs": float(g("a1")),
            "oop_busbw_gbs": float(g("b1")), "oop_wrong": _wrong(g("w1")), "ip_time_us": float(g("t2")),
            "ip_algbw_gbs": float(g("a2")), "ip_busbw_gbs": float(g("b2")), "ip_wrong": _wrong(g("w2")),
            "file": state.label, "line_no": ln})
        return True
    if F.NCCLTESTS_HEADER_RE.match(text):
        state.tests_table = True
        return True
    m = F.NCCLTESTS_RANK_RE.match(text)
    if m is not None:
        state.add_dict("nccl_tests_ranks", {
            "rank": int(m.group("rank")), "group": int(m.group("group")) if m.group("group") else None,
            "pid": int(m.group("pid")), "host": m.group("host"), "device": int(m.group("dev")), "bus": m.group("bus"),
            "gpu_name": m.group("name") or None, "file": state.label, "line_no": ln})
        return True
    for key, rx in (("nccltests.avg_busbw_gbs", F.NCCLTESTS_AVG_RE), ("nccltests.out_of_bounds", F.NCCLTESTS_OOB_RE)):
        m = rx.match(text)
        if m is not None:
            state.tests_table = False
            d = state.ctx(None, None, None, None, ln)
            d.update(key=key, value=m.group("v"), message=text.lstrip("# ").strip())
            state.add_dict("nccl_facts", d)
            return True
    return False
