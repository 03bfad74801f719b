"""A 256-rank x 10-step job still gives a readable page of bounded size that renders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.report.browser import load


@pytest.mark.slow
def test_256_ranks_report_stays_small_and_renders(tmp_path: Path, chromium: str) -> None:
    from stallscope.api import ingest, open_store
    from stallscope.report import job_charts
    from stallscope.report.charts import to_vegalite
    from stallscope.report.data import MAX_RANKS
    from stallscope.report.html import render_postmortem
    from stallscope.rules.engine import postmortem
    from stallscope.samples.demo import large_job

    t = large_job(tmp_path, ranks=256, steps=10, detail="lean", logs="none")
    job = ingest([t.bundle_path], store=tmp_path / "store").job
    s = open_store(tmp_path / "store", job=job)
    doc = postmortem(s, job)
    data, built = job_charts(doc, store=s)
    assert data.heatmap["rank"].n_unique() == 256, "the heatmap keeps every rank up to 256"
    assert data.breakdown["rank"].n_unique() == MAX_RANKS and data.timeline["rank"].n_unique() <= MAX_RANKS
    assert set(t.culprit_ranks) <= set(data.breakdown["rank"].to_list()), "the culprits are among the ranks shown"
    assert any("of 256 ranks" in n for n in data.notes), "the page says what it left out"
    sizes = {spec.name: len(json.dumps(to_vegalite(chart))) for spec, chart in built}
    assert max(sizes.values()) < 600_000, sizes
    html = tmp_path / "report.html"
    html.write_text(render_postmortem(doc, built, notes=data.notes))
    assert html.stat().st_size < 2_500_000
    page = load(chromium, html)
    assert page.body.get("data-render-done") == "1" and page.body.get("data-errors") == "0", page.body
    assert page.body.get("data-charts-rendered") == str(len(built)) and page.console == []
