"""The HTML report: one self-contained file that works offline.

Altair's default HTML loads Vega from a CDN and renders blank without network. Here the Vega,
Vega-Lite and vega-embed JavaScript comes from vl-convert (``vl_convert.javascript_bundle()``,
the same libraries vl-convert renders PNGs with) and is inlined once; every chart is a Vega-Lite
spec with its data inlined, drawn by ``vegaEmbed`` as SVG. The page records script errors and how
many charts rendered in ``data-*`` attributes of ``<body>`` (``data-render-done``,
``data-charts-rendered``, ``data-charts-expected``, ``data-errors``): the browser test reads them
from the DOM headless Chromium dumps.
"""

from __future__ import annotations

import html
import json
from functools import lru_cache
from importlib.resources import files
from string import Template
from typing import Any

from stallscope import __version__
from stallscope.report.verdict import culprits, percent, sql_command, verdict

SEVERITIES = ("critical", "high", "medium", "low", "info")


@lru_cache(maxsize=1)
def javascript_bundle() -> str:
    """Vega + Vega-Lite + vega-embed as one classic script (globals ``vega``, ``vegaLite``, ``vegaEmbed``)."""
    import vl_convert as vlc

    js: str = vlc.javascript_bundle()  # type: ignore[call-arg]  # the stub omits the default
    # the bundle sits inside <script>: no literal "</script" may close it early
    return js.replace("</script", "<\\/script")


def page(title: str, body: str, specs: dict[str, dict[str, Any]]) -> str:
    """A complete offline page: ``body`` (HTML) plus the charts ``specs`` (id -> Vega-Lite) drawn
    into the elements ``#chart-<id>`` that ``body`` contains."""
    import vl_convert as vlc

    tpl = Template(files("stallscope.report").joinpath("templates/page.html").read_text())
    spec_json = json.dumps(specs, separators=(",", ":"), default=str).replace("</", "<\\/")
    return tpl.substitute(title=html.escape(title), version=__version__, n_charts=len(specs), bundle=javascript_bundle(),
                          body=body, specs=spec_json, vega_version=vlc.get_vega_version(),
                          vegalite_version=vlc.get_vegalite_versions()[-1])


def chart_block(name: str, title: str, caption: str, hint: str = "") -> str:
    """A chart section: heading, how to read it, and the element vega-embed draws into."""
    text = html.escape(caption + (" " + hint if hint else ""))
    return (f'<section class="chart" id="{name}"><h3>{html.escape(title)}</h3>'
            f'<p class="caption">{text}</p><div id="chart-{name}"></div></section>')


def sev_badge(sev: str) -> str:
    return f'<span class="sev {html.escape(sev)}">{html.escape(sev)}</span>'


def render_postmortem(doc: dict[str, Any], charts: list[tuple[Any, Any]], *, notes: list[str], store: str | None = None) -> str:
    """The post-mortem page for the findings document ``doc`` and its built charts."""
    from stallscope.report.charts import to_vegalite

    e = html.escape
    job = doc["job"]
    v = verdict(doc)
    st = job["step_time_ms"]
    sev_cls = v.severity or "ok"
    parts = [f'<header><h1>Post-mortem of job <code>{e(job["id"])}</code></h1><div class="meta">{_job_line(job)} · '
             f'stallscope {e(doc.get("stallscope_version", __version__))}</div></header>']
    label = "verdict" if v.healthy else f"verdict · {e(v.cause or '')}"
    parts.append(f'<section class="verdict {e(sev_cls)}"><div class="label">{label}</div>'
                 f'<div class="headline">{e(_headline(v))}</div><div class="facts">'
                 f'<div><b>cause</b>{e(v.cause or "none")}</div><div><b>culprits</b>{e(v.culprits)}</div>'
                 f'<div><b>time lost</b>{e(v.lost)}</div><div><b>severity</b>{e(v.severity or "none")}</div>'
                 f'<div><b>confidence</b>{e(v.confidence)}</div>'
                 f'<div><b>step time</b>{_ms(st.get("median"))} median · {_ms(st.get("p90"))} p90</div></div></section>')
    parts.append(_findings_html(doc, store=store))
    specs: dict[str, dict[str, Any]] = {}
    if charts:
        parts.append("<h2>Charts</h2>")
        for spec, chart in charts:
            specs[spec.name] = to_vegalite(chart)
            parts.append(chart_block(spec.name, spec.title, spec.caption, spec.html_hint))
    if notes:
        parts.append('<p class="note">' + "<br>".join(e(n) for n in notes) + "</p>")
    if doc.get("warnings"):
        items = "".join(f"<li>{e(w)}</li>" for w in doc["warnings"][:50])
        more = f"<li>… and {len(doc['warnings']) - 50} more</li>" if len(doc["warnings"]) > 50 else ""
        parts.append(f'<h2>Ingest warnings</h2><details><summary>{len(doc["warnings"])} warning(s)</summary><ul>{items}{more}</ul></details>')
    return page(f"stallscope post-mortem · {job['id']}", "\n".join(parts), specs)


def _headline(v: Any) -> str:
    if v.healthy:
        return "No significant slowdown found."
    return f"{v.title[:1].upper()}{v.title[1:]} — ~{v.lost} of the job time lost."


def _job_line(job: dict[str, Any]) -> str:
    st = job["step_time_ms"]
    hosts = job.get("hosts") or []
    return html.escape(f"{job['world_size']} ranks on {len(hosts)} host(s) · {job['steps']} steps · "
                       f"step time median {_ms(st.get('median'))} (p90 {_ms(st.get('p90'))})")


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.1f} ms"


def _findings_html(doc: dict[str, Any], *, store: str | None) -> str:
    e = html.escape
    fs = doc["findings"]
    if not fs:
        return "<h2>Findings</h2><p>No findings: every rule stayed silent.</p>"
    rows = "".join(
        f'<tr><td>{sev_badge(f["severity"])}</td><td><a href="#f-{i}">{e(f["rule"])}</a></td><td>{e(f["cause"])}</td>'
        f'<td>{e(f["title"])}</td><td>{e(culprits(f))}</td><td class="num">{percent(f["lost_time_fraction"])}</td>'
        f'<td class="num">{f["confidence"]:.2f}</td></tr>' for i, f in enumerate(fs, start=1))
    out = ['<h2>Findings</h2><table><thead><tr><th>severity</th><th>rule</th><th>cause</th><th>finding</th><th>culprits</th>'
           f'<th class="num">time lost</th><th class="num">confidence</th></tr></thead><tbody>{rows}</tbody></table>']
    for i, f in enumerate(fs, start=1):
        ev = "".join(
            f'<details><summary>{e(x["description"])}{"" if x.get("value") is None else " — " + e(_value(x["value"]))}</summary>'
            f'<pre><code>{e(sql_command(x["sql"], store=store))}</code></pre></details>' for x in f["evidence"])
        out.append(f'<div class="finding" id="f-{i}"><h3>{sev_badge(f["severity"])} {e(f["rule"])} · {e(f["title"])}</h3>'
                   f'<div>{e(f["summary"])}</div><div class="fix"><b>How to fix:</b> {e(f["recommendation"])}</div>'
                   f'{"<h4>Evidence (rerun with stallscope sql)</h4>" + ev if ev else ""}</div>')
    return "\n".join(out)


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return json.dumps(v, default=str) if not isinstance(v, str) else v
