"""docs/ci.md's GitHub Actions workflow works: its post-mortem, diff and fail steps run as written
(bash -e, like GitHub's default shell) on a healthy baseline and a job with a degraded NIC."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from tests.report.conftest import ROOT, Job


def workflow() -> dict:
    text = (ROOT / "docs" / "ci.md").read_text()
    m = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert m, "docs/ci.md has a yaml block"
    return yaml.safe_load(m.group(1))


def step(wf: dict, name: str) -> str:
    steps = wf["jobs"]["scaling"]["steps"]
    return next(s["run"] for s in steps if s.get("name") == name)


def as_bundle_dir(bundle: Path, target: Path) -> None:
    """The workflow's bundle/ and baseline/ folders (a generated archive sits inside)."""
    if bundle.is_dir():
        shutil.copytree(bundle, target)
    else:
        target.mkdir()
        shutil.copy(bundle, target / bundle.name)


def test_workflow_is_valid_and_complete() -> None:
    wf = workflow()
    names = [s.get("name") for s in wf["jobs"]["scaling"]["steps"]]
    for needed in ("collect", "post-mortem", "diff against the baseline", "fail on serious findings"):
        assert needed in names
    assert "stallscope collect --out bundle --" in step(wf, "collect")


def test_workflow_steps_run_as_written(jobs: dict[str, Job], tmp_path: Path) -> None:
    wf = workflow()
    base, new = jobs["healthy"], jobs["degraded_nic"]
    as_bundle_dir(base.truth.bundle_path, tmp_path / "baseline")
    as_bundle_dir(new.truth.bundle_path, tmp_path / "bundle")
    summary = tmp_path / "summary.md"
    # the shared test store already holds both jobs: ingesting the copied bundles again is a no-op
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary), "STALLSCOPE_STORE": str(new.store)}

    def run(name: str) -> int:
        return subprocess.run(["bash", "-e", "-c", step(wf, name)], cwd=tmp_path, env=env, capture_output=True, text=True).returncode

    assert run("post-mortem") == 0
    assert (tmp_path / "report" / "report.html").stat().st_size > 100_000
    assert run("diff against the baseline") == 1, "the degraded NIC makes the job > 5 % slower"
    assert (tmp_path / "report" / "diff.html").exists()
    assert run("fail on serious findings") == 1
    text = summary.read_text()
    assert text.startswith("## stallscope post-mortem") and "## stallscope diff" in text and "**Verdict: fabric**" in text
