"""Event phases: complete (X) and metadata (M) events are kept; every other Chrome-trace phase is
skipped by the strict decoder; an unknown phase sends its chunk to the lenient decoder, which
keeps the same events."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from stallscope.ingest.kineto import parse_kineto
from stallscope.ingest.writer import ROW_GROUP_ROWS, PartWriter


def _trace(extra_phase: str | None = None, n: int = 3) -> dict:
    evs = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "trainer"}}]
    for i in range(n):
        evs.append({"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "pid": 1, "tid": 7, "ts": 10.0 * i, "dur": 5.0,
                    "args": {"External id": i, "Input Dims": [[2, 3]]}})
        evs.append({"ph": "s", "id": i, "pid": 1, "tid": 7, "ts": 10.0 * i, "cat": "ac2g", "name": "launch"})
        evs.append({"ph": "f", "id": i, "pid": 0, "tid": 3, "ts": 10.0 * i + 1, "cat": "ac2g", "name": "launch", "bp": "e"})
    evs.append({"ph": "i", "s": "t", "name": "mark", "pid": 1, "tid": 7, "ts": 3.0})
    evs.append({"ph": "C", "name": "mem", "pid": 1, "ts": 4.0, "args": {"bytes": 12}})
    if extra_phase is not None:
        evs.append({"ph": extra_phase, "name": "future", "pid": 1, "tid": 7, "ts": 6.0})
    return {"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": evs}


@pytest.mark.parametrize("extra", [None, "Q"], ids=["known-phases", "unknown-phase"])
def test_only_complete_and_metadata_events_are_kept(tmp_path: Path, extra: str | None) -> None:
    path = tmp_path / "rank0.pt.trace.json"
    path.write_text(json.dumps(_trace(extra)))
    out = PartWriter(tmp_path / "staging", "00000")
    s = parse_kineto(path, label=path.name, part="00000", out=out)
    out.close()
    assert s.events == 3
    ev = pq.read_table(tmp_path / "staging" / "table=events" / "part-00000.parquet")
    assert ev.column("name").to_pylist() == ["aten::op0", "aten::op1", "aten::op2"]
    assert [json.loads(v) for v in ev.column("input_dims").to_pylist()] == [[[2, 3]]] * 3  # raw JSON text
    th = pq.read_table(tmp_path / "staging" / "table=threads" / "part-00000.parquet").to_pylist()
    assert [(r["tid"], r["name"]) for r in th] == [("7", "trainer")]
    lenient = [w for w in s.warnings if w["code"] == "lenient_types"]
    assert bool(lenient) == (extra is not None)


def test_streamed_parts_are_written_in_large_row_groups(tmp_path: Path) -> None:
    """Rows appended chunk by chunk are buffered into row groups of ROW_GROUP_ROWS, not one per chunk."""
    import pyarrow as pa

    out = PartWriter(tmp_path, "00000")
    chunk = pa.table({"rank": pa.array([0] * 10_000, pa.int32()), "step": pa.array(range(10_000), pa.int64())})
    for _ in range(10):
        out.append("steps", chunk)
    out.close()
    meta = pq.ParquetFile(tmp_path / "table=steps" / "part-00000.parquet").metadata
    assert meta.num_rows == 100_000 and out.rows["steps"] == 100_000
    # a group is written once ROW_GROUP_ROWS rows are pending (7 chunks), the rest on close
    per_group = -(-ROW_GROUP_ROWS // 10_000) * 10_000
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [per_group, 100_000 - per_group]
