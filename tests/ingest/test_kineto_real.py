"""Every real trace in ../shared/traces ingests with counts that match an independent count."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

import stallscope
from stallscope.api import ingest
from tests.conftest import TRACES

REAL = sorted(p for p in TRACES.rglob("*.json.gz") if not p.name.endswith("_et.json.gz"))
NCCL_KERNEL = re.compile(r"^nccl(Dev)?Kernel")


def independent_counts(path: Path) -> dict[str, int]:
    """Counts straight from the JSON with the stdlib (no stallscope code)."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    kernels = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    nccl = [e for e in ev if e.get("cat") == "kernel" and NCCL_KERNEL.match(e.get("name", ""))]
    gloo = [e for e in ev if e.get("name", "").startswith("gloo:")]
    steps = {e["name"] for e in ev if e.get("cat") == "user_annotation" and re.match(r"^ProfilerStep#\d+$", e.get("name", ""))}
    meta = [e for e in doc["traceEvents"] if e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name", "process_labels")]
    names = {(e["name"], str(e.get("args", {}).get("name") or e.get("args", {}).get("labels") or "")) for e in meta}
    return {"events": len(ev), "kernels": len(kernels), "collectives": len(nccl) if nccl else len(gloo), "steps": len(steps),
            "names": names}


@pytest.mark.parametrize("path", REAL, ids=[str(p.relative_to(TRACES)) for p in REAL])
def test_counts_match_raw_json(path: Path, store: Path) -> None:
    res = ingest([path], store=store, analyze=False)
    assert res.ranks == 1
    s = stallscope.open(store)
    row = s.sql("SELECT events, kernels, collectives, steps, truncated FROM ranks").row(0, named=True)
    want = independent_counts(path)
    assert row["events"] == want["events"]
    assert row["kernels"] == want["kernels"]
    assert row["steps"] == want["steps"]
    assert row["truncated"] is False
    if "cpu_only" not in str(path):  # rank-34 has gloo ops but its rows come from c10d/record_param_comms
        assert row["collectives"] == want["collectives"]
    # the stored tables agree with the summary
    assert s.sql("SELECT count(*) AS n FROM events")["n"][0] == want["events"]
    assert s.sql("SELECT count(*) AS n FROM kernels")["n"][0] == want["kernels"]
    # process and thread names of the metadata events, as the JSON has them
    names = {(k, n) for k, n in s.sql("SELECT kind, name FROM threads").iter_rows()}
    assert names == want["names"]


def test_nccl_metadata_on_kernels(store: Path) -> None:
    """nccl_data: metadata comes from the NCCL kernels' args; bytes follow nccl-tests sizes."""
    ingest([TRACES / "hta/nccl_parser_config/nccl_data.json.gz"], store=store, analyze=False)
    df = stallscope.open(store).sql("SELECT op, count(*) n, min(bytes) b, any_value(pg_name) pg, any_value(group_size) g, "
                                    "any_value(algo) algo, any_value(proto) proto FROM collectives GROUP BY op ORDER BY op")
    rows = {r["op"]: r for r in df.iter_rows(named=True)}
    assert rows["allreduce"]["n"] == 15 and rows["broadcast"]["n"] == 6
    assert rows["allreduce"]["pg"] == "0" and rows["allreduce"]["g"] == 2
    assert (rows["allreduce"]["algo"], rows["allreduce"]["proto"]) == ("RING", "LL")
    raw = json.loads(gzip.decompress((TRACES / "hta/nccl_parser_config/nccl_data.json.gz").read_bytes()))
    sizes = sorted(e["args"]["In msg nelems"] * 4 for e in raw["traceEvents"]
                   if e.get("cat") == "kernel" and "AllReduce" in e.get("name", ""))
    got = stallscope.open(store).sql("SELECT bytes FROM collectives WHERE op = 'allreduce' ORDER BY bytes")["bytes"].to_list()
    assert got == sizes


def test_old_kernel_names_without_metadata(store: Path) -> None:
    """control.json: ncclKernel_* names, integer ts, no collective metadata."""
    ingest([TRACES / "hta/trace_diff/control/control.json.gz"], store=store, analyze=False)
    df = stallscope.open(store).sql("SELECT op, dtype, count(*) n FROM collectives GROUP BY ALL ORDER BY op")
    assert df.rows() == [("allreduce", "float", 18), ("sendrecv", "int8_t", 42)]


def test_gloo_cpu_collectives(store: Path) -> None:
    """cpu_gloo: gloo:* executions matched to c10d::* enqueue ops, sizes from Input Dims."""
    ingest([TRACES / "cpu_gloo"], store=store, analyze=False)
    s = stallscope.open(store)
    df = s.sql("SELECT rank, op, bytes, cpu_start_ns <= start_ns AS enqueued_first FROM collectives ORDER BY rank, start_ns")
    assert df.height == 20
    assert set(df["op"]) == {"allreduce", "allgather", "broadcast", "barrier"}
    assert all(df["enqueued_first"])
    # DDP bucket: 9610 floats
    assert 9610 * 4 in df["bytes"].to_list()
    hosts = s.sql("SELECT DISTINCT host FROM ranks")["host"].to_list()
    assert hosts == ["vm"]


def test_rocm_trace(store: Path) -> None:
    ingest([TRACES / "hta/amd_trace"], store=store, analyze=False)
    r = stallscope.open(store).sql("SELECT platform, kernels FROM ranks").row(0, named=True)
    assert r["platform"] == "rocm" and r["kernels"] > 0


def test_float_and_integer_ts_are_exact(store: Path) -> None:
    path = TRACES / "hta/nccl_parser_config/nccl_data.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))
    first = next(e for e in raw["traceEvents"] if e.get("ph") == "X")
    ingest([path], store=store, analyze=False)
    got = stallscope.open(store).sql("SELECT ts_ns FROM _events LIMIT 1")["ts_ns"][0]
    assert abs(got - first["ts"] * 1000) <= 1
