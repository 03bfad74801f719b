"""Reports for every generator scenario in all three formats: JSON (the findings contract),
Markdown (job summary: verdict first, findings table, evidence in details blocks, PNG charts) and
self-contained offline HTML (Vega inlined, one spec per chart)."""

from __future__ import annotations

import json
from html import escape as html_escape
import re

import jsonschema
import pytest

from stallscope.report.verdict import verdict
from stallscope.rules.engine import findings_schema
from stallscope.samples import SCENARIOS

from tests.report.conftest import Job, Reports

#: charts every job with steps and collectives has (bandwidth needs >= 1 MiB collectives with a
#: transfer time; clusters need >= 3 ranks with features)
ALWAYS = {"heatmap", "breakdown", "timeline", "step_times", "clusters"}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_json_is_the_findings_contract(jobs: dict[str, Job], reports: dict[str, Reports], scenario: str) -> None:
    doc = json.loads(reports[scenario].json.read_text())
    jsonschema.validate(doc, findings_schema())
    assert doc == jobs[scenario].doc


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_markdown_report(jobs: dict[str, Job], reports: dict[str, Reports], scenario: str) -> None:
    r, doc = reports[scenario], jobs[scenario].doc
    md = r.md.read_text()
    v = verdict(doc)
    first = [line for line in md.splitlines() if line.startswith(">")][0]
    assert md.index(first) < md.index("### Findings"), "the verdict comes first"
    if v.healthy:
        assert "Verdict: healthy" in first
    else:
        assert f"Verdict: {v.cause}" in first and v.title in first
        assert "| severity | rule | cause | finding | culprits | time lost | confidence |" in md
        for f in doc["findings"]:
            assert f"| {f['rule']} | {f['cause']} |" in md
    n_evidence = sum(len(f["evidence"]) for f in doc["findings"])
    assert md.count('stallscope sql "') + md.count("stallscope sql '") == n_evidence
    assert md.count("<details>") == md.count("</details>")
    # every chart is a PNG beside the report, linked relatively
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert set(links) == {f"report-{c}.png" for c in r.charts}
    for link in links:
        assert (r.md.parent / link).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert ALWAYS <= set(r.charts), f"missing charts: {ALWAYS - set(r.charts)}"


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_html_report_is_one_offline_file(jobs: dict[str, Job], reports: dict[str, Reports], scenario: str) -> None:
    r, doc = reports[scenario], jobs[scenario].doc
    html = r.html.read_text()
    # nothing is loaded from elsewhere: no external scripts, styles, images or fonts (the inlined
    # libraries' own code mentions such tags in strings: look outside the script bodies)
    markup = re.sub(r"(<script[^>]*>).*?(</script>)", r"\1\2", html, flags=re.S)
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)=", markup)
    assert "@import" not in markup and "url(" not in markup
    assert "vegaEmbed" in html and "window.vegaLite" in html, "Vega, Vega-Lite and vega-embed are inlined"
    m = re.search(r'<script type="application/json" id="stallscope-specs">(.*?)</script>', html, re.S)
    assert m, "the chart specs are in the page"
    specs = json.loads(m.group(1))
    assert list(specs) == r.charts
    for name, spec in specs.items():
        assert f'<div id="chart-{name}">' in html
        assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/v6")
        assert "datasets" in spec and all(len(rows) > 0 for rows in spec["datasets"].values())
    v = verdict(doc)
    assert (html_escape(v.title[1:]) if not v.healthy else "No significant slowdown found") in html
    for f in doc["findings"]:
        assert f'id="f-{doc["findings"].index(f) + 1}"' in html
    assert len(html) < 2_000_000
