"""Fixtures for the report tests: one small generated job per scenario, ingested once per session
into a shared store with its findings document, and the path of headless Chromium."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stallscope.samples import SCENARIOS, GroundTruth, generate

ROOT = Path(__file__).resolve().parents[2]
DEMO_BUNDLE = ROOT / "samples" / "demo-compute-straggler" / "bundle.tar.gz"

#: small jobs (2 hosts x 4 GPUs, 3 steps, lean kernels) keep the whole folder fast on 2 cores;
#: variants where a scenario needs them (pipeline parallelism, TP+DP groups, CPU logs)
KNOBS: dict[str, dict[str, Any]] = {
    "healthy": dict(parallelism="ddp", torch_variant="kineto_2025"),
    "degraded_nic": dict(parallelism="ddp", severity="severe", torch_variant="kineto_2025"),
    "healthy_imbalanced": dict(parallelism="pipeline", logs="some"),
    "p2p_disabled_one_host": dict(parallelism="tp_dp"),
    "intermittent_straggler": dict(steps=5),
}


@dataclass
class Job:
    scenario: str
    truth: GroundTruth
    store: Path
    doc: dict[str, Any]
    handle: Any  #: the open Store restricted to the job (opening one builds the catalog: reuse it)


@pytest.fixture(scope="session")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Job]:
    """Every generator scenario as an ingested job with its findings document."""
    from stallscope.api import ingest, open_store
    from stallscope.rules.engine import postmortem

    out = tmp_path_factory.mktemp("report-samples")
    store = out / "store"
    res: dict[str, Job] = {}
    for i, sc in enumerate(SCENARIOS):
        # healthy and degraded_nic share a seed: the same model and machines, one fault apart
        # (what a nightly diff compares)
        seed = 600 if sc in ("healthy", "degraded_nic") else 600 + i
        knobs: dict[str, Any] = dict(nodes=2, gpus=4, steps=3, detail="lean", noise="low", logs="all", truncate=0, drop=0, windows=0, step_marks=True, clock_offset_ms=25.0) | KNOBS.get(sc, {})
        truth = generate(sc, out=out, seed=seed, **knobs)
        job = ingest([truth.bundle_path], store=store).job
        handle = open_store(store, job=job)
        res[sc] = Job(sc, truth, store, postmortem(handle, job), handle)
    return res


@pytest.fixture(scope="session")
def chromium() -> str:
    """Headless Chromium; missing is a failure, not a skip (.ci/run installs the Debian package)."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("headless Chromium not found: install it (`apt-get install -y chromium`; .ci/run does) to run the browser tests")


@dataclass
class Reports:
    html: Path
    md: Path
    json: Path
    charts: list[str]  #: names of the charts the reports contain


@pytest.fixture(scope="session")
def reports(jobs: dict[str, Job], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Reports]:
    """The three formats of every scenario's post-mortem, written once (Markdown with PNG files)."""
    import json

    from stallscope.report import job_charts
    from stallscope.report.html import render_postmortem as html_report
    from stallscope.report.markdown import render_postmortem as md_report

    out = tmp_path_factory.mktemp("reports")
    res = {}
    for sc, job in jobs.items():
        d = out / sc
        d.mkdir()
        data, built = job_charts(job.doc, store=job.handle)
        (d / "findings.json").write_text(json.dumps(job.doc, indent=2))
        (d / "report.html").write_text(html_report(job.doc, built, notes=data.notes, store=str(job.store)))
        (d / "report.md").write_text(md_report(job.doc, built, data, images="files", out=d / "report.md", store=str(job.store)))
        res[sc] = Reports(d / "report.html", d / "report.md", d / "findings.json", [s.name for s, _ in built])
    return res
