"""`stallscope postmortem --format md|html|json --fail-on` and `stallscope diff` from the command
line: exit codes (0 ok, 1 threshold reached, 2 usage or input error), files written, images."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from stallscope.cli.main import cli
from stallscope.rules.base import SEVERITY_ORDER
from tests.report.conftest import Job


def ss(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stallscope", *args], capture_output=True, text=True)


def invoke(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return r.exit_code, r.stdout


@pytest.mark.parametrize("level", ["never", "medium", "high", "critical"])
def test_fail_on_threshold(jobs: dict[str, Job], level: str) -> None:
    job = jobs["compute_straggler"]
    worst = max(SEVERITY_ORDER[f["severity"]] for f in job.doc["findings"])
    code, out = invoke("postmortem", job.doc["job"]["id"], "--store", str(job.store), "--format", "json", "--fail-on", level)
    expected = 0 if level == "never" or worst < SEVERITY_ORDER[level] else 1
    assert code == expected, out
    assert json.loads(out)["findings"] == job.doc["findings"], "the report is written whatever the exit code"


def test_healthy_job_passes_fail_on_medium(jobs: dict[str, Job], tmp_path: Path) -> None:
    job = jobs["healthy"]
    out = tmp_path / "summary.md"
    code, _ = invoke("postmortem", job.doc["job"]["id"], "--store", str(job.store), "--format", "md", "--out", str(out),
                     "--fail-on", "medium", "--images", "none")
    assert code == 0
    assert "Verdict: healthy" in out.read_text() and "![" not in out.read_text()


def test_end_to_end_md_with_images_and_exit_1(jobs: dict[str, Job], tmp_path: Path) -> None:
    """A bundle path straight to a Markdown job summary with PNG charts beside it, failing the build."""
    job = jobs["compute_straggler"]  # already in the store: ingesting it again is a no-op
    top = max(job.doc["findings"], key=lambda f: SEVERITY_ORDER[f["severity"]])["severity"]
    out = tmp_path / "summary" / "report.md"
    r = ss("postmortem", str(job.truth.bundle_path), "--store", str(job.store), "--format", "md", "--out", str(out), "--fail-on", top)
    assert r.returncode == 1, r.stderr
    md = out.read_text()
    culprit = job.truth.culprit_ranks[0]
    assert md.startswith("## stallscope post-mortem") and "> **Verdict: synchronization**" in md and f"rank {culprit}" in md
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(links) >= 5
    for link in links:
        assert (out.parent / link).stat().st_size > 1000
    # the evidence commands run as printed
    m = re.search(r'  stallscope sql "(.*?)" --store \S+\n', md)
    assert m, "evidence is printed as stallscope sql commands"
    rq = ss("sql", m.group(1), "--store", str(job.store), "--format", "json")
    assert rq.returncode == 0 and json.loads(rq.stdout)


def test_inline_images(jobs: dict[str, Job]) -> None:
    job = jobs["degraded_nic"]
    code, out = invoke("postmortem", job.doc["job"]["id"], "--store", str(job.store), "--format", "md", "--images", "inline")
    assert code == 0
    assert len(re.findall(r"!\[[^\]]*\]\(data:image/png;base64,[A-Za-z0-9+/=]{100,}\)", out)) >= 5


@pytest.mark.parametrize("args,needle", [
    (["postmortem", "/nonexistent/bundle.tar.gz"], "/nonexistent/bundle.tar.gz"),
    (["postmortem", "job-nope", "--format", "html"], "neither a bundle path nor a job"),
    (["postmortem", "x", "--fail-on", "sometimes"], "sometimes"),
    (["diff", "job-nope", "job-nope-2"], "neither a bundle path nor a job"),
    (["diff", "a", "b", "--fail-on-regression", "-3"], "-3"),
])
def test_usage_errors_exit_2_with_one_line(args: list[str], needle: str, tmp_path: Path) -> None:
    r = ss(*args, "--store", str(tmp_path / "empty"))
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_md_image_files_need_out(jobs: dict[str, Job]) -> None:
    job = jobs["healthy"]
    r = ss("postmortem", job.doc["job"]["id"], "--store", str(job.store), "--format", "md", "--images", "files")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "--out" in r.stderr


# -- diff ----------------------------------------------------------------------------------------------
def test_diff_regression_exit_codes(jobs: dict[str, Job], tmp_path: Path) -> None:
    base, new = jobs["healthy"], jobs["degraded_nic"]
    assert base.store == new.store
    ids = (base.doc["job"]["id"], new.doc["job"]["id"])
    code, out = invoke("diff", *ids, "--store", str(base.store), "--format", "json", "--fail-on-regression", "10")
    slower = json.loads(out)["regression_pct"]
    assert slower > 20 and code == 1, "a degraded NIC makes the job much slower"
    assert invoke("diff", *ids, "--store", str(base.store), "--fail-on-regression", str(slower + 1))[0] == 0
    # the other way round it is an improvement: never a regression
    assert invoke("diff", *reversed(ids), "--store", str(base.store), "--fail-on-regression", "0")[0] == 0
    # a job against itself: 0 % change, nothing new
    code, out = invoke("diff", ids[0], ids[0], "--store", str(base.store), "--format", "json", "--fail-on-regression", "0")
    same = json.loads(out)
    assert code == 0 and same["regression_pct"] == 0.0 and not same["findings"]["new"] and not same["findings"]["worsened"]


def test_diff_document(jobs: dict[str, Job]) -> None:
    base, new = jobs["healthy"], jobs["degraded_nic"]
    code, out = invoke("diff", base.doc["job"]["id"], new.doc["job"]["id"], "--store", str(base.store), "--format", "json")
    d = json.loads(out)
    assert set(d) >= {"stallscope_version", "base", "new", "step_time_ms", "regression_pct", "steps", "breakdown", "collectives", "findings"}
    assert d["base"] == base.doc["job"] and d["new"] == new.doc["job"]
    new_rules = {f["rule"] for f in d["findings"]["new"] + d["findings"]["worsened"]}
    assert new_rules & {f["rule"] for f in new.doc["findings"]}, "the degraded NIC's finding is new"
    inter = [c for c in d["collectives"] if c["scope"] == "inter" and c["busbw_gbps"]["change_pct"] is not None]
    assert inter and min(c["busbw_gbps"]["change_pct"] for c in inter) < -30, "inter-node bandwidth dropped"
    comm = {t["component"]: t for t in d["breakdown"]["totals"]}
    assert comm["comm inter-node"]["change"] > 0


def test_diff_markdown_and_html(jobs: dict[str, Job], tmp_path: Path) -> None:
    base, new = jobs["compute_straggler"], jobs["healthy"]
    ids = (base.doc["job"]["id"], new.doc["job"]["id"])
    code, md = invoke("diff", *ids, "--store", str(base.store))
    assert code == 0 and md.startswith("## stallscope diff") and "### Findings" in md
    assert "| resolved |" in md, "the straggler finding is resolved in the healthy job"
    out = tmp_path / "diff.html"
    code, _ = invoke("diff", *ids, "--store", str(base.store), "--format", "html", "--out", str(out))
    html = out.read_text()
    assert code == 0 and html.count('<div id="chart-diff_') == 3 and "resolved" in html
