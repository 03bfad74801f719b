"""Start-up of spawned parser processes: no pandas, yet polars and every parser work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import LOGS, TRACES

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys, tempfile
from stallscope.ingest.pipeline import _worker_init, parse_one
_worker_init()
with tempfile.TemporaryDirectory() as tmp:
    a = parse_one("nccl_log", sys.argv[1], "x.log", "00000", tmp, None)
    b = parse_one("kineto", sys.argv[2], "rank0.pt.trace.json.gz", "00001", tmp, 0)
assert "error" not in a and a["rows"] > 0, a
assert "error" not in b and b["rows"] > 0, b
import pyarrow as pa
pa.array([1])
assert "pandas" not in sys.modules
print("ok")
"""


def test_parser_process_runs_every_parser_without_pandas() -> None:
    log = sorted((LOGS / "nccl").glob("*.log"))[0]
    trace = TRACES / "cpu_gloo" / "rank0.pt.trace.json.gz"
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(log), str(trace)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


CLI_SCRIPT = """
import sys, tempfile
from click.testing import CliRunner
from stallscope.cli.main import cli
with tempfile.TemporaryDirectory() as tmp:
    r = CliRunner().invoke(cli, ["ingest", *sys.argv[1:], "--store", tmp, "--quiet", "--workers", "1"])
    assert r.exit_code == 0, r.output
    from stallscope import api
    rows = api.open_store(tmp).sql("SELECT count(*) AS n FROM collective_instances")["n"][0]
    assert rows > 0, rows
assert "pandas" not in sys.modules
print("ok")
"""


def test_ingest_command_with_analysis_runs_without_pandas() -> None:
    """The ingest command's own process blocks pandas too (pyarrow's probe for it costs 0.2
    CPU-s): parsing, the analysis stage and the catalog must all work without it."""
    log = sorted((LOGS / "nccl").glob("*.log"))[0]
    trace_dir = TRACES / "cpu_gloo"
    out = subprocess.run([sys.executable, "-c", CLI_SCRIPT, str(trace_dir), str(log)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", (out.stdout[-2000:], out.stderr[-2000:])
