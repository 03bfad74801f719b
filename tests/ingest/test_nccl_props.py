"""Property tests: whatever is done to the lines of real logs, the NCCL parser never crashes.

Lines come from the 33 real excerpts; hypothesis cuts them, splices random bytes into them,
duplicates, drops and reorders them, and glues them without newlines. The parser must return
tables of the registered schemas (every value fitting its column), at most one warning per code,
and the rows of the untouched lines must still be there.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stallscope.ingest.nccl_log import parse_nccl_log
from stallscope.store.schema.nccl import NCCL_TABLES
from test_nccl_ground_truth import LOGS

REAL = [ln for f in sorted(LOGS.glob("*.log")) for ln in f.read_bytes().splitlines() if ln.strip()]
SCHEMAS = {s.name: s.schema for s in NCCL_TABLES}
GOOD = b"node-9:1:2 [0] NCCL INFO Channel 07/0 : 1[1] -> 2[2] via P2P/CUMEM"


@st.composite
def mutated_line(draw: st.DrawFn) -> bytes:
    line = draw(st.sampled_from(REAL))
    op = draw(st.sampled_from(["keep", "cut", "splice", "replace_digits", "double", "strip_prefix", "huge_number"]))
    if op == "cut":
        return line[: draw(st.integers(0, len(line)))]
    if op == "splice":
        at = draw(st.integers(0, len(line)))
        return line[:at] + draw(st.binary(min_size=1, max_size=12)) + line[at:]
    if op == "replace_digits":
        return bytes(b if not 48 <= b <= 57 else draw(st.sampled_from(b"0123456789-+x ")) for b in line)
    if op == "double":
        return line + line
    if op == "strip_prefix":
        i = line.find(b"NCCL INFO ")
        return line[i + 10:] if i >= 0 else line
    if op == "huge_number":
        return line.replace(b" 0", b" 99999999999999999999999", 1).replace(b"[0]", b"[-99999999999999999999]", 1)
    return line


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(mutated_line(), min_size=0, max_size=40), sep=st.sampled_from([b"\n", b"\r\n"]),
       tail_newline=st.booleans(), small_blocks=st.booleans())
def test_mutated_logs_never_crash(lines: list[bytes], sep: bytes, tail_newline: bool, small_blocks: bool) -> None:
    data = sep.join([GOOD, *lines, GOOD]) + (sep if tail_newline else b"")
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "m.log"
        f.write_bytes(data)
        info = parse_nccl_log(f, block_size=64 if small_blocks else None)
    for name, table in info["arrow"].items():
        assert isinstance(table, pa.Table) and table.schema.equals(SCHEMAS[name], check_metadata=False)
    codes = [w["code"] for w in info["warnings"]]
    assert len(codes) == len(set(codes)) and set(codes) <= {"unknown_lines", "binary_junk"}
    assert all(w["file"] == "m.log" and w["count"] >= 1 for w in info["warnings"])
    # the two untouched lines at both ends survive whatever is between them
    conns = info["arrow"]["nccl_connections"].to_pylist()
    assert sum(1 for r in conns if r["host"] == "node-9" and r["transport_detail"] == "P2P/CUMEM") >= 2


@settings(max_examples=40, deadline=None)
@given(cut=st.integers(0, 10_000), name=st.sampled_from(sorted(p.name for p in LOGS.glob("*.log"))))
def test_any_truncation_of_a_real_log_parses(cut: int, name: str) -> None:
    data = (LOGS / name).read_bytes()
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / name
        f.write_bytes(data[: cut % (len(data) + 1)])
        info = parse_nccl_log(f)
    assert info["lines"] == data[: cut % (len(data) + 1)].count(b"\n") + (0 if data[: cut % (len(data) + 1)].endswith(b"\n")
                                                                            or cut % (len(data) + 1) == 0 else 1)
    assert {w["code"] for w in info["warnings"]} <= {"unknown_lines"}
