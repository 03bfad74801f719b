"""The Markdown report: for CI job summaries (``>> $GITHUB_STEP_SUMMARY``), PR comments and
terminals.

Verdict first, then the findings table, each finding with its evidence queries (as
``stallscope sql`` commands) in ``<details>`` blocks, then the charts and the numbers behind them
as small tables, so the page reads well in plain text too. Charts are PNGs made by vl-convert:
written beside the report (``<stem>-<chart>.png``, linked relatively), inlined as ``data:`` URIs,
or left out (``images="none"``: GitHub shows neither local files nor ``data:`` images in a job
summary; upload the HTML report as an artifact instead).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any, Literal

import polars as pl

from stallscope.report.data import human_bytes
from stallscope.report.verdict import culprits, percent, sql_command, verdict

Images = Literal["files", "inline", "none"]


def render_postmortem(doc: dict[str, Any], charts: list[tuple[Any, Any]], data: Any, *, images: Images = "none",
                      out: str | Path | None = None, store: str | None = None) -> str:
    """The Markdown post-mortem; with ``images="files"`` the PNGs are written beside ``out``."""
    job = doc["job"]
    v = verdict(doc)
    lines = [f"## stallscope post-mortem: job `{job['id']}`", ""]
    if v.healthy:
        lines.append("> **Verdict: healthy.** No significant slowdown found (no finding of medium severity or above).")
    else:
        lines.append(f"> **Verdict: {v.cause}** — {v.title}.  ")
        lines.append(f"> **Culprits:** {v.culprits} · **time lost:** ~{v.lost} of the job time · "
                     f"**severity:** {v.severity} · **confidence:** {v.confidence}")
    st = job["step_time_ms"]
    lines += ["", f"{job['world_size']} ranks on {len(job.get('hosts') or [])} host(s) · {job['steps']} steps · "
              f"step time median {_ms(st.get('median'))} (p90 {_ms(st.get('p90'))}) · stallscope {doc.get('stallscope_version', '')}", ""]
    lines += _findings(doc, store=store)
    lines += _charts(charts, images=images, out=out)
    lines += _numbers(data)
    notes = list(getattr(data, "notes", []) or [])
    if notes:
        lines += ["", *[f"_Note: {n}._" for n in notes]]
    if doc.get("warnings"):
        w = doc["warnings"]
        lines += ["", "<details><summary>" + f"{len(w)} ingest warning(s)" + "</summary>", ""]
        lines += [f"- {_cell(x)}" for x in w[:30]] + ([f"- … and {len(w) - 30} more"] if len(w) > 30 else [])
        lines += ["", "</details>"]
    return "\n".join(lines).rstrip() + "\n"


def _findings(doc: dict[str, Any], *, store: str | None) -> list[str]:
    fs = doc["findings"]
    if not fs:
        return ["### Findings", "", "None: every rule stayed silent.", ""]
    out = ["### Findings", "", "| severity | rule | cause | finding | culprits | time lost | confidence |",
           "|---|---|---|---|---|---:|---:|"]
    out += [f"| **{f['severity']}** | {f['rule']} | {f['cause']} | {_cell(f['title'])} | {_cell(culprits(f))} | "
            f"{percent(f['lost_time_fraction'])} | {f['confidence']:.2f} |" for f in fs]
    out.append("")
    for i, f in enumerate(fs, start=1):
        out += [f"#### {i}. {f['rule']} · {f['title']} ({f['severity']})", "", f["summary"], "", f"**How to fix:** {f['recommendation']}", ""]
        if f["evidence"]:
            out += [f"<details><summary>Evidence: {len(f['evidence'])} quer{'y' if len(f['evidence']) == 1 else 'ies'} to rerun</summary>", ""]
            for x in f["evidence"]:
                val = "" if x.get("value") is None else f" (value: {_value(x['value'])})"
                out += [f"- {x['description']}{val}", "", "  ```sh", f"  {sql_command(x['sql'], store=store)}", "  ```", ""]
            out += ["</details>", ""]
    return out


def _charts(charts: list[tuple[Any, Any]], *, images: Images, out: str | Path | None) -> list[str]:
    if images == "none" or not charts:
        return []
    from stallscope.report.charts import to_png, to_vegalite

    lines = ["### Charts", ""]
    for spec, chart in charts:
        png = to_png(to_vegalite(chart))
        if images == "inline":
            src = "data:image/png;base64," + base64.b64encode(png).decode()
        else:
            if out is None:
                from stallscope.errors import UsageError

                raise UsageError("images written as files need --out (or use --images inline|none)")
            target = Path(out).with_name(f"{Path(out).stem}-{spec.name}.png")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(png)
            src = target.name
        lines += [f"**{spec.title}**", "", f"![{spec.title}]({src})", "", f"_{spec.caption}_", ""]
    return lines


def _numbers(data: Any) -> list[str]:
    """Small tables of the numbers behind the charts (readable where images are not shown)."""
    if data is None:
        return []
    out: list[str] = []
    heat: pl.DataFrame = data.heatmap
    if heat.height:
        per = (heat.group_by("rank", "host").agg(pl.col("late_ms").mean().alias("late"), pl.col("wait_ms").mean().alias("wait"),
                                                  pl.col("compute_ms").mean().alias("compute"), pl.col("host_stall_ms").mean().alias("stall"),
                                                  pl.col("step_ms").mean().alias("step"))
               .sort(["late", "wait"], descending=[True, False]).head(8))
        out += ["<details><summary>Ranks that arrive latest at collectives (mean ms per step)</summary>", "",
                "| rank | host | late arrival | waiting | compute | host stall | step |", "|---:|---|---:|---:|---:|---:|---:|"]
        out += [f"| {r} | {h} | {a:.2f} | {w:.2f} | {c:.2f} | {s:.2f} | {t:.2f} |" for r, h, a, w, c, s, t in per.iter_rows()]
        out += ["", "</details>", ""]
    bw: pl.DataFrame = data.bandwidth
    if bw.height:
        out += ["<details><summary>Collective bus bandwidth (GB/s)</summary>", "",
                "| collective | group | transport | instances | busbw median | p10 | expected | expected from |",
                "|---|---|---|---:|---:|---:|---:|---|"]
        for r in bw.head(12).iter_rows(named=True):
            out.append(f"| {r['op']} {human_bytes(r['bytes'])} | {_cell(r['group'])} | {_cell(r['transport'] or '')} | "
                       f"{r['instances']} | {_num(r['busbw_gbps'])} | {_num(r['busbw_p10_gbps'])} | {_num(r['expected_gbps'])} | "
                       f"{_cell(r['expected_basis'] or '')} |")
        out += ["", "</details>", ""]
    if out:
        out = ["### Numbers behind the charts", "", *out]
    return out


def _cell(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.1f}"


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.1f} ms"


def _value(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)
