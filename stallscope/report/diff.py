"""Compare two jobs: step time, stall breakdown, collective bandwidth, findings.

The nightly-scaling use case: yesterday's job (or a stored baseline job) against today's.
:func:`compare` builds the diff document (the JSON of ``stallscope diff --format json``,
documented in ``docs/reports.md``); :func:`render_markdown` and :func:`render_html` lay it out.

* **Step time**: median and p90 of the per-step time (slowest rank of each step, as in the
  findings document); ``regression_pct`` is the change of the median, positive when NEW is slower.
* **Stall breakdown**: mean ms per rank and step of each component, job-wide and per rank (ranks
  matched by global rank; the ranks whose step changed most are listed first).
* **Collectives**: median bus bandwidth per (op, scope, members, bytes) shape present in both.
* **Findings**: matched by rule and culprits (ranks and hosts). *new*: only in NEW; *resolved*:
  only in BASE; *worsened*: severity rose, or the time lost grew by at least
  ``WORSENED_POINTS`` percentage points; *improved*: the reverse; else *unchanged*.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from stallscope import __version__
from stallscope.report.data import COMPONENTS, human_bytes
from stallscope.report.verdict import culprits, percent
from stallscope.store.queries import Store

#: a finding whose time lost grew by at least this many percentage points has worsened
WORSENED_POINTS = 2.0
_SEV = {"critical": 4, "high": 3, "medium": 2, "low": 1, "info": 0}


def compare(base: Store, base_doc: dict[str, Any], new: Store, new_doc: dict[str, Any]) -> dict[str, Any]:
    """The diff document of two jobs (each store restricted to its job, each with its findings)."""
    b_st, n_st = base_doc["job"]["step_time_ms"], new_doc["job"]["step_time_ms"]
    step = {k: _change(b_st.get(k), n_st.get(k)) for k in ("median", "p90")}
    return {
        "stallscope_version": __version__,
        "base": base_doc["job"],
        "new": new_doc["job"],
        "step_time_ms": step,
        "regression_pct": step["median"]["change_pct"],
        "steps": _per_step(base, new),
        "breakdown": _breakdown(base, new),
        "collectives": _collectives(base, new),
        "findings": _findings(base_doc["findings"], new_doc["findings"]),
    }


def _change(b: float | None, n: float | None) -> dict[str, float | None]:
    pct = None if b in (None, 0) or n is None else round(100.0 * (n - b) / b, 2)  # type: ignore[operator]
    diff = None if b is None or n is None else round(n - b, 3)
    return {"base": b, "new": n, "change": diff, "change_pct": pct}


def _per_step(base: Store, new: Store) -> list[dict[str, Any]]:
    """Step time of the i-th profiled step of each job (step numbers differ between jobs)."""
    q = "SELECT step, step_ms_max FROM step_times ORDER BY step"
    b, n = base.sql(q), new.sql(q)
    out = []
    for i in range(max(b.height, n.height)):
        out.append({"index": i, "base_step": b["step"][i] if i < b.height else None, "new_step": n["step"][i] if i < n.height else None,
                    "base_ms": round(float(b["step_ms_max"][i]), 3) if i < b.height else None,
                    "new_ms": round(float(n["step_ms_max"][i]), 3) if i < n.height else None})
    return out


def _breakdown(base: Store, new: Store) -> dict[str, Any]:
    cols = ", ".join(f"avg({c}) / 1e6 AS {c.replace('_ns', '_ms')}" for c, _ in COMPONENTS)
    tot_q = f"SELECT avg(step_ns) / 1e6 AS step_ms, {cols} FROM step_breakdown"
    rank_q = f"SELECT rank, any_value(host) AS host, avg(step_ns) / 1e6 AS step_ms, {cols} FROM step_breakdown GROUP BY rank"
    tb, tn = base.sql(tot_q), new.sql(tot_q)
    names = ["step_ms"] + [c.replace("_ns", "_ms") for c, _ in COMPONENTS]
    labels = {"step_ms": "step", **{c.replace("_ns", "_ms"): label for c, label in COMPONENTS}}
    totals = []
    for c in names:
        bv = tb[c][0] if tb.height else None
        nv = tn[c][0] if tn.height else None
        totals.append({"component": labels[c], "column": c, **_change(_r(bv), _r(nv))})
    rb, rn = base.sql(rank_q), new.sql(rank_q)
    ranks: list[dict[str, Any]] = []
    if rb.height and rn.height:
        j = rb.join(rn, on="rank", suffix="_new").with_columns((pl.col("step_ms_new") - pl.col("step_ms")).alias("_d"))
        # the ranks whose time moved most between components, then by rank
        moved = j.with_columns(pl.max_horizontal(*[(pl.col(f"{c}_new") - pl.col(c)).abs() for c in names[1:]]).alias("_m"))
        for r in moved.sort(["_m", "rank"], descending=[True, False]).head(32).iter_rows(named=True):
            ranks.append({"rank": r["rank"], "host_base": r["host"], "host_new": r["host_new"],
                          **{c: {"base": _r(r[c]), "new": _r(r[f"{c}_new"])} for c in names}})
    return {"unit": "ms per rank and step (mean)", "totals": totals, "ranks": ranks,
            "ranks_only_in_base": sorted(set(rb["rank"].to_list()) - set(rn["rank"].to_list())) if rb.height else [],
            "ranks_only_in_new": sorted(set(rn["rank"].to_list()) - set(rb["rank"].to_list())) if rn.height else []}


def _collectives(base: Store, new: Store) -> list[dict[str, Any]]:
    q = """SELECT op, scope, members, bytes, instances, busbw_gbps_median FROM collective_bandwidth
           WHERE members > 1 AND busbw_gbps_median IS NOT NULL"""
    b, n = base.sql(q), new.sql(q)
    keys = ["op", "scope", "members", "bytes"]
    if b.height == 0 and n.height == 0:
        return []
    j = b.join(n, on=keys, how="full", coalesce=True, suffix="_new")
    out = []
    for r in j.sort("bytes", "op", "scope", descending=[True, False, False]).iter_rows(named=True):
        ch = _change(_r(r["busbw_gbps_median"]), _r(r["busbw_gbps_median_new"]))
        out.append({"op": r["op"], "scope": r["scope"], "members": r["members"], "bytes": r["bytes"],
                     "instances_base": r["instances"], "instances_new": r["instances_new"],
                     "busbw_gbps": ch})
    return out


def _key(f: dict[str, Any]) -> tuple[str, tuple[int, ...], tuple[str, ...]]:
    return (f["rule"], tuple(f.get("ranks") or []), tuple(f.get("hosts") or []))


def _brief(f: dict[str, Any]) -> dict[str, Any]:
    return {"rule": f["rule"], "cause": f["cause"], "severity": f["severity"], "title": f["title"],
            "ranks": f.get("ranks") or [], "hosts": f.get("hosts") or [], "lost_time_fraction": f["lost_time_fraction"]}


def _findings(base: list[dict[str, Any]], new: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    bmap = {_key(f): f for f in base}
    nmap = {_key(f): f for f in new}
    out: dict[str, list[dict[str, Any]]] = {"new": [], "worsened": [], "improved": [], "unchanged": [], "resolved": []}
    for k, f in nmap.items():
        if k not in bmap:
            out["new"].append(_brief(f))
            continue
        g = bmap[k]
        d_sev = _SEV[f["severity"]] - _SEV[g["severity"]]
        d_lost = 100.0 * ((f["lost_time_fraction"] or 0.0) - (g["lost_time_fraction"] or 0.0))
        item = {**_brief(f), "base_severity": g["severity"], "base_lost_time_fraction": g["lost_time_fraction"]}
        if d_sev > 0 or (d_sev == 0 and d_lost >= WORSENED_POINTS):
            out["worsened"].append(item)
        elif d_sev < 0 or d_lost <= -WORSENED_POINTS:
            out["improved"].append(item)
        else:
            out["unchanged"].append(item)
    out["resolved"] = [_brief(f) for k, f in bmap.items() if k not in nmap]
    return out


def _r(x: Any, nd: int = 3) -> float | None:
    return None if x is None else round(float(x), nd)


# -- rendering -------------------------------------------------------------------------------------
def headline(d: dict[str, Any]) -> str:
    """One line: how step time moved and what changed in the findings."""
    m = d["step_time_ms"]["median"]
    f = d["findings"]
    if m["change_pct"] is None:
        moved = "step time not comparable (no profiler steps in one of the jobs)"
    else:
        word = "slower" if m["change_pct"] > 0 else "faster"
        moved = f"median step time {m['base']:.1f} → {m['new']:.1f} ms ({abs(m['change_pct']):.1f}% {word})"
    bits = [f"{len(f[k])} {k}" for k in ("new", "worsened", "resolved") if f[k]]
    return moved + ("; findings: " + ", ".join(bits) if bits else "; no new or worsened findings")


Table = tuple[str, list[str], list[list[str]]]


def tables(d: dict[str, Any]) -> list[Table]:
    """The diff as (title, header, rows) tables, shared by the Markdown and HTML renderings."""
    b, n = d["base"], d["new"]
    out: list[Table] = []
    rows = [[f"step time {k} (ms)", _f(d["step_time_ms"][k]["base"]), _f(d["step_time_ms"][k]["new"]), _pct(d["step_time_ms"][k]["change_pct"])]
            for k in ("median", "p90")]
    rows.append(["ranks · hosts · steps", f"{b['world_size']} · {len(b['hosts'])} · {b['steps']}",
                 f"{n['world_size']} · {len(n['hosts'])} · {n['steps']}", ""])
    out.append(("Step time", ["", "base", "new", "change"], rows))
    f = d["findings"]
    rows = []
    for kind in ("new", "worsened", "improved", "unchanged", "resolved"):
        for x in f[kind]:
            before = {"new": "—", "resolved": percent(x["lost_time_fraction"])}.get(kind, percent(x.get("base_lost_time_fraction")))
            after = "—" if kind == "resolved" else percent(x["lost_time_fraction"])
            sev = x["severity"] if x.get("base_severity", x["severity"]) == x["severity"] else f"{x['base_severity']} → {x['severity']}"
            rows.append([kind, sev, x["rule"], x["cause"], x["title"], culprits(x), f"{before} → {after}"])
    out.append(("Findings", ["change", "severity", "rule", "cause", "finding", "culprits", "time lost (base → new)"], rows))
    rows = [[t["component"], _f(t["base"]), _f(t["new"]), _signed(t["change"])] for t in d["breakdown"]["totals"]]
    out.append((f"Stall breakdown ({d['breakdown']['unit']})", ["component", "base", "new", "change"], rows))
    cols = ("step_ms", "compute_ms", "comm_inter_ms", "comm_intra_ms", "sync_wait_ms", "host_stall_ms")
    rows = [[str(r["rank"]), str(r["host_new"]), *[f"{_f(r[c]['base'])} → {_f(r[c]['new'])}" for c in cols]] for r in d["breakdown"]["ranks"][:12]]
    out.append(("Ranks whose breakdown moved most (ms per step, base → new)",
                ["rank", "host (new)", "step", "compute", "comm inter", "comm intra", "waiting", "host stall"], rows))
    rows = [[f"{c['op']} {human_bytes(c['bytes'])}", c["scope"], str(c["members"]), _f(c["busbw_gbps"]["base"]), _f(c["busbw_gbps"]["new"]),
             _pct(c["busbw_gbps"]["change_pct"])] for c in d["collectives"][:20]]
    out.append(("Collective bus bandwidth (GB/s, median)", ["collective", "scope", "members", "base", "new", "change"], rows))
    return out


def render_markdown(d: dict[str, Any]) -> str:
    """The diff as Markdown: the headline, then the tables (empty ones say so)."""
    lines = [f"## stallscope diff: `{d['base']['id']}` → `{d['new']['id']}`", "", f"> **{headline(d)}**"]
    for title, head, rows in tables(d):
        lines += ["", f"### {title}", ""]
        if not rows:
            lines.append("None.")
            continue
        lines += ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        lines += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def render_html(d: dict[str, Any]) -> str:
    """The diff as one offline HTML page: headline, charts (step time per step, breakdown,
    bandwidth, base vs new) and the tables."""
    import html as H

    from stallscope.report import charts as C
    from stallscope.report.html import chart_block, page

    e = H.escape
    worse = (d["regression_pct"] or 0) > 0 or bool(d["findings"]["new"] or d["findings"]["worsened"])
    body = [f"<header><h1>Diff <code>{e(d['base']['id'])}</code> → <code>{e(d['new']['id'])}</code></h1>"
            f'<div class="meta">stallscope {e(__version__)}</div></header>',
            f'<section class="verdict {"high" if worse else "ok"}"><div class="label">diff</div>'
            f'<div class="headline">{e(headline(d))}</div></section>']
    specs: dict[str, dict[str, Any]] = {}
    charts = (("diff_steps", "Step time per step", "Slowest rank of the i-th profiled step, base vs new.", C.diff_step_times(d)),
              ("diff_breakdown", "Stall breakdown", "Mean ms per rank and step of each component, base vs new.", C.diff_breakdown(d)),
              ("diff_bandwidth", "Collective bus bandwidth", "Median bus bandwidth per collective shape, base vs new.", C.diff_bandwidth(d)))
    for name, title, caption, chart in charts:
        if chart is not None:
            specs[name] = C.to_vegalite(chart)
            body.append(chart_block(name, title, caption))
    for title, head, rows in tables(d):
        body.append(f"<h2>{e(title)}</h2>")
        if not rows:
            body.append("<p>None.</p>")
            continue
        th = "".join(f"<th>{e(h)}</th>" for h in head)
        trs = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows)
        body.append(f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>")
    return page(f"stallscope diff · {d['base']['id']} → {d['new']['id']}", "\n".join(body), specs)


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:,.2f}"


def _signed(x: float | None) -> str:
    return "—" if x is None else f"{x:+,.2f}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.1f}%"


def _cell(s: Any) -> str:
    return str(s).replace("|", "\\|")
