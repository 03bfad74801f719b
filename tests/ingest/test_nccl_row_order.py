"""NCCL log tables come out in source line order, whatever the read block size.

A block's rows are made by the bulk path and by the per-line handlers in no common order, and a
table's rows are written in batches; the batches are cut between blocks and each is put in line
order (``nccl_state.in_line_order``), so the same log read with any block gives the same tables.
Batches are made tiny here so that these small logs are cut into many of them.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pyarrow as pa
import pytest

from stallscope.ingest import nccl_state
from stallscope.ingest.nccl_log import parse_nccl_log
from test_nccl_ground_truth import LOGS

BLOCKS = (97, 4 << 10, 8 << 20)
_PREFIX = re.compile(r"([A-Za-z][\w.-]*):(\d+):(\d+) \[(\d+)\]")
_OPCOUNT = re.compile(r"opCount [0-9a-f]+")


@pytest.fixture(autouse=True)
def _small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nccl_state, "BATCH_ROWS", 7)


def mix(n: int, seed: int = 9) -> str:
    """``n`` lines drawn from every real log, each with its host, pid and opCount varied (so rows differ).

    The first line is a short one with the NCCL prefix: a log whose first read block has none is read
    in bare mode (decided on that block alone: a 97-byte block decides it on the first 97 bytes).
    """
    rng = random.Random(seed)
    lines = [ln for f in sorted(LOGS.glob("*.log")) for ln in f.read_text(errors="replace").splitlines()
             if ln.strip() and not ln.startswith("# --- excerpt gap")]
    out = ["node-0:1:1 [0] NCCL INFO cudaDriverVersion 12020"]
    for _ in range(n - 1):
        node = rng.randrange(16)
        ln = _PREFIX.sub(lambda m: f"{m.group(1)}-{node}:{int(m.group(2)) + node}:{m.group(3)} [{m.group(4)}]",
                         rng.choice(lines), count=1)
        out.append(_OPCOUNT.sub(lambda m: f"opCount {rng.randrange(1 << 20):x}", ln))
    return "\n".join(out) + "\n"


def assert_same_over_blocks(f: Path) -> None:
    first: dict[str, pa.Table] = {}
    info0: dict[str, object] = {}
    for bs in BLOCKS:
        info = parse_nccl_log(f, block_size=bs)
        got = {k: t.combine_chunks() for k, t in info["arrow"].items()}
        rest = {k: info[k] for k in ("warnings", "lines", "partial", "fingerprints", "tables")}
        for name, t in got.items():
            ln = [v for v in t.column("line_no").to_pylist() if v is not None]
            assert ln == sorted(ln), f"{f.name} {name} at {bs} B: rows not in line order"
        if not first:
            first, info0 = got, rest
            continue
        assert rest == info0, f"{f.name} at {bs} B"
        for name, t in got.items():
            assert t.equals(first[name]), f"{f.name} {name}: {bs} B blocks give other rows or order than {BLOCKS[0]} B"


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("*.log")))
def test_real_log_tables_do_not_depend_on_the_read_block(name: str) -> None:
    assert_same_over_blocks(LOGS / name)


def test_generated_mix_tables_do_not_depend_on_the_read_block(tmp_path: Path) -> None:
    f = tmp_path / "mix.log"
    f.write_text(mix(3000))
    assert_same_over_blocks(f)
