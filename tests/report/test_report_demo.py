"""`stallscope demo` works with no arguments on a fresh machine, in under a minute."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from stallscope.cli.demo import demo_bundle
from tests.report.conftest import DEMO_BUNDLE


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "STALLSCOPE_STORE"}  # as on a fresh machine
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "stallscope", "demo"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    took = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr
    assert took < 60, f"the demo took {took:.0f} s"
    out = r.stdout
    assert "verdict: synchronization — rank 5 is a straggler" in out
    report = tmp_path / "stallscope-demo" / "report.html"
    assert f"report: {report.resolve()}" in out
    html = report.read_text()
    assert html.count('<div id="chart-') >= 5 and "rank 5 is a straggler" in html
    doc = json.loads((tmp_path / "stallscope-demo" / "findings.json").read_text())
    assert doc["findings"][0]["ranks"] == [5]
    # the demo keeps to its own folder
    assert (tmp_path / "stallscope-demo" / "store").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stallscope-demo"]


def test_demo_bundle_regenerates_when_not_shipped(tmp_path: Path) -> None:
    """Installed without the repository's samples/, the demo generates the same archive."""
    shipped, origin = demo_bundle(tmp_path / "a")
    assert shipped == DEMO_BUNDLE and origin == "bundled sample"
    made, origin = demo_bundle(tmp_path / "b", root=tmp_path / "no-repo-here")
    assert origin.startswith("generated") and made.read_bytes() == DEMO_BUNDLE.read_bytes()
