"""Merged timeline: every rank of a job in one Chrome-trace JSON, on aligned clocks.

Opens in ui.perfetto.dev (or chrome://tracing). One process per rank, named
``rank N · host`` and sorted by host then rank, so the ranks of a host sit together; inside,
the CPU threads, one track per GPU stream, and a ``collectives`` track where every collective
call is split into ``wait`` (before the last member arrived) and ``transfer`` — a straggler is
the rank whose wait slices are missing while everyone else's are long.

Times are the aligned clock (raw + host offset) in µs from the job's first event. Events are
streamed out in batches, so memory stays flat for large jobs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from stallscope.store.queries import Store

#: GPU stream tracks get tids above any Linux thread id (pid_max <= 2^22), within int32
GPU_TID_BASE = 1_000_000_000
COLLECTIVE_TID = GPU_TID_BASE - 1
BATCH = 200_000
#: a small track number per (rank, GPU stream): stream ids can be huge (e.g. 2^32 - 1)
_STREAM_TRACKS = """SELECT rank, stream, (dense_rank() OVER (PARTITION BY rank ORDER BY stream))::BIGINT AS track
                    FROM (SELECT DISTINCT rank, stream FROM kernels WHERE stream IS NOT NULL)"""


def export_perfetto(store: Store, out: str | Path, *, include_python: bool = False) -> dict[str, int]:
    """Write the job ``store`` is restricted to (or every job) as one Chrome-trace JSON file."""
    enc = msgspec.json.Encoder()
    t0 = store.sql("SELECT min(ts_aligned_ns) AS t0 FROM events_aligned")["t0"][0]
    if t0 is None:
        from stallscope.errors import AnalysisError

        raise AnalysisError("nothing to export: the job has no events")
    counts = {"events": 0, "collective_slices": 0, "ranks": 0}
    with open(out, "wb") as f:
        f.write(b'{"displayTimeUnit": "ms", "otherData": {"producer": "stallscope", "clock": "aligned"}, "traceEvents": [\n')
        first = True

        def emit(items: list[dict[str, Any]]) -> None:
            nonlocal first
            if not items:
                return
            body = b",\n".join(enc.encode(x) for x in items)
            f.write(body if first else b",\n" + body)
            first = False

        emit(_metadata(store, counts))
        where = "" if include_python else "WHERE cat IS DISTINCT FROM 'python_function'"
        q = f"""SELECT e.rank, e.cat, e.name, e.ts_aligned_ns, e.dur_ns, e.tid, s.track AS stream, e.external_id, e.correlation
                FROM events_aligned e LEFT JOIN ({_STREAM_TRACKS}) s ON s.rank = e.rank AND s.stream = e.stream
                {where.replace("cat", "e.cat")} ORDER BY e.rank, e.ts_aligned_ns"""
        rel = store.con.sql(q)
        reader = _batches(rel)
        for batch in reader:
            d = batch.to_pydict()
            items = []
            for i in range(batch.num_rows):
                stream = d["stream"][i]
                tid = GPU_TID_BASE + stream if stream is not None else (d["tid"][i] or 0)
                args = {}
                if d["external_id"][i] is not None:
                    args["External id"] = d["external_id"][i]
                if d["correlation"][i] is not None:
                    args["correlation"] = d["correlation"][i]
                items.append({"ph": "X", "cat": d["cat"][i] or "", "name": d["name"][i], "pid": d["rank"][i], "tid": tid,
                              "ts": (d["ts_aligned_ns"][i] - t0) / 1000.0, "dur": d["dur_ns"][i] / 1000.0, "args": args})
            emit(items)
            counts["events"] += len(items)
        coll = store.sql(f"""SELECT m.rank, i.op, i.scope, i.bytes, m.arrival_ns - {t0} AS a, m.wait_ns, m.end_ns - {t0} AS e,
                                    i.last_rank, i.instance_id
                             FROM collective_members m JOIN collective_instances i USING (job, instance_id)
                             WHERE i.members > 1 ORDER BY m.rank, m.arrival_ns""")
        items = []
        for r in coll.iter_rows(named=True):
            args = {"instance": r["instance_id"], "bytes": r["bytes"], "scope": r["scope"], "last_rank": r["last_rank"]}
            if r["wait_ns"] and r["wait_ns"] > 0:
                items.append({"ph": "X", "cat": "collective", "name": f"wait: {r['op']}", "pid": r["rank"], "tid": COLLECTIVE_TID,
                              "ts": r["a"] / 1000.0, "dur": r["wait_ns"] / 1000.0, "args": args})
            start = r["a"] + max(r["wait_ns"] or 0, 0)
            if r["e"] > start:
                items.append({"ph": "X", "cat": "collective", "name": f"transfer: {r['op']} ({r['scope']})", "pid": r["rank"],
                              "tid": COLLECTIVE_TID, "ts": start / 1000.0, "dur": (r["e"] - start) / 1000.0, "args": args})
            if len(items) >= BATCH:
                emit(items)
                counts["collective_slices"] += len(items)
                items = []
        emit(items)
        counts["collective_slices"] += len(items)
        f.write(b"\n]}\n")
    return counts


def _batches(rel: Any) -> Any:
    reader = getattr(rel, "to_arrow_reader", None) or getattr(rel, "fetch_arrow_reader", None) or rel.record_batch
    try:
        return reader(BATCH)
    except TypeError:
        return reader()


def _metadata(store: Store, counts: dict[str, int]) -> list[dict[str, Any]]:
    ranks = store.sql("""SELECT r.rank, c.host, c.method FROM ranks r JOIN rank_clock c USING (job, rank)
                         ORDER BY c.host, r.rank""")
    items: list[dict[str, Any]] = []
    for order, r in enumerate(ranks.iter_rows(named=True)):
        pid = r["rank"]
        items += [
            {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"rank {pid} · {r['host']}"}},
            {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": f"host {r['host']}, clock {r['method']}"}},
            {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": order}},
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": COLLECTIVE_TID, "args": {"name": "collectives (wait | transfer)"}},
            {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": COLLECTIVE_TID, "args": {"sort_index": -1}},
        ]
    counts["ranks"] = ranks.height
    streams = store.sql(_STREAM_TRACKS)
    for r in streams.iter_rows(named=True):
        items.append({"ph": "M", "name": "thread_name", "pid": r["rank"], "tid": GPU_TID_BASE + r["track"],
                      "args": {"name": f"GPU stream {r['stream']}"}})
        items.append({"ph": "M", "name": "thread_sort_index", "pid": r["rank"], "tid": GPU_TID_BASE + r["track"],
                      "args": {"sort_index": 1_000_000 + r["track"]}})
    threads = store.sql("""SELECT DISTINCT rank, tid, name FROM threads WHERE kind = 'thread_name' AND tid <> '0'""")
    for r in threads.iter_rows(named=True):
        if r["tid"].isdigit():
            items.append({"ph": "M", "name": "thread_name", "pid": r["rank"], "tid": int(r["tid"]), "args": {"name": r["name"]}})
    return items
