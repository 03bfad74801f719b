"""Parse a collector manifest (``manifest.json`` or a rank record ``ranks/rank<N>.json``) into the
``manifest``, ``manifest_ranks``, ``manifest_env`` and ``manifest_topology`` tables.

The format is written by :mod:`stallscope.collectors.manifest` (version 1); this module is the
only place that knows its field names on the reading side. Fields are read leniently — a missing
or mistyped field becomes null — because a manifest may come from a newer collector (fields are
only ever added) or be edited by hand.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from stallscope.errors import IngestError
from stallscope.ingest.source import ByteStream
from stallscope.ingest.writer import PartWriter
from stallscope.store.schema import table as table_spec

MARKER = "stallscope_manifest"
#: larger files are not manifests we wrote (1,000 ranks with full environments are a few MB)
MAX_BYTES = 256 << 20


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            return None
    return None


def _float(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _str(v: Any) -> str | None:
    if v is None:
        return None
    return v if isinstance(v, str) else str(v)


def _json(v: Any) -> str | None:
    return None if v is None else json.dumps(v, sort_keys=True, default=str)


def _read(path: str, label: str) -> dict[str, Any]:
    stream = ByteStream(path)
    chunks: list[bytes] = []
    size = 0
    for block in stream:
        size += len(block)
        if size > MAX_BYTES:
            raise IngestError(f"{label}: manifest larger than {MAX_BYTES >> 20} MiB; not read", code="manifest_too_large")
        chunks.append(block)
    try:
        doc = json.loads(b"".join(chunks))
    except ValueError as exc:
        raise IngestError(f"{label}: manifest is not valid JSON ({exc})", code="bad_manifest") from None
    if not isinstance(doc, dict) or not isinstance(doc.get(MARKER), dict):
        raise IngestError(f"{label}: not a stallscope manifest (no `{MARKER}` object)", code="bad_manifest")
    return doc


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _rank_row(r: dict[str, Any], label: str, collect_id: str | None) -> dict[str, Any]:
    v = _obj(r.get("versions"))
    return {
        "rank": _int(r.get("rank")), "world_size": _int(r.get("world_size")), "local_rank": _int(r.get("local_rank")),
        "local_world_size": _int(r.get("local_world_size")), "node_rank": _int(r.get("node_rank")),
        "host": _str(r.get("host")), "pid": _int(r.get("pid")), "launcher": _str(r.get("launcher")),
        "backend": _str(r.get("backend")), "device": _str(r.get("device")), "device_name": _str(r.get("device_name")),
        "device_uuid": _str(r.get("device_uuid")), "status": _str(r.get("status")),
        "started_at_ns": _int(r.get("started_at_ns")), "ended_at_ns": _int(r.get("ended_at_ns")),
        "steps": _int(r.get("steps")), "traces": _json(r.get("traces") or []),
        "torch_version": _str(v.get("torch")), "cuda_version": _str(v.get("cuda")), "nccl_version": _str(v.get("nccl")),
        "python_version": _str(v.get("python")), "profiler": _json(r.get("profiler")),
        "collect_id": _str(r.get("collect_id")) or collect_id, "file": label,
    }


def _env_rows(env: Any, *, rank: int | None, host: str | None, label: str) -> list[dict[str, Any]]:
    rows = []
    items = env if isinstance(env, list) else [{"name": k, "value": v} for k, v in env.items()] if isinstance(env, dict) else []
    for e in items:
        if not isinstance(e, dict) or not e.get("name"):
            continue
        rows.append({"rank": rank, "host": host, "name": _str(e["name"]), "value": _str(e.get("value")),
                     "masked": bool(e.get("masked", False)), "source": _str(e.get("source")), "file": label})
    return rows


def _topology_rows(host: str | None, probes: Any, label: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if not isinstance(probes, dict):
        return rows
    for name, p in probes.items():
        if not isinstance(p, dict):
            continue
        rows.append({"host": host, "probe": _str(name), "status": _str(p.get("status")), "command": _str(p.get("command")),
                     "seconds": _float(p.get("seconds")), "error": _str(p.get("error")), "raw": _str(p.get("raw")),
                     "parsed": _json(p.get("parsed")), "file": label})
    return rows


def parse_manifest(path: str, *, label: str, out: PartWriter) -> dict[str, Any]:
    """Read one manifest file into the manifest tables. Returns ``{"rows", "warnings", "kind"}``."""
    doc = _read(path, label)
    head = doc[MARKER]
    kind = head.get("kind", "bundle")
    warnings: list[dict[str, Any]] = []
    ranks: list[dict[str, Any]] = []
    env: list[dict[str, Any]] = []
    topo: list[dict[str, Any]] = []
    collect_id = _str(doc.get("collect_id"))
    if kind == "rank":
        ranks.append(_rank_row(doc, label, collect_id))
        env += _env_rows(doc.get("env"), rank=_int(doc.get("rank")), host=_str(doc.get("host")), label=label)
        topo += _topology_rows(_str(doc.get("host")), doc.get("topology"), label)
        if doc.get("status") == "running":
            warnings.append({"file": label, "rank": _int(doc.get("rank")), "code": "profiler_unfinished",
                             "message": f"{label}: rank {doc.get('rank')} never stopped its profiler (process killed?)"})
    else:
        v = _obj(doc.get("versions"))
        nccl = _obj(doc.get("nccl"))
        rank_docs = [r for r in doc.get("ranks") or [] if isinstance(r, dict)]
        row: dict[str, Any] = {
            "collect_id": collect_id, "job_id": _str(doc.get("job_id")), "status": _str(doc.get("status")),
            "command": _json(doc.get("command")), "launcher": _str(doc.get("launcher")), "host": _str(doc.get("host")),
            "cwd": _str(doc.get("cwd")), "started_at_ns": _int(doc.get("started_at_ns")), "ended_at_ns": _int(doc.get("ended_at_ns")),
            "duration_s": _float(doc.get("duration_s")), "exit_code": _int(doc.get("exit_code")), "signal": _str(doc.get("signal")),
            "error": _str(doc.get("error")), "world_size": _int(doc.get("world_size")), "ranks_recorded": len(rank_docs),
            "stallscope_version": _str(v.get("stallscope")), "python_version": _str(v.get("python")),
            "torch_version": _str(v.get("torch")), "cuda_version": _str(v.get("cuda")), "nccl_version": _str(v.get("nccl")),
            "driver_version": _str(v.get("driver")), "cuda_driver_version": _str(v.get("cuda_driver")),
            "nccl_debug_file": _str(nccl.get("debug_file")), "nccl_logs_in_bundle": nccl.get("logs_in_bundle") if isinstance(nccl.get("logs_in_bundle"), bool) else None,
            "notes": _json(doc.get("notes") or []), "manifest_version": _int(head.get("version")), "file": label,
        }
        out.write("manifest", pa.Table.from_pylist([row]))
        env += _env_rows(doc.get("env"), rank=None, host=row["host"], label=label)
        for r in rank_docs:
            ranks.append(_rank_row(r, label, collect_id))
            env += _env_rows(r.get("env"), rank=_int(r.get("rank")), host=_str(r.get("host")), label=label)
        for host, probes in _obj(doc.get("topology")).items():
            topo += _topology_rows(_str(host), probes, label)
        if row["status"] == "running":
            warnings.append({"file": label, "code": "collect_unfinished",
                             "message": f"{label}: `stallscope collect` did not finish (killed?); rank records are read from ranks/"})
        elif row["exit_code"] not in (None, 0):
            warnings.append({"file": label, "code": "job_failed",
                             "message": f"{label}: the job's command exited with code {row['exit_code']}"
                                        + (f" ({row['signal']})" if row["signal"] else "")})
    for name, rows in (("manifest_ranks", ranks), ("manifest_env", env), ("manifest_topology", topo)):
        out.write(name, pa.Table.from_pylist(rows) if rows else table_spec(name).empty())
    return {"kind": kind, "rows": (kind != "rank") + len(ranks) + len(env) + len(topo), "warnings": warnings}
