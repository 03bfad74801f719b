"""Ingest a bundle into the store as one job: discover, hash, parse in parallel, publish.

The job id defaults to a hash of the files' contents (names do not matter), so ingesting the same
bundle twice is a no-op. Each file is parsed by one worker process which streams its rows into
Parquet parts in the job's staging directory; this process then reconciles ranks and hosts
across files, writes the job-level tables (``ranks``, ``files``, ``ingest_warnings``), runs the
analysis stage, and publishes the job with one rename.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from stallscope.errors import IngestError
from stallscope.ingest.discover import Found, discover
from stallscope.ingest.source import file_sha256
from stallscope.ingest.writer import JobWriter
from stallscope.store.layout import StoreLayout, check_job_id
from stallscope.store.schema import table as table_spec
from stallscope.store.schema.trace import inferred_host, known_host_blocks
from stallscope.store.schema import tables as all_tables

#: kinds parsed by a worker, and the function that parses each
PARSED_KINDS = ("kineto", "nccl_log", "manifest")
#: progress callback: (files_done, files_total, bytes_done, bytes_total, current_label)
Progress = Callable[[int, int, int, int, str], None]
#: parser processes when the caller does not say: ``$STALLSCOPE_WORKERS`` (the CLI sets it to
#: the CPU count), else 1 — library callers parse in-process unless they ask for workers, which
#: may be spawned (see :func:`_start_method`), so a script that asks for them needs the usual
#: ``if __name__ == "__main__":`` guard
def _default_workers() -> int:
    try:
        return max(1, int(os.environ.get("STALLSCOPE_WORKERS", "1")))
    except ValueError:
        return 1

#: hook run on the staged job before it is published: (staging dir) -> extra warnings
Finalize = Callable[[Path], list[dict[str, Any]]]


@dataclass
class IngestResult:
    job: str
    store: Path
    skipped: bool = False
    ranks: int = 0
    files: int = 0
    events: int = 0
    bytes: int = 0
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)


def job_id_for(hashes: Sequence[str]) -> str:
    """A stable id from the set of file contents: ``job-<12 hex>``."""
    h = hashlib.sha256()
    for x in sorted(hashes):
        h.update(x.encode())
    return "job-" + h.hexdigest()[:12]


def ingest(paths: Sequence[str | Path], *, store: str | Path | None = None, job: str | None = None,
           workers: int | None = None, progress: Progress | None = None, force: bool = False,
           finalize: Finalize | None = None) -> IngestResult:
    """Ingest ``paths`` (files, dirs, archives) as one job. See module doc.

    ``finalize(staging_dir)`` runs after every ingest table is staged and before the job is
    published (the analysis stage plugs in here); it returns extra warnings.
    """
    t0 = time.perf_counter()
    layout = StoreLayout.at(store)
    if job is not None:
        check_job_id(job)
    with tempfile.TemporaryDirectory(prefix="stallscope-") as tmp:
        found, disc_warnings = discover(paths, tmp)
        if not found:
            raise IngestError(f"{', '.join(map(str, paths))}: no files found")
        hashes = {f.label: file_sha256(f.path) for f in found}
        content_id = job_id_for(list(hashes.values()))
        job_id = job or content_id
        if layout.exists(job_id) and not force:
            meta = layout.job_meta(job_id)
            if meta.get("content_id") == content_id:
                return IngestResult(job=job_id, store=layout.root, skipped=True, ranks=int(meta.get("ranks", 0)),
                                    files=len(found), warnings=list(meta.get("warnings", [])))
        writer = JobWriter(layout, job_id)
        try:
            result = _ingest_into(writer, found, hashes, disc_warnings, workers=workers, progress=progress, finalize=finalize)
            meta = {"content_id": content_id, "sources": [str(p) for p in paths], "ranks": result.ranks,
                    "files": {f.label: {"sha256": hashes[f.label], "kind": f.kind, "bytes": f.size} for f in found},
                    "warnings": result.warnings[:1000], "ingest_seconds": time.perf_counter() - t0}
            writer.publish(meta)
        except BaseException:
            writer.abort()
            raise
    result.job = job_id
    result.store = layout.root
    result.seconds = time.perf_counter() - t0
    return result


def _ingest_into(writer: JobWriter, found: list[Found], hashes: dict[str, str], disc_warnings: list[dict[str, Any]],
                 *, workers: int | None, progress: Progress | None, finalize: Finalize | None) -> IngestResult:
    warnings: list[dict[str, Any]] = [dict(w) for w in disc_warnings]
    file_rows: list[dict[str, Any]] = []
    tasks: list[tuple[int, Found]] = []
    seen_hash: dict[str, str] = {}
    for i, f in enumerate(found):
        row = {"file": f.label, "kind": f.kind, "status": "ok", "bytes": f.size, "sha256": hashes[f.label], "rank": None, "rows": 0}
        dup = seen_hash.get(hashes[f.label])
        if f.kind in PARSED_KINDS and dup is not None:
            row["status"] = "skipped"
            warnings.append({"file": f.label, "code": "duplicate_file", "message": f"{f.label}: same content as {dup}; skipped"})
        elif f.kind in PARSED_KINDS:
            seen_hash[hashes[f.label]] = f.label
            tasks.append((i, f))
        elif f.kind in ("empty", "corrupt_gzip", "unreadable"):
            row["status"] = "failed"
            why = {"empty": "empty file", "corrupt_gzip": "gzip data is corrupt (nothing could be decompressed)", "unreadable": "cannot be read"}[f.kind]
            warnings.append({"file": f.label, "code": f.kind, "message": f"{f.label}: {why}"})
        else:
            row["status"] = "skipped"
        file_rows.append(row)
    by_label = {r["file"]: r for r in file_rows}
    if not tasks:
        listed = ", ".join(f"{f.label} ({f.kind})" for f in found[:3]) + (", ..." if len(found) > 3 else "")
        raise IngestError(f"no Kineto trace, NCCL log or manifest among {len(found)} file(s): {listed}")

    total_bytes = sum(f.size for _, f in tasks)
    results = _run_tasks(tasks, writer.staging, workers=workers, progress=progress, total_bytes=total_bytes)

    summaries = []
    for res in results:
        row = by_label[res["label"]]
        row["rows"] = res.get("rows", 0)
        for w in res.get("warnings", []):
            warnings.append(w)
        if res.get("error"):
            row["status"] = "failed"
            warnings.append({"file": res["label"], "code": res.get("code", "failed"), "message": res["error"]})
            continue
        if res.get("partial"):
            row["status"] = "partial"
        if res["kind"] == "kineto":
            summaries.append(res["summary"])
    if tasks and not any(r.get("rows") for r in results) and all(r.get("error") for r in results):
        first = next(r["error"] for r in results if r.get("error"))
        raise IngestError(f"no usable file: {len(results)} file(s) could not be read (first: {first})")
    rank_rows = _reconcile_ranks(writer, summaries, warnings)
    for s in rank_rows:
        for f in s.pop("files"):
            by_label[f]["rank"] = s["rank"]
    _attach_hosts(writer, rank_rows)
    if rank_rows:
        writer.write("ranks", pa.Table.from_pylist(sorted(rank_rows, key=lambda r: r["rank"])))
    writer.write("files", pa.Table.from_pylist(file_rows))
    wrows = [{"file": w.get("file"), "rank": w.get("rank"), "code": w.get("code"), "message": w.get("message"),
              "byte_offset": w.get("byte_offset"), "count": w.get("count", 1)} for w in warnings]
    writer.write("ingest_warnings", pa.Table.from_pylist(wrows) if wrows else table_spec("ingest_warnings").empty())
    writer.ensure_all_tables([t for t, spec in all_tables().items() if spec.stage == "ingest"])
    if finalize is not None:
        warnings.extend(finalize(writer.staging))
    writer.ensure_all_tables(list(all_tables()))
    return IngestResult(job=writer.job, store=writer.layout.root, ranks=len(rank_rows), files=len(found),
                        events=sum(s["events"] for s in rank_rows), bytes=total_bytes,
                        warnings=[str(w["message"]) for w in warnings])


# -- workers ------------------------------------------------------------------------------


def parse_one(kind: str, path: str, label: str, part: str, staging: str, rank_hint: int | None) -> dict[str, Any]:
    """Parse one file into parts under ``staging``. Never raises: failures come back as data."""
    from stallscope.ingest.allocators import tune_for_parsing
    from stallscope.ingest.writer import PartWriter

    tune_for_parsing()
    out = PartWriter(staging, part)
    res: dict[str, Any] = {"label": label, "kind": kind, "part": part}
    try:
        if kind == "kineto":
            from stallscope.ingest.kineto import parse_kineto

            s = parse_kineto(path, label=label, part=part, out=out, rank_hint=rank_hint)
            res["summary"] = s.as_row()
            res["warnings"] = s.warnings
            res["rows"] = s.events
            res["partial"] = s.truncated
        elif kind == "nccl_log":
            from stallscope.ingest.nccl_log import parse_nccl_log

            info = parse_nccl_log(path, label=label, out=out)
            res["warnings"] = info.get("warnings", [])
            res["rows"] = info.get("lines", 0)
            res["partial"] = bool(info.get("partial"))
        elif kind == "manifest":
            from stallscope.ingest.manifest import parse_manifest

            info = parse_manifest(path, label=label, out=out)
            res["warnings"] = info.get("warnings", [])
            res["rows"] = info.get("rows", 0)
        out.close()
    except KeyboardInterrupt:
        out.discard()
        raise
    except Exception as exc:  # one file must never stop the others
        out.discard()
        from stallscope.errors import StallscopeError

        if isinstance(exc, StallscopeError):
            res["error"] = str(exc)
            res["code"] = exc.code
        elif isinstance(exc, MemoryError):
            res["error"] = f"{label}: out of memory while parsing ({os.path.getsize(path)} bytes); try --workers 1"
            res["code"] = "too_large"
        else:
            res["error"] = f"{label}: could not be parsed ({type(exc).__name__}: {exc})"
            res["code"] = "parse_error"
    return res


def _run_tasks(tasks: list[tuple[int, Found]], staging: Path, *, workers: int | None, progress: Progress | None,
               total_bytes: int) -> list[dict[str, Any]]:
    n = len(tasks)
    if workers is None:
        workers = min(_default_workers(), n)
    workers = max(1, min(workers, n)) if n else 1
    done_bytes = 0
    results: list[dict[str, Any]] = []
    # traces first, biggest first: the longest tasks start early
    order = sorted(tasks, key=lambda t: (t[1].kind != "kineto", -t[1].size))
    hints = {i: k for k, (i, f) in enumerate(t for t in tasks if t[1].kind == "kineto")}
    args = [(f.kind, str(f.path), f.label, f"{i:05d}", str(staging), hints.get(i)) for i, f in order]
    sizes = {f"{i:05d}": f.size for i, f in order}
    if progress:
        progress(0, n, 0, total_bytes, "")
    if workers == 1 or n == 1:
        for a in args:
            res = parse_one(*a)
            results.append(res)
            done_bytes += sizes[a[3]]
            if progress:
                progress(len(results), n, done_bytes, total_bytes, a[2])
        return results
    # workers the pool joins, so their CPU time is accounted to this process. This process is
    # the last worker: it parses too while the pool runs (one interpreter start-up fewer)
    ctx = multiprocessing.get_context(_start_method({f.kind for _, f in tasks}))

    def record(res: dict[str, Any], a: tuple) -> None:
        nonlocal done_bytes
        results.append(res)
        done_bytes += sizes[a[3]]
        if progress:
            progress(len(results), n, done_bytes, total_bytes, a[2])

    with ProcessPoolExecutor(max_workers=workers - 1, mp_context=ctx, initializer=_worker_init) as pool:
        pending: dict[Future[dict[str, Any]], tuple] = {}
        queue = list(reversed(args))  # pop() takes the next task in order
        try:
            while queue or pending:
                while queue and len(pending) < 2 * (workers - 1):  # one running, one ready, per worker
                    a = queue.pop()
                    pending[pool.submit(parse_one, *a)] = a
                if not queue:  # take back a task the pool has not started rather than wait
                    for fut in list(pending):
                        if fut.cancel():
                            queue.append(pending.pop(fut))
                            break
                if queue:
                    a = queue.pop()
                    record(parse_one(*a), a)
                    finished = [f for f in pending if f.done()]
                else:
                    finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    a = pending.pop(fut)
                    try:
                        res = fut.result()
                    except Exception as exc:  # a worker died (OOM kill, segfault)
                        res = {"label": a[2], "kind": a[0], "part": a[3], "error": f"{a[2]}: worker died while parsing ({type(exc).__name__})", "code": "worker_died"}
                    record(res, a)
        except BaseException:
            for fut in pending:
                fut.cancel()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return results


#: the module of each parser (:func:`parse_one`)
_PARSER_MODULES = {"kineto": "stallscope.ingest.kineto", "nccl_log": "stallscope.ingest.nccl_log",
                   "manifest": "stallscope.ingest.manifest"}
#: native threads that may run while this process forks its workers
_FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})


def _start_method(kinds: set[str]) -> str:
    """``fork`` when this process has no thread but the main one (Linux), else ``spawn``.

    A forked worker inherits the parser modules already imported here and the allocator
    settings, instead of starting an interpreter and importing Arrow and NumPy again (measured:
    0.1-0.2 CPU-s less per worker on the 32-rank ingest benchmark). ``STALLSCOPE_SPAWN=1`` forces
    spawning. Forking is only safe while no other thread can hold a lock the child would
    inherit (a DuckDB or Arrow thread pool, a progress bar's refresh thread): then workers are
    spawned clean.
    """
    import sys

    if sys.platform != "linux" or os.environ.get("STALLSCOPE_SPAWN"):
        return "spawn"
    try:
        tasks = os.listdir("/proc/self/task")
        names = [Path(f"/proc/self/task/{t}/comm").read_text().strip() for t in tasks if t != str(os.getpid())]
    except OSError:
        return "spawn"
    # jemalloc's purging thread (started by ``import pyarrow``) is fork-safe: jemalloc takes its
    # locks around fork (pthread_atfork) and the child restarts the thread when it needs it
    if any(n not in _FORK_SAFE_THREADS for n in names):
        return "spawn"
    # what the workers run, imported once here for all of them (only the parsers of ``kinds``)
    import importlib

    from stallscope.ingest.allocators import tune_for_parsing

    for kind in kinds & set(_PARSER_MODULES):
        importlib.import_module(_PARSER_MODULES[kind])

    tune_for_parsing()
    return "fork"


def _worker_init() -> None:
    """Start-up of a parser process, forked or spawned (see :func:`block_pandas`)."""
    block_pandas()


def block_pandas() -> None:
    """Make ``import pandas`` fail in this process, for processes that are stallscope's own.

    Ingest never uses pandas, but pyarrow imports it (0.2 CPU-s) on its first conversion just to
    check whether inputs are pandas objects; an import that fails makes pyarrow skip that check
    (for the rest of the process). Spawned parser processes call it at start-up, and so does the
    ``stallscope ingest`` command; a library caller's process is left alone (it may hand pyarrow
    pandas objects).
    """
    import sys

    if "pandas" not in sys.modules and not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())


class _NoPandas:
    """Import hook of ingest processes: ``import pandas`` fails when executed (pyarrow then does
    without), while ``importlib.util.find_spec("pandas")`` still answers (polars asks it at import
    and imports pandas only when handed pandas objects, which parsers never do)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name == "pandas" or name.startswith("pandas."):
            import importlib.util

            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec: Any) -> Any:
        raise ImportError("pandas is not used by stallscope's ingest processes")

    def exec_module(self, module: Any) -> None:  # pragma: no cover - create_module raises first
        raise ImportError("pandas is not used by stallscope's ingest processes")


# -- cross-file reconciliation ------------------------------------------------------------


def _reconcile_ranks(writer: JobWriter, summaries: list[dict[str, Any]], warnings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give every trace a unique rank; rewrite parts whose provisional rank changed.

    Several files of one rank are its profiling windows when they come from the same process
    (host and pid) and do not overlap in time: ``torch.profiler.schedule`` with ``repeat`` other
    than 1 writes one file per cycle (``<host>_<pid>.<ms>.pt.trace.json``, one per window). They
    stay one rank, with one ``ranks`` row (see :func:`_merge_windows`); a window whose
    ``baseTimeNanoseconds`` differs from the first's is moved onto the first's trace clock
    (:func:`_shift_part`); steps keep their numbers, so collectives still match across ranks step
    by step. Any other second claim on a rank (another process, overlapping spans) gets a new
    rank number."""
    provisional = {s["part"]: (s["rank"] if s["rank"] is not None else -1) for s in summaries}
    taken: dict[int, list[dict[str, Any]]] = {}
    final: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    # in time order (on the epoch clock where traces give a base), so a rank's first window comes first
    for s in sorted(summaries, key=lambda s: (s["rank_source"] != "trace", (s.get("trace_start_ns") or 0) + (s.get("base_time_ns") or 0),
                                              s["file"])):
        r = s["rank"]
        if r is None or r < 0:
            pending.append(s)
        elif r in taken and _another_window(s, taken[r]):
            taken[r].append(s)
        elif r in taken:
            warnings.append({"file": s["file"], "rank": r, "code": "duplicate_rank",
                             "message": f"{s['file']}: claims rank {r} like {taken[r][0]['file']}; given a new rank number"})
            pending.append(s)
        else:
            taken[r] = [s]
            final.append(s)
    nxt = 0
    for s in pending:
        while nxt in taken:
            nxt += 1
        s["rank"], s["rank_source"] = nxt, "assigned"
        taken[nxt] = [s]
        final.append(s)
    for windows in taken.values():
        for s in windows:
            if provisional[s["part"]] != s["rank"]:
                _rewrite_rank(writer.staging, s["part"], s["rank"])
            shift = _base_shift(s, windows[0])
            if shift:
                _shift_part(writer.staging, s["part"], shift)
    multi = sorted((ws for ws in taken.values() if len(ws) > 1), key=lambda ws: ws[0]["rank"])
    if multi:  # one line for the job, not one per rank
        n = sorted({len(ws) for ws in multi})
        warnings.append({"file": multi[0][0]["file"], "rank": None, "code": "profiling_windows", "count": len(multi),
                         "message": f"{multi[0][0]['file']}: {len(multi)} rank(s) left {'-'.join(map(str, n[::max(1, len(n) - 1)]))} "
                                    f"trace files each, one process per rank (profiling windows: schedule repeat); each read "
                                    f"as one rank, e.g. rank {multi[0][0]['rank']}: " + ", ".join(w["file"] for w in multi[0])})
    rows = []
    for s in final:
        row = {k: s.get(k) for k in ("rank", "world_size", "host", "host_source", "pid", "backend", "nccl_version", "device_name",
                                      "device_id", "device_count", "platform", "schema_version", "base_time_ns", "trace_start_ns",
                                      "trace_end_ns", "events", "kernels", "collectives", "steps", "step_source", "truncated", "file",
                                      "file_bytes", "sha256")}
        row["local_rank"] = None
        row["files"] = [w["file"] for w in taken[s["rank"]]]
        rows.append(_merge_windows(row, taken[s["rank"]]))
    return rows


def _another_window(s: dict[str, Any], windows: list[dict[str, Any]]) -> bool:
    """``s`` is one more profiling window of the process that wrote ``windows``: the trace names
    the rank, the same pid and host, both or neither give a clock base, and its span (on the
    first window's clock) overlaps none of theirs."""
    w = windows[0]
    same = (s["rank_source"] == w["rank_source"] == "trace" and s.get("pid") is not None
            and all(s.get(k) == w.get(k) for k in ("pid", "host"))
            and (s.get("base_time_ns") is None) == (w.get("base_time_ns") is None))
    if not same or s.get("trace_start_ns") is None or s.get("trace_end_ns") is None:
        return False
    a, z = (s[k] + _base_shift(s, w) for k in ("trace_start_ns", "trace_end_ns"))
    return all(o.get("trace_start_ns") is not None and o.get("trace_end_ns") is not None
               and (z < o["trace_start_ns"] + _base_shift(o, w) or a > o["trace_end_ns"] + _base_shift(o, w))
               for o in windows)


def _base_shift(s: dict[str, Any], first: dict[str, Any]) -> int:
    """What moves a time of ``s``'s trace clock onto ``first``'s: the difference of their
    ``baseTimeNanoseconds`` (0 when either has none)."""
    a, b = s.get("base_time_ns"), first.get("base_time_ns")
    return 0 if a is None or b is None else int(a) - int(b)


def _shift_part(staging: Path, part: str, delta: int) -> None:
    """Add ``delta`` ns to every time (not duration) column of a trace's parts: the columns in ns
    whose name says no ``dur``."""
    for p in staging.glob(f"table=*/part-{part}.parquet"):
        cols = [c.name for c in table_spec(p.parent.name.removeprefix("table=")).columns
                if c.unit == "ns" and "dur" not in c.name]
        t = pq.read_table(p)
        for c in cols:
            if c in t.column_names:
                i = t.column_names.index(c)
                t = t.set_column(i, c, pc.add(t.column(c), pa.scalar(delta, t.schema.field(c).type)))
        if cols:
            pq.write_table(t, p, compression="zstd")


def _merge_windows(row: dict[str, Any], windows: list[dict[str, Any]]) -> dict[str, Any]:
    """One ``ranks`` row for a rank's profiling windows: its span from the first window's start to
    the last one's end, counts and sizes summed, truncated if any window was; the file and hash
    are the first window's (``files`` lists every one)."""
    if len(windows) == 1:
        return row
    row["trace_start_ns"] = min(w["trace_start_ns"] + _base_shift(w, windows[0]) for w in windows)
    row["trace_end_ns"] = max(w["trace_end_ns"] + _base_shift(w, windows[0]) for w in windows)
    for k in ("events", "kernels", "collectives", "steps", "file_bytes"):
        row[k] = sum(w.get(k) or 0 for w in windows)
    row["truncated"] = any(bool(w.get("truncated")) for w in windows)
    return row


def _rewrite_rank(staging: Path, part: str, rank: int) -> None:
    for p in staging.glob(f"table=*/part-{part}.parquet"):
        t = pq.read_table(p)
        if "rank" in t.column_names:
            i = t.column_names.index("rank")
            t = t.set_column(i, "rank", pa.array([rank] * t.num_rows, pa.int32()))
            pq.write_table(t, p, compression="zstd")


def _attach_hosts(writer: JobWriter, rank_rows: list[dict[str, Any]]) -> None:
    """Fill unknown hosts from NCCL logs (by pid, then by rank) and the manifest (by rank)."""
    man = list(writer.staging.glob("table=manifest_ranks/*.parquet"))
    man_host: dict[int, tuple[str | None, int | None]] = {}
    if man:
        for row in pa.concat_tables([pq.read_table(p) for p in man]).to_pylist():
            if row.get("rank") is not None:
                man_host[int(row["rank"])] = (row.get("host"), row.get("local_rank"))
    for r in rank_rows:  # the collector's record of the local rank, whatever names the host
        if r["rank"] in man_host and man_host[r["rank"]][1] is not None:
            r["local_rank"] = man_host[r["rank"]][1]
    missing = [r for r in rank_rows if not r.get("host")]
    if not missing:
        return
    by_pid: dict[int, str] = {}
    by_rank: dict[int, str] = {}
    comms = list(writer.staging.glob("table=nccl_comms/*.parquet"))
    if comms:
        t = pa.concat_tables([pq.read_table(p, columns=None) for p in comms])
        cols = set(t.column_names)
        for row in t.to_pylist():
            host = row.get("host")
            if not host:
                continue
            if "pid" in cols and row.get("pid") is not None:
                by_pid.setdefault(int(row["pid"]), host)
            # only a world-sized communicator's rank is a global rank
            if "rank" in cols and row.get("rank") is not None and row.get("nranks") is not None:
                world = max((r.get("world_size") or 0) for r in rank_rows) or len(rank_rows)
                if row["nranks"] == world:
                    by_rank.setdefault(int(row["rank"]), host)
    dir_host = _directory_hosts(rank_rows)
    for r in rank_rows:
        if r.get("host"):
            continue
        if r.get("pid") is not None and r["pid"] in by_pid:
            r["host"], r["host_source"] = by_pid[r["pid"]], "nccl_log"
        elif r["rank"] in by_rank:
            r["host"], r["host_source"] = by_rank[r["rank"]], "nccl_log"
        elif r["rank"] in man_host and man_host[r["rank"]][0]:
            r["host"], r["host_source"] = man_host[r["rank"]][0], "manifest"
        elif r["file"] in dir_host:
            r["host"], r["host_source"] = dir_host[r["file"]], "directory"
    _infer_blocks(rank_rows)
    _device_blocks(rank_rows)


def _infer_blocks(rank_rows: list[dict[str, Any]]) -> None:
    """Ranks whose host is still unknown, in a job where the known hosts hold contiguous blocks
    of G ranks (torchrun, SLURM and MPI assign rank = node × G + local rank), go to the block
    their rank falls in: named ``host-of-ranks-A-B`` (host_source ``inferred``) unless a rank of
    the block has a known host."""
    known = [r for r in rank_rows if r.get("host")]
    unknown = [r for r in rank_rows if not r.get("host")]
    if not known or not unknown:
        return
    by_host: dict[str, list[int]] = {}
    for r in known:
        by_host.setdefault(r["host"], []).append(r["rank"])
    sizes = {len(v) for v in by_host.values()}
    if len(sizes) != 1:
        return
    g = sizes.pop()
    if g < 2 or any(sorted(v) != list(range(min(v), min(v) + g)) or min(v) % g for v in by_host.values()):
        return  # not a contiguous block layout
    block_host = {min(v) // g: h for h, v in by_host.items()}
    for r in unknown:
        b = r["rank"] // g
        r["host"] = block_host.get(b, inferred_host(r["rank"], g))
        r["host_source"] = "inferred"


def _device_blocks(rank_rows: list[dict[str, Any]]) -> None:
    """Ranks whose host is still unknown: group ranks by the GPU each one drives.

    Launchers give a host a block of G consecutive ranks and each process drives the GPU of its
    local rank (``torch.cuda.set_device(local_rank)``), so when rank r's kernels run on device
    ``r mod G`` for every rank (devices 0..G-1, G >= 2, the world a multiple of G, and no rank
    seeing fewer than G GPUs), blocks of G ranks are hosts: two ranks of one block cannot share
    a host with another block without two processes driving one GPU. Named ``host-of-ranks-A-B``
    (host_source ``device``), or after the host some of the block's ranks are known to run on
    (an NCCL log from that host only): then every known host must lie in one block and no block
    hold two, else nothing is guessed. Jobs whose processes each see one GPU (device 0
    everywhere) say nothing here; the clock-based grouping of the analysis stage is then the
    fallback. A few ranks may have left no trace (at most a quarter of the world: the largest
    rank + 1, or the declared ``world_size``): the ranks present must still drive device
    ``r mod G``. (Seed 31000 #0187: one host's log named three of its four ranks, the fourth
    left no trace, and twelve ranks went without a host: each its own, its clock aligned alone.)"""
    if not rank_rows or all(r.get("host") for r in rank_rows):
        return
    rows = sorted(rank_rows, key=lambda r: r["rank"])
    ranks = [r["rank"] for r in rows]
    devs = [r.get("device_id") for r in rows]
    declared = max((r.get("world_size") or 0 for r in rows), default=0)
    n = max(ranks[-1] + 1, declared) if ranks and ranks[0] >= 0 else 0
    if not n or len(set(ranks)) != len(ranks) or len(ranks) < 0.75 * n or any(d is None for d in devs):
        return
    g = max(devs) + 1
    if g < 2 or n % g or any(d != r % g for r, d in zip(ranks, devs)):
        return
    if any((r.get("device_count") or g) < g for r in rows):
        return
    named = known_host_blocks({r["rank"]: r["host"] for r in rows if r.get("host")}, g)
    if named is None:
        return  # a known host across blocks, or two in one: the blocks are not the hosts
    for r in rows:
        if not r.get("host"):
            r["host"], r["host_source"] = named.get(r["rank"] // g, inferred_host(r["rank"], g)), "device"


def _directory_hosts(rank_rows: list[dict[str, Any]]) -> dict[str, str]:
    """Last resort: bundles laid out one folder per host (``node-01/rank3.json``) name the host
    by folder — used only when every trace sits in a folder, there are at least two folders,
    and some folder holds several ranks (one trace per folder is a per-rank layout, not hosts)."""
    from pathlib import PurePosixPath

    parents = {r["file"]: PurePosixPath(r["file"].split("!")[-1]).parent.name for r in rank_rows}
    if not parents or any(not p or p == "." for p in parents.values()):
        return {}
    counts: dict[str, int] = {}
    for p in parents.values():
        counts[p] = counts.get(p, 0) + 1
    if len(counts) < 2 or max(counts.values()) < 2:
        return {}
    return parents
