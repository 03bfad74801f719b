"""The HTML reports render in a real browser: headless Chromium opens each file (offline, from
disk), vega-embed draws every chart as SVG with marks in it, and no script logs an error.

Needs Chromium (`apt-get install -y chromium`, done by .ci/run); without it these tests fail
with that instruction instead of skipping.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from stallscope.samples import SCENARIOS
from tests.report.browser import Page, load
from tests.report.conftest import Job, Reports

pytestmark = pytest.mark.browser


def check_rendered(page: Page, charts: list[str]) -> None:
    """Every chart drew an SVG with marks; the page finished and recorded no error."""
    assert page.body.get("data-render-done") == "1", f"the page never finished rendering (body: {page.body})"
    assert page.body.get("data-errors") == "0", f"script errors: {page.body.get('data-error-text')}"
    assert page.body.get("data-charts-rendered") == page.body.get("data-charts-expected") == str(len(charts))
    drawn = page.charts()
    assert set(drawn) == set(charts)
    for name, (svgs, paths) in drawn.items():
        assert svgs >= 1 and paths >= 1, f"chart {name} has no drawn SVG ({svgs} svg, {paths} paths)"
    # Chromium prints every console message (errors, and Vega's warnings) on stderr
    assert page.console == [], "console messages:\n" + "\n".join(page.console)


@pytest.fixture(scope="module")
def pages(chromium: str, reports: dict[str, Reports]) -> dict[str, Page]:
    """Every scenario's HTML report as Chromium rendered it (a few browsers at once)."""
    with ThreadPoolExecutor(max_workers=3) as pool:
        done = dict(zip(reports, pool.map(lambda r: load(chromium, r.html), reports.values())))
    return done


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_scenario_report_renders_in_chromium(pages: dict[str, Page], reports: dict[str, Reports], scenario: str) -> None:
    check_rendered(pages[scenario], reports[scenario].charts)


def test_diff_report_renders_in_chromium(chromium: str, jobs: dict[str, Job], tmp_path: Path) -> None:
    from stallscope.report.diff import compare, render_html

    base, new = jobs["healthy"], jobs["degraded_nic"]
    d = compare(base.handle, base.doc, new.handle, new.doc)
    html = tmp_path / "diff.html"
    html.write_text(render_html(d))
    check_rendered(load(chromium, html), ["diff_steps", "diff_breakdown", "diff_bandwidth"])


def test_a_broken_chart_is_caught(chromium: str, tmp_path: Path) -> None:
    """The checks above can fail: a spec Vega-Lite rejects is reported, not silently blank."""
    from stallscope.report.html import chart_block, page

    bad = {"mark": "nonexistent-mark", "data": {"values": [{"a": 1}]}, "encoding": {"x": {"field": "a", "type": "quantitative"}}}
    html = tmp_path / "bad.html"
    html.write_text(page("broken", chart_block("bad", "broken", "a chart that cannot render"), {"bad": bad}))
    p = load(chromium, html)
    assert p.body.get("data-render-done") == "1"
    assert p.body.get("data-errors") != "0" and "chart bad" in p.body.get("data-error-text", "")
    assert p.body.get("data-charts-rendered") == "0"
