"""Collective calls of one rank, from the events of a Kineto trace.

Where collectives show up in a trace (all verified on real traces in ``../shared/traces``):

* **NCCL (GPU)**: the execution is the NCCL kernel (``ncclKernel_*`` before NCCL 2.19,
  ``ncclDevKernel_*`` after). Recent PyTorch puts the metadata (``Collective name``, ``In/Out msg
  nelems``, ``Group size``, ``dtype``, ``Process Group Name/Description/Ranks``, ``Seq``) on the
  kernel itself and on the host-side ``record_param_comms`` cpu_op; the kernel's ``External id``
  is that cpu_op's. Older traces carry no metadata: the op, algorithm, protocol and dtype then come
  from the kernel name.
* **gloo (CPU)**: no ``record_param_comms``; the enqueue is a ``c10d::<op>`` cpu_op on the main
  thread and the execution a ``gloo:<op>`` user_annotation on a ``pt_gloo_runloop`` thread, each
  with ``Input Dims`` / ``Input type`` (so the size is known, the group is not).

One row per execution; host-side call times are attached when found.
"""

from __future__ import annotations

import bisect
import math
import re
from typing import Any

import msgspec
import pyarrow as pa

from stallscope.ingest.schemas.kineto import dtype_size, normalize_op, parse_comm_kernel_name
from stallscope.ingest.writer import conform

_HOST_NAMES = ("record_param_comms", "c10d::")


def build(rows: list[dict[str, Any]], *, rank: int, pg_rows: list[dict[str, Any]], world_size: int | None) -> pa.Table:
    """Build the ``collectives`` rows of one rank from its collective-related events."""
    gpu = sorted((r for r in rows if r["gpu"]), key=lambda r: r["ts"])
    cpu = sorted((r for r in rows if not r["gpu"]), key=lambda r: r["ts"])
    out = _from_kernels(gpu, cpu) if gpu else _from_cpu(cpu, pg_rows, world_size)
    for r in out:
        r["rank"] = rank
    if not out:
        return conform("collectives", pa.table({"rank": pa.array([], pa.int32())}))
    return conform("collectives", pa.Table.from_pylist(out))


def _from_kernels(gpu: list[dict[str, Any]], cpu: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_ext = {r["external_id"]: r for r in cpu if r["external_id"] is not None}
    hosts = [r for r in cpu if r["name"].startswith(_HOST_NAMES)]
    host_idx = _Containment(hosts)
    # PyTorch names what a host-side call does in a `nccl:<op>` annotation inside it
    # (`nccl:all_to_all`, `nccl:send 0->4`, `nccl:recv 0<-4`): the op and peer of kernels
    # without metadata (alltoall runs as SendRecv kernels)
    ann_of_host: dict[int, dict[str, Any]] = {}
    for r in cpu:
        if r["name"].startswith("nccl:"):
            h = host_idx.enclosing(r)
            if h is not None:
                ann_of_host.setdefault(id(h), r)
    out = []
    for k in gpu:
        parsed = parse_comm_kernel_name(k["name"])
        cpu_ev = by_ext.get(k["external_id"])
        host = ann = None
        if cpu_ev is not None:
            if cpu_ev["name"].startswith(_HOST_NAMES):
                host = cpu_ev
            else:
                host = host_idx.enclosing(cpu_ev)
                ann = cpu_ev if cpu_ev["name"].startswith("nccl:") else None
            if ann is None and host is not None:
                ann = ann_of_host.get(id(host))
        meta = k if k["collective_name"] else (host if host is not None and host["collective_name"] else None)
        src = meta or {}
        ann_op, ann_peer = _annotation(ann["name"], k) if ann is not None else (None, None)
        if src.get("collective_name"):
            op = normalize_op(src["collective_name"])
        elif ann_op:
            op = ann_op
        else:
            op = parsed["op"] or "unknown"
        if op in ("unknown", "coalesced") and parsed["op"] not in (None, "unknown"):
            op = parsed["op"]
        dtype = src.get("dtype") or parsed["dtype"]
        in_n, out_n = src.get("in_nelems"), src.get("out_nelems")
        if in_n is None and host is not None:
            in_n = _numel(host.get("input_dims"))
        group_size = src.get("group_size")
        pg_ranks = _ranks(src.get("pg_ranks"))
        if group_size is None and pg_ranks:
            group_size = len(pg_ranks)
        cpu_ref = host or cpu_ev
        out.append({
            "op": op, "source": "nccl_kernel", "name": k["name"], "pg_name": src.get("pg_name"),
            "pg_desc": src.get("pg_desc"), "pg_ranks": pg_ranks, "group_size": group_size,
            "seq": src.get("seq"), "peer": _peer(op, src) if _peer(op, src) is not None else ann_peer, "dtype": dtype, "in_nelems": in_n, "out_nelems": out_n,
            "bytes": message_bytes(op, in_n, out_n, dtype, group_size), "algo": parsed["algo"], "proto": parsed["proto"],
            "start_ns": k["ts"], "end_ns": k["ts"] + k["dur"],
            "cpu_start_ns": cpu_ref["ts"] if cpu_ref else None, "cpu_end_ns": cpu_ref["ts"] + cpu_ref["dur"] if cpu_ref else None,
            "stream": k["stream"], "tid": None, "external_id": k["external_id"], "correlation": k["correlation"],
        })
    return out


def _from_cpu(cpu: list[dict[str, Any]], pg_rows: list[dict[str, Any]], world_size: int | None) -> list[dict[str, Any]]:
    """gloo and other CPU backends: execution annotation matched to its enqueue op by op and order."""
    sizes = {r["pg_size"] for r in pg_rows if r.get("pg_size")}
    default_group = sizes.pop() if len(sizes) == 1 else (world_size if not pg_rows else None)
    execs = [r for r in cpu if r["name"].startswith("gloo:")]
    enq = [r for r in cpu if r["name"].startswith("c10d::")]
    rpc = [r for r in cpu if r["name"] == "record_param_comms"]
    pending: dict[str, list[dict[str, Any]]] = {}
    for r in enq:
        pending.setdefault(normalize_op(r["name"]), []).append(r)
    used: set[int] = set()
    out = []
    for e in execs:
        op = normalize_op(e["name"])
        host = None
        for cand in pending.get(op, []):
            if id(cand) not in used and cand["ts"] <= e["ts"]:
                host = cand
                used.add(id(cand))
                break
        out.append(_cpu_row(e, host, op, default_group, source_name=e["name"], tid=e["tid"]))
    # enqueue ops whose execution was not annotated (other CPU backends): the op is the execution
    for r in enq:
        if id(r) not in used and not execs:
            out.append(_cpu_row(r, r, normalize_op(r["name"]), default_group, source_name=r["name"], tid=r["tid"]))
    if not out and rpc:
        for r in rpc:
            if r["collective_name"]:
                out.append(_cpu_row(r, r, normalize_op(r["collective_name"]), default_group, source_name=r["name"], tid=r["tid"]))
    return out


def _cpu_row(e: dict[str, Any], host: dict[str, Any] | None, op: str, group_size: int | None, *, source_name: str, tid: int | None) -> dict[str, Any]:
    meta = e if e.get("collective_name") else (host if host and host.get("collective_name") else {})
    in_n = meta.get("in_nelems") if meta else None
    if in_n is None:
        in_n = _numel(e.get("input_dims"))
    if in_n is None and host is not None:
        in_n = _numel(host.get("input_dims"))
    out_n = meta.get("out_nelems") if meta else None
    dtype = (meta.get("dtype") if meta else None) or _first_type(e.get("input_type"))
    gs = (meta.get("group_size") if meta else None) or group_size
    if op == "barrier":
        in_n, dtype = None, None
    return {
        "op": op, "source": "cpu", "name": source_name, "pg_name": meta.get("pg_name") if meta else None,
        "pg_desc": meta.get("pg_desc") if meta else None, "pg_ranks": _ranks(meta.get("pg_ranks")) if meta else None,
        "group_size": gs, "seq": meta.get("seq") if meta else None, "peer": _peer(op, meta or {}), "dtype": dtype, "in_nelems": in_n, "out_nelems": out_n,
        "bytes": message_bytes(op, in_n, out_n, dtype, gs), "algo": None, "proto": None,
        "start_ns": e["ts"], "end_ns": e["ts"] + e["dur"],
        "cpu_start_ns": host["ts"] if host else None, "cpu_end_ns": host["ts"] + host["dur"] if host else None,
        "stream": None, "tid": tid, "external_id": e["external_id"], "correlation": None,
    }


_ANN_RE = re.compile(r"^nccl:(?P<op>[A-Za-z_]+)(?:\s+(?P<a>\d+)\s*(?P<dir>->|<-)\s*(?P<b>\d+))?")


def _annotation(name: str, kernel: dict[str, Any]) -> tuple[str | None, int | None]:
    """Op and peer from ``nccl:<op>[ a->b | a<-b ]``.

    >>> _annotation("nccl:send 0->4", {}), _annotation("nccl:recv 3<-1", {}), _annotation("nccl:all_to_all", {})
    (('send', 4), ('recv', 1), ('alltoall', None))
    """
    m = _ANN_RE.match(name)
    if not m:
        return None, None
    op = normalize_op(m.group("op"))
    peer = int(m.group("b")) if m.group("b") is not None else None
    return (None if op == "unknown" else op), peer


def _peer(op: str, src: dict[str, Any]) -> int | None:
    if op in ("send",):
        return src.get("dst_rank")
    if op in ("recv",):
        return src.get("src_rank")
    return None


def message_bytes(op: str, in_n: int | None, out_n: int | None, dtype: str | None, group_size: int | None) -> int | None:
    """Message size in the nccl-tests convention (the size column of ``*_perf``).

    >>> message_bytes("allreduce", 1000, 1000, "Float", 8)
    4000
    >>> message_bytes("allgather", 125, None, "bf16", 8)   # output = in x group
    2000
    >>> message_bytes("reducescatter", None, 125, "float", 8)
    4000
    """
    size = dtype_size(dtype)
    if size is None:
        return None
    if op == "allgather" or op == "gather":
        n = out_n if out_n is not None else (in_n * group_size if in_n is not None and group_size else None)
    elif op == "reducescatter" or op == "scatter":
        n = in_n if in_n is not None else (out_n * group_size if out_n is not None and group_size else None)
    else:
        n = in_n if in_n is not None else out_n
    return None if n is None else int(n) * size


def _numel(raw: bytes | None) -> int | None:
    """Elements of the first tensor argument from ``Input Dims`` JSON (TensorLists summed)."""
    if not raw:
        return None
    try:
        dims = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    if not isinstance(dims, list):
        return None
    for d in dims:
        if not isinstance(d, list) or not d:
            continue
        if all(isinstance(x, int) for x in d):
            return int(math.prod(d))
        if all(isinstance(x, list) for x in d):  # TensorList: [[d0, d1], [d0]]
            return int(sum(math.prod(t) if t else 1 for t in d if all(isinstance(y, int) for y in t)))
    # a single scalar tensor: [[]] means numel 1
    if dims and dims[0] == []:
        return 1
    return None


def _first_type(raw: bytes | None) -> str | None:
    if not raw:
        return None
    try:
        types = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    if isinstance(types, list):
        for t in types:
            if isinstance(t, str) and t and t not in ("TensorList", "Scalar", "ScalarList", "GenericList"):
                return t
    return None


def _ranks(raw: Any) -> list[int] | None:
    """``Process Group Ranks`` is a JSON list, usually inside a string ("[0, 1]")."""
    if raw is None:
        return None
    try:
        v = msgspec.json.decode(raw) if isinstance(raw, (bytes, bytearray)) else raw
        if isinstance(v, str):
            v = msgspec.json.decode(v)
    except msgspec.DecodeError:
        return None
    if isinstance(v, list) and all(isinstance(x, int) for x in v):
        return v
    return None


class _Containment:
    """Find the host-side op (same thread) whose interval contains an event."""

    def __init__(self, hosts: list[dict[str, Any]]) -> None:
        self.by_tid: dict[int | None, tuple[list[int], list[dict[str, Any]]]] = {}
        for h in sorted(hosts, key=lambda r: r["ts"]):
            starts, items = self.by_tid.setdefault(h["tid"], ([], []))
            starts.append(h["ts"])
            items.append(h)

    def enclosing(self, ev: dict[str, Any]) -> dict[str, Any] | None:
        got = self.by_tid.get(ev["tid"])
        if not got:
            return None
        starts, items = got
        i = bisect.bisect_right(starts, ev["ts"]) - 1
        while i >= 0:
            h = items[i]
            if h["ts"] + h["dur"] >= ev["ts"] + ev["dur"]:
                return h
            i -= 1
            if ev["ts"] - starts[i] > 10_000_000_000 if i >= 0 else True:
                break
        return None
