"""Kineto trace -> normalized tables, streamed one chunk of events at a time.

Memory is bounded by the chunk size (events are written to Parquet as they are decoded); only
the small subsets needed for derived tables (GPU activities, runtime launches, collective and
step markers, metadata) are kept until the end of the file.

Produces, for one rank: ``events``, ``kernels``, ``collectives``, ``steps``, ``process_groups``,
``threads``, ``devices``, and a :class:`TraceSummary` (the rank's row of ``ranks`` plus
warnings) that the coordinating process combines across files.
"""

from __future__ import annotations

import gc
import re
from operator import attrgetter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stallscope.errors import IngestError
from stallscope.ingest import kineto_collectives
from stallscope.ingest.json_array import ArrayStreamer, NotAnArrayObject
from stallscope.ingest.schemas.kineto import (
    COMM_KERNEL_PREFIXES,
    GPU_ACTIVITY_KIND,
    LENIENT_EVENTS,
    RUNTIME_CATS,
    OPTIMIZER_STEP_PREFIX,
    OPTIMIZER_STEPS,
    WHOLE_PROFILE,
    COLLECTIVE_LOOP,
    STEP_RE,
    STRICT_EVENTS,
    NO_ARGS,
    KArgs,
    KEvent,
    LEvent,
    MEvent,
)
from stallscope.ingest.source import ByteStream
from stallscope.ingest.steps import steps_from_collectives, steps_from_optimizer
from stallscope.ingest.writer import PartWriter

#: names of CPU-side events that carry or mark collectives (kept for the collectives builder)
_COMM_CPU_PREFIXES = ("record_param_comms", "c10d::", "gloo:", "nccl:", "ProcessGroupNCCL::", "ProcessGroupGloo::")
_HOST_PID_RE = re.compile(r"^(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*?)_(?P<pid>\d+)\.")
_RANK_IN_NAME_RE = re.compile(r"(?:^|[^a-z])rank[_-]?(\d+)(?:[^0-9]|$)", re.I)


@dataclass
class TraceSummary:
    """What one trace file yields besides its Parquet parts (becomes its row of ``ranks``)."""

    file: str
    part: str
    rank: int | None = None
    rank_source: str = "unknown"
    world_size: int | None = None
    host: str | None = None
    host_source: str | None = None
    pid: int | None = None
    backend: str | None = None
    nccl_version: str | None = None
    device_name: str | None = None
    device_id: int | None = None
    device_count: int = 0
    platform: str = "cpu"
    schema_version: int | None = None
    base_time_ns: int | None = None
    trace_start_ns: int | None = None
    trace_end_ns: int | None = None
    events: int = 0
    kernels: int = 0
    collectives: int = 0
    steps: int = 0
    step_source: str | None = None
    truncated: bool = False
    file_bytes: int = 0
    sha256: str | None = None
    warnings: list[dict[str, Any]] = field(default_factory=list)

    def warn(self, code: str, message: str, *, byte_offset: int | None = None, count: int = 1) -> None:
        self.warnings.append({"file": self.file, "rank": self.rank, "code": code, "message": message,
                              "byte_offset": byte_offset, "count": count})

    def as_row(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("warnings")
        return d


def rank_from_name(name: str) -> int | None:
    """Rank from a file name such as ``rank3.pt.trace.json`` or ``trace_rank-12.json.gz``.

    >>> rank_from_name("rank3.pt.trace.json"), rank_from_name("x/trace_rank-12.json.gz"), rank_from_name("host_1.json")
    (3, 12, None)
    """
    m = _RANK_IN_NAME_RE.search(Path(name).name)
    return int(m.group(1)) if m else None


def host_from_name(name: str) -> tuple[str | None, int | None]:
    """``tensorboard_trace_handler`` names files ``{host}_{pid}.{ts}.pt.trace.json``.

    >>> host_from_name("node-a_1234.1700000000123.pt.trace.json.gz")
    ('node-a', 1234)
    """
    m = _HOST_PID_RE.match(Path(name).name)
    return (m.group("host"), int(m.group("pid"))) if m else (None, None)


def _us_to_ns(us: np.ndarray) -> np.ndarray:
    """µs (float64, integral or not) -> int64 ns, exact for integer µs of any magnitude."""
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000.0).astype(np.int64)


class _Acc:
    """Small per-file subsets kept until the end of the file."""

    def __init__(self) -> None:
        self.gpu: list[pa.Table] = []
        self.runtime: list[pa.Table] = []
        self.comm: list[dict[str, Any]] = []
        self.steps: list[tuple[int, int, int]] = []
        self.optimizer_steps: list[tuple[str, int, int]] = []
        self.meta: list[tuple[str, str, str, str]] = []
        self.pids: dict[int, int] = {}
        self.hip = False
        self.tmin: int | None = None
        self.tmax: int | None = None


def parse_kineto(path: str | Path, *, label: str, part: str, out: PartWriter, rank_hint: int | None = None) -> TraceSummary:
    """Parse one Kineto trace file into table parts written by ``out``.

    Raises :class:`IngestError` (one line naming the file) when the file is not a usable trace
    at all; a trace cut short keeps every complete event and records a ``truncated`` warning.
    """
    summary = TraceSummary(file=label, part=part)
    stream = ByteStream(path)
    streamer = ArrayStreamer(stream, decode=STRICT_EVENTS.decode, fallback=LENIENT_EVENTS.decode)
    acc = _Acc()
    gc_was = gc.isenabled()
    gc.disable()  # millions of short-lived objects: the cyclic GC would triple the parse time
    try:
        chunks = iter(streamer)
        try:
            first = next(chunks, None)
        except NotAnArrayObject as exc:
            if stream.error:
                raise IngestError(f"{label}: {stream.error[1]}", code=stream.error[0]) from None
            if stream.out_bytes == 0:
                raise IngestError(f"{label}: empty file", code="empty") from None
            raise IngestError(f"{label}: not a Kineto trace ({exc})", code="not_a_trace") from None
        _apply_header(summary, streamer.header, rank_hint, label)
        if first is not None:
            _consume(first, summary, acc, out)
            for evs in chunks:
                _consume(evs, summary, acc, out)
    finally:
        if gc_was:
            gc.enable()
    _apply_header(summary, streamer.trailer, None, label, trailer=True)
    summary.sha256 = stream.sha256
    summary.file_bytes = stream.raw_bytes
    if streamer.lenient_chunks:
        summary.warn("lenient_types", f"{label}: {streamer.lenient_chunks} chunk(s) had unexpected field types; parsed leniently")
    if stream.error or streamer.truncated_at is not None:
        summary.truncated = True
        where = streamer.truncated_at if streamer.truncated_at is not None else stream.out_bytes
        why = stream.error[1] if stream.error else "JSON ends early or is malformed after this point"
        if summary.events == 0:
            raise IngestError(f"{label}: no complete event: {why} (valid JSON stops at byte {where})", code="not_json")
        summary.warn("truncated", f"{label}: trace truncated at byte {where} ({why}); kept {summary.events} complete events",
                     byte_offset=where)
    _finish(summary, acc, out, streamer.header | streamer.trailer)
    return summary


def _apply_header(s: TraceSummary, h: dict[str, Any], rank_hint: int | None, label: str, *, trailer: bool = False) -> None:
    di = h.get("distributedInfo")
    if isinstance(di, dict):
        if isinstance(di.get("rank"), int) and (s.rank is None or s.rank_source != "trace"):
            s.rank, s.rank_source = di["rank"], "trace"
        if isinstance(di.get("world_size"), int):
            s.world_size = di["world_size"]
        if isinstance(di.get("backend"), str):
            s.backend = di["backend"]
        if di.get("nccl_version") is not None:
            s.nccl_version = str(di["nccl_version"])
    if not trailer and s.rank is None:
        r = rank_from_name(label)
        if r is not None:
            s.rank, s.rank_source = r, "file_name"
        elif rank_hint is not None:
            s.rank, s.rank_source = rank_hint, "order"
    if isinstance(h.get("host_name"), str) and h["host_name"]:
        s.host, s.host_source = h["host_name"], "trace"
    elif s.host is None and not trailer:
        host, pid = host_from_name(label)
        if host:
            s.host, s.host_source = host, "file_name"
            s.pid = pid
    if isinstance(h.get("baseTimeNanoseconds"), int):
        s.base_time_ns = h["baseTimeNanoseconds"]
    if isinstance(h.get("schemaVersion"), int):
        s.schema_version = h["schemaVersion"]
    if isinstance(h.get("deviceProperties"), list):
        s.device_count = len(h["deviceProperties"])


_ts, _dur, _cat, _name, _pid, _tid, _args = (attrgetter(a) for a in ("ts", "dur", "cat", "name", "pid", "tid", "args"))
_stream, _device, _corr, _ext, _dims, _types = (
    attrgetter(a) for a in ("stream", "device", "correlation", "external_id", "input_dims", "input_type"))
_GPU_CATS = pa.array(sorted(GPU_ACTIVITY_KIND))
_RUNTIME_CATS = pa.array(sorted(RUNTIME_CATS))


def _starts_with_any(names: pa.Array, prefixes: tuple[str, ...]) -> np.ndarray:
    """Mask of names starting with one of ``prefixes`` (a prefix test per prefix is several
    times cheaper than one anchored regex alternation)."""
    m = np.zeros(len(names), bool)
    for p in prefixes:
        m |= _mask(pc.starts_with(names, p))
    return m


def _ids(values: list[Any]) -> pa.Array:
    """pid/tid column: integers as they are; label ids (``"Spans"``) become null."""
    try:
        return pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return pa.array([v if v.__class__ is int else _int_or_none(v) for v in values], pa.int64())


def _int_or_none(v: Any) -> int | None:
    return int(v) if isinstance(v, str) and v.isdigit() else None


def _raw_text(values: list[Any]) -> pa.Array:
    """JSON text of msgspec.Raw values (null where the arg is absent).

    The values are concatenated into one buffer and their lengths become the offsets: no Python
    object per value (this is a third of the per-event cost otherwise).
    """
    n = len(values)
    lens = np.fromiter(map(len, values), np.int32, n)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lens, out=offsets[1:])
    if offsets[-1] >= 2**31 - 1:  # pragma: no cover - a chunk is a few MB
        return pa.array([bytes(r) if r else None for r in values], pa.string())
    valid = np.packbits(lens > 0, bitorder="little")
    arr = pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(b"".join(values)), pa.py_buffer(valid))
    arr.validate(full=True)  # UTF-8: the bytes come from the JSON document as they are
    return arr


def _mask(arr: pa.Array) -> np.ndarray:
    return arr.fill_null(False).to_numpy(zero_copy_only=False)


def _consume(evs: list, s: TraceSummary, acc: _Acc, out: PartWriter) -> None:
    if evs and isinstance(evs[0], LEvent):
        evs = [_from_lenient(e) for e in evs]
        evs = [e for e in evs if e is not None]
    X = [e for e in evs if e.__class__ is KEvent]
    for e in [e for e in evs if e.__class__ is MEvent] if len(X) < len(evs) else ():
        if e.name in ("process_name", "thread_name", "process_labels"):
            a = e.args
            val = (a.get("name") or a.get("labels")) if isinstance(a, dict) else (a.name or a.labels)
            acc.meta.append((str(e.pid), str(e.tid), e.name, str(val) if val is not None else ""))
    if not X:
        return
    rank = s.rank if s.rank is not None else -1
    n = len(X)
    ts = _us_to_ns(np.fromiter(map(_ts, X), np.float64, n))
    dur = _us_to_ns(np.fromiter(map(_dur, X), np.float64, n))
    cat = pa.array(list(map(_cat, X)), pa.string())
    name = pa.array(list(map(_name, X)), pa.string())
    gpu = _mask(pc.is_in(cat, value_set=_GPU_CATS))
    rt = _mask(pc.is_in(cat, value_set=_RUNTIME_CATS))
    gpu_idx, rt_idx = np.nonzero(gpu)[0], np.nonzero(rt)[0]
    args = list(map(_args, X))  # once: each args column is then one attribute lookup per event
    batch = pa.table({
        "rank": pa.array(np.full(n, rank, np.int32)),
        "ts_ns": pa.array(ts),
        "dur_ns": pa.array(dur),
        "cat": cat,
        "name": name,
        "pid": _ids(list(map(_pid, X))),
        "tid": _ids(list(map(_tid, X))),
        "stream": pa.array(list(map(_stream, args)), pa.int64()),
        "device": pa.array(list(map(_device, args)), pa.int64()),
        "correlation": pa.array(list(map(_corr, args)), pa.int64()),
        "external_id": pa.array(list(map(_ext, args)), pa.int64()),
        "input_dims": _raw_text(list(map(_dims, args))),
        "input_type": _raw_text(list(map(_types, args))),
    })
    out.append("events", batch)
    s.events += n
    lo, hi = int(ts.min()), int((ts + dur).max())
    acc.tmin = lo if acc.tmin is None else min(acc.tmin, lo)
    acc.tmax = hi if acc.tmax is None else max(acc.tmax, hi)

    # -- subsets, selected with Arrow compute (C++) ------------------------------------------
    comm_kernel = np.zeros(n, bool)
    if len(gpu_idx):
        comm_kernel[gpu_idx] = _starts_with_any(name.take(pa.array(gpu_idx)), COMM_KERNEL_PREFIXES)
    if len(gpu_idx):
        sub = batch.take(pa.array(gpu_idx))
        acc.gpu.append(pa.table({
            "rank": sub.column("rank"), "ts_ns": sub.column("ts_ns"), "dur_ns": sub.column("dur_ns"),
            "name": sub.column("name"), "kind": pa.array([GPU_ACTIVITY_KIND[c] for c in sub.column("cat").to_pylist()], pa.string()),
            "is_comm": pa.array(comm_kernel[gpu_idx]),
            "stream": sub.column("stream"), "device": sub.column("device"),
            "correlation": sub.column("correlation"), "external_id": sub.column("external_id"),
        }))
    if len(rt_idx):
        acc.runtime.append(pa.table({"correlation": batch.column("correlation").take(pa.array(rt_idx)),
                                     "launch_ts_ns": pa.array(ts[rt_idx]), "launch_dur_ns": pa.array(dur[rt_idx])}))
        if not acc.hip and pc.any(pc.starts_with(name.take(pa.array(rt_idx)), "hip")).as_py():
            acc.hip = True
    cpu = ~gpu
    if cpu.any():
        vc = pc.value_counts(batch.column("pid").filter(pa.array(cpu))).to_pylist()
        for item in vc:
            v, c = item["values"], item["counts"]
            if v is not None:
                acc.pids[v] = acc.pids.get(v, 0) + int(c)
    stepm = cpu & _mask(pc.starts_with(name, "ProfilerStep#")) & _mask(pc.equal(cat, "user_annotation"))
    for i in np.nonzero(stepm)[0]:
        m = STEP_RE.match(X[i].name)
        if m:
            acc.steps.append((int(m.group(1)), int(ts[i]), int(dur[i])))
    optm = cpu & _mask(pc.starts_with(name, OPTIMIZER_STEP_PREFIX)) & _mask(pc.equal(cat, "user_annotation"))
    for i in np.nonzero(optm)[0]:
        acc.optimizer_steps.append((X[i].name, int(ts[i]), int(dur[i])))
    commm = (cpu & _starts_with_any(name, _COMM_CPU_PREFIXES)) | comm_kernel
    for i in np.nonzero(commm)[0]:
        e = X[i]
        a = e.args
        acc.comm.append({
            "gpu": bool(gpu[i]), "cat": e.cat, "name": e.name, "tid": e.tid if e.tid.__class__ is int else _int_or_none(e.tid),
            "ts": int(ts[i]), "dur": int(dur[i]), "stream": a.stream, "correlation": a.correlation,
            "external_id": a.external_id, "collective_name": a.collective_name, "in_nelems": a.in_nelems,
            "out_nelems": a.out_nelems, "group_size": a.group_size, "dtype": a.dtype, "pg_name": a.pg_name,
            "pg_desc": a.pg_desc, "pg_ranks": bytes(a.pg_ranks) if a.pg_ranks else None, "seq": a.seq,
            "src_rank": a.src_rank, "dst_rank": a.dst_rank,
            "input_dims": bytes(a.input_dims) if a.input_dims else None,
            "input_type": bytes(a.input_type) if a.input_type else None,
        })




#: the phases ingest keeps, and their strict event types
_KEPT_PHASES = {"X": KEvent, "M": MEvent}


def _from_lenient(e: LEvent) -> Any:
    """Coerce a leniently decoded event to the strict shape, or None if it is unusable."""
    from stallscope.ingest.schemas.kineto import ARG_FIELDS

    cls = _KEPT_PHASES.get(e.ph) if isinstance(e.ph, str) else None
    if cls is None:  # a phase ingest does not keep
        return None

    def num(v: Any) -> float:
        try:
            return float(v)
        except (TypeError, ValueError):
            return 0.0

    def opt_int(v: Any) -> int | None:
        if isinstance(v, bool):
            return int(v)
        if isinstance(v, int):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, str):
            t = v.strip()
            if t.lstrip("-").isdigit():
                return int(t)
            if t.lower().startswith("0x"):
                try:
                    return int(t, 16)
                except ValueError:
                    return None
        return None

    if isinstance(e.args, dict):
        kw: dict[str, Any] = {}
        for raw, attr in ARG_FIELDS.items():
            if raw not in e.args:
                continue
            v = e.args[raw]
            if attr in ("collective_name", "dtype", "pg_name", "pg_desc", "name", "labels"):
                kw[attr] = None if v is None else str(v)
            elif attr in ("pg_ranks", "input_dims", "input_type"):
                kw[attr] = msgspec.Raw(msgspec.json.encode(v))
            else:
                kw[attr] = opt_int(v)
        args = KArgs(**kw)
    else:
        args = NO_ARGS
    return cls(cat=None if e.cat is None else str(e.cat), name="" if e.name is None else str(e.name),
                  pid="" if e.pid is None else e.pid if isinstance(e.pid, (int, str)) else str(e.pid),
                  tid="" if e.tid is None else e.tid if isinstance(e.tid, (int, str)) else str(e.tid),
                  ts=num(e.ts), dur=num(e.dur), args=args)


def _launches(k: pa.Table | None) -> tuple[np.ndarray, np.ndarray] | None:
    """(CPU launch time, GPU end) of the kernels whose launch is known, sorted by launch."""
    if k is None:
        return None
    k = k.filter(pc.and_(pc.is_valid(k.column("launch_ts_ns")), pc.is_valid(k.column("dur_ns"))))
    if k.num_rows == 0:
        return None
    launch = k.column("launch_ts_ns").to_numpy(zero_copy_only=False).astype(np.int64)
    end = (k.column("ts_ns").to_numpy(zero_copy_only=False) + k.column("dur_ns").to_numpy(zero_copy_only=False)).astype(np.int64)
    order = np.argsort(launch, kind="stable")
    return launch[order], end[order]


def _finish(s: TraceSummary, acc: _Acc, out: PartWriter, header: dict[str, Any]) -> None:
    rank = s.rank if s.rank is not None else -1
    s.trace_start_ns, s.trace_end_ns = acc.tmin, acc.tmax
    if acc.pids:
        s.pid = max(acc.pids.items(), key=lambda kv: kv[1])[0]
    # kernels with their launches
    k = None
    if acc.gpu:
        k = pa.concat_tables(acc.gpu)
        launch_ts = pa.nulls(k.num_rows, pa.int64())
        launch_dur = pa.nulls(k.num_rows, pa.int64())
        if acc.runtime:
            r = pa.concat_tables(acc.runtime).filter(pc.is_valid(pa.concat_tables(acc.runtime).column("correlation")))
            if r.num_rows:
                rc = r.column("correlation").to_numpy()
                order = np.argsort(rc, kind="stable")
                rc = rc[order]
                kc = k.column("correlation").to_numpy(zero_copy_only=False)
                kc_valid = ~np.isnan(kc) if kc.dtype.kind == "f" else np.ones(len(kc), bool)
                kc_int = np.where(kc_valid, np.nan_to_num(kc), -1).astype(np.int64)
                pos = np.searchsorted(rc, kc_int)
                pos_c = np.minimum(pos, len(rc) - 1)
                hit = kc_valid & (rc[pos_c] == kc_int)
                lts = r.column("launch_ts_ns").to_numpy()[order][pos_c]
                ldu = r.column("launch_dur_ns").to_numpy()[order][pos_c]
                launch_ts = pa.array(lts, mask=~hit)
                launch_dur = pa.array(ldu, mask=~hit)
        k = k.append_column("launch_ts_ns", launch_ts).append_column("launch_dur_ns", launch_dur)
        out.write("kernels", k)
        s.kernels = k.num_rows
        dev = k.column("device").drop_null().to_numpy()
        if len(dev):
            vals, counts = np.unique(dev, return_counts=True)
            s.device_id = int(vals[np.argmax(counts)])
        s.platform = "rocm" if acc.hip else "cuda"
    else:
        s.platform = "rocm" if acc.hip else "cpu"
    props = header.get("deviceProperties")
    if isinstance(props, list) and props:
        rows = []
        for p in props:
            if isinstance(p, dict):
                rows.append({"rank": rank, "device_id": p.get("id"), "name": p.get("name"),
                             "total_global_mem": p.get("totalGlobalMem"), "compute_major": p.get("computeMajor"),
                             "compute_minor": p.get("computeMinor"), "num_sms": p.get("numSms")})
                if s.device_id is not None and p.get("id") == s.device_id:
                    s.device_name = p.get("name")
        if s.device_name is None and rows and s.platform != "cpu":
            s.device_name = rows[0]["name"]
        out.write("devices", pa.Table.from_pylist(rows))
    # process groups
    di = header.get("distributedInfo")
    pg_rows = []
    if isinstance(di, dict) and isinstance(di.get("pg_config"), list):
        for pg in di["pg_config"]:
            if isinstance(pg, dict):
                ranks = pg.get("ranks")
                pg_rows.append({"rank": rank, "pg_name": str(pg.get("pg_name")), "pg_desc": pg.get("pg_desc"),
                                "backend_config": pg.get("backend_config"), "pg_size": pg.get("pg_size"),
                                "ranks": [int(x) for x in ranks] if isinstance(ranks, list) else None})
    if pg_rows:
        out.write("process_groups", pa.Table.from_pylist(pg_rows))
    # threads
    if acc.meta:
        out.write("threads", pa.Table.from_pylist([{"rank": rank, "pid": p, "tid": t, "kind": k, "name": v} for p, t, k, v in acc.meta]))
    # collectives
    coll = kineto_collectives.build(acc.comm, rank=rank, pg_rows=pg_rows, world_size=s.world_size)
    if coll.num_rows:
        out.write("collectives", coll)
    s.collectives = coll.num_rows
    # steps
    if acc.steps:
        by_step: dict[int, tuple[int, int]] = {}
        for n, t0, d in acc.steps:  # a step can be recorded twice (nested annotations): keep the widest
            if n not in by_step or d > by_step[n][1]:
                by_step[n] = (t0, d)
        rows = [{"rank": rank, "step": n, "start_ns": t0, "end_ns": t0 + d, "dur_ns": d} for n, (t0, d) in sorted(by_step.items())]
        s.step_source = "ProfilerStep"
    else:  # profiled without prof.step(): see stallscope.ingest.steps
        rows = [{"rank": rank, **r} for r in steps_from_optimizer(acc.optimizer_steps, acc.tmin, _launches(k))]
        s.step_source = OPTIMIZER_STEPS if rows else None
        if not rows:
            rows = [{"rank": rank, **r} for r in steps_from_collectives(coll, acc.tmin)]
            s.step_source = COLLECTIVE_LOOP if rows else None
        if not rows and coll.num_rows and acc.tmin is not None and acc.tmax is not None and acc.tmax > acc.tmin:
            # no loop seen either: the whole profile is one step, so who arrived late at the
            # collectives and who waited is still measured
            rows = [{"rank": rank, "step": 0, "start_ns": acc.tmin, "end_ns": acc.tmax, "dur_ns": acc.tmax - acc.tmin}]
            s.step_source = WHOLE_PROFILE
    if rows:
        out.write("steps", pa.Table.from_pylist(rows))
        s.steps = len(rows)
