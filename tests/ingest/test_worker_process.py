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


FORK_SCRIPT = """
import sys, tempfile, threading
from stallscope.ingest.pipeline import _start_method, ingest
import pyarrow  # starts jemalloc's purging thread, which may run while forking
first = _start_method({"kineto"})
with tempfile.TemporaryDirectory() as tmp:
    res = ingest([sys.argv[1]], store=tmp, workers=2)
    assert res.ranks >= 2 and not [w for w in res.warnings if "worker died" in str(w)], res
stop = threading.Event()
t = threading.Thread(target=stop.wait)
t.start()
second = _start_method({"kineto"})
stop.set(); t.join()
import importlib.util
# the coordinating process of a library caller keeps pandas importable
assert importlib.util.find_spec("pandas") is None or __import__("pandas")
print(first, second)
"""


def test_workers_fork_only_when_no_other_thread_runs() -> None:
    """A single-threaded coordinator forks its parsers (they inherit its imports); one with another
    thread running (a progress bar, a DuckDB or Arrow pool) spawns them clean."""
    import os

    # as the ingest command runs (OpenBLAS's thread pool off: numpy would start it at import)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", FORK_SCRIPT, str(TRACES / "cpu_gloo")], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    first, second = out.stdout.split()
    assert second == "spawn"
    assert first == ("fork" if sys.platform == "linux" else "spawn")
