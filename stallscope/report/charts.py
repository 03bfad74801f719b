"""Altair charts of a post-mortem, from the tables of :mod:`stallscope.report.data`.

Each builder takes polars DataFrames and returns an Altair chart, or None when there is nothing
to draw. Altair and vl-convert are imported inside the functions: ``stallscope --help`` and the
JSON/text outputs never load them.

The charts, and what each is for:

* ``heatmap`` — rank × step, coloured by late arrival at collectives (default), waiting, step
  time, compute or host stall (a drop-down picks the metric): a straggler is a hot row, a slow
  host a hot block of rows, jitter a speckle.
* ``breakdown`` — where each rank's step went (stacked bars), grouped by host, with the host
  averages on top.
* ``bandwidth`` — bus bandwidth per collective and group (intra- vs inter-node) with the
  bandwidth it should get as a black tick.
* ``timeline`` — the slowest step as a Gantt chart across ranks on aligned clocks: computation on
  one lane, collectives (waiting, then moving bytes) on the other.
* ``clusters`` — every rank as a point (own work vs time in collectives), coloured by the group
  the clustering found.
* ``step_times`` — slowest, median and fastest rank per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import polars as pl

if TYPE_CHECKING:  # pragma: no cover
    from stallscope.report.data import ReportData

#: one colour per stall component / timeline kind, the same in every chart
PALETTE: dict[str, str] = {
    "compute": "#4c78a8",
    "comm intra-node": "#72b7b2",
    "comm inter-node": "#b279a2",
    "waiting for peers": "#e45756",
    "host stall": "#f58518",
    "other idle": "#bab0ac",
    "moving bytes": "#b279a2",
}
#: heatmap metrics: column -> label
HEAT_METRICS: dict[str, str] = {
    "late_ms": "late arrival at collectives (ms)",
    "wait_ms": "waiting at collectives (ms)",
    "step_ms": "step time (ms)",
    "compute_ms": "compute (ms)",
    "host_stall_ms": "host stall (ms)",
}
WIDTH = 640


@dataclass(frozen=True)
class ChartSpec:
    """A chart of the report: its id (file names, anchors), title and how to read it."""

    name: str
    title: str
    caption: str
    build: Callable[["ReportData"], Any]
    #: said under the caption in the HTML report only (interactions)
    html_hint: str = ""


def _alt() -> Any:
    import altair as alt

    return alt


def _scale(kinds: list[str]) -> Any:
    alt = _alt()
    return alt.Scale(domain=kinds, range=[PALETTE.get(k, "#999999") for k in kinds])


def _rank_order(df: pl.DataFrame, culprits: list[int] | None = None) -> pl.DataFrame:
    """Add ``label`` ('host · rank N', '… (culprit)' for the verdict's ranks) and ``order`` (by
    host, then rank) for sorted rank axes."""
    keys = df.select("host", "rank").unique().sort("host", "rank").with_row_index("order")
    out = df.drop("label", strict=False).join(keys, on=["host", "rank"], how="left")
    mark = pl.when(pl.col("rank").is_in(culprits or [])).then(pl.lit(" (culprit)")).otherwise(pl.lit(""))
    return out.with_columns(pl.format("{} · rank {}{}", pl.col("host"), pl.col("rank"), mark).alias("label"))


def _rank_axis_height(n: int) -> Any:
    return {"step": 22} if n <= 16 else {"step": 14} if n <= 64 else {"step": max(2, int(800 / n))}


# -- builders -----------------------------------------------------------------------------------
def heatmap(heat: pl.DataFrame, culprits: list[int] | None = None) -> Any:
    """Rank × step heatmap; a drop-down chooses the metric (default: late arrival)."""
    if heat.height == 0:
        return None
    alt = _alt()
    n = heat["rank"].n_unique()
    df = _rank_order(heat, culprits).select("rank", "host", "label", "order", "step", *[pl.col(c).round(2) for c in HEAT_METRICS])
    if n > 64:  # no room for rank labels: the tooltip names rank and host; keep the data small
        df = df.drop("label")
    metric = alt.param(name="metric", value=HEAT_METRICS["late_ms"],
                       bind=alt.binding_select(options=list(HEAT_METRICS.values()), name="colour by "))
    labels = [f"datum['{c}']" for c in HEAT_METRICS]
    expr = " : ".join(f"metric == '{lab}' ? {v}" for lab, v in zip(HEAT_METRICS.values(), labels)) + " : 0"
    big = n > 64
    return (alt.Chart(df).mark_rect().encode(
        x=alt.X("step:O", title="profiler step"),
        y=(alt.Y("order:O", title=f"{n} ranks (grouped by host)", axis=alt.Axis(labels=False, ticks=False)) if big else
           alt.Y("label:N", sort=alt.EncodingSortField("order"), title="rank (grouped by host)")),
        color=alt.Color("value:Q", title="ms", scale=alt.Scale(scheme="orangered")),
        tooltip=[alt.Tooltip("rank:Q"), alt.Tooltip("host:N"), alt.Tooltip("step:O"),
                 *[alt.Tooltip(f"{c}:Q", title=lab, format=".2f") for c, lab in HEAT_METRICS.items()]],
    ).transform_calculate(value=expr).add_params(metric)
        .properties(width=min(WIDTH, max(360, 40 * df["step"].n_unique())), height=_rank_axis_height(n)))


def breakdown(bd: pl.DataFrame, hosts: pl.DataFrame, culprits: list[int] | None = None) -> Any:
    """Stacked bars of each rank's step (mean ms per step), grouped by host; host averages on top."""
    if bd.height == 0:
        return None
    alt = _alt()
    kinds = [k for k in PALETTE if k in set(bd["component"].to_list())]
    color = alt.Color("component:N", scale=_scale(kinds), title=None, legend=alt.Legend(orient="top"))
    tip = [alt.Tooltip("component:N"), alt.Tooltip("ms_per_step:Q", title="ms per step", format=".2f")]
    df = _rank_order(bd, culprits)
    ranks = alt.Chart(df).mark_bar().encode(
        x=alt.X("ms_per_step:Q", stack="zero", title="ms per step (mean over steps)"),
        y=alt.Y("label:N", sort=alt.EncodingSortField("order"), title=None),
        color=color, order=alt.Order("component_order:Q"),
        tooltip=[alt.Tooltip("rank:Q"), alt.Tooltip("host:N"), *tip],
    ).properties(
        width=WIDTH, height=_rank_axis_height(df["rank"].n_unique()), title="per rank")
    if hosts.height == 0 or hosts["host"].n_unique() < 2:
        return ranks
    hdf = hosts.with_columns(pl.format("{} ({} ranks)", pl.col("host"), pl.col("ranks")).alias("host_label"))
    per_host = alt.Chart(hdf).mark_bar().encode(
        x=alt.X("ms_per_step:Q", stack="zero", title="ms per rank and step (host mean)"),
        y=alt.Y("host_label:N", title=None, sort=alt.EncodingSortField("host")),
        color=color, order=alt.Order("component_order:Q"),
        tooltip=[alt.Tooltip("host:N"), alt.Tooltip("ranks:Q"), *tip],
    ).properties(width=WIDTH, height=_rank_axis_height(hdf["host"].n_unique()), title="per host")
    return alt.vconcat(per_host, ranks).resolve_scale(color="shared")


def bandwidth(bw: pl.DataFrame) -> Any:
    """Bus bandwidth per collective and group (bars), p10 (grey tick), expected (black tick)."""
    if bw.height == 0:
        return None
    alt = _alt()
    df = bw.with_columns(pl.when(pl.col("scope") == "inter").then(pl.lit("inter-node")).otherwise(pl.lit("intra-node")).alias("scope_label"),
                         pl.col("bytes").cast(pl.Float64).alias("bytes_f"))
    scopes = [x for x in ("inter-node", "intra-node") if x in set(df["scope_label"].to_list())]
    y = alt.Y("label:N", sort=alt.EncodingSortField("transfer_ms_total", op="max", order="descending"), title=None)
    tip = [alt.Tooltip("op:N"), alt.Tooltip("group:N"), alt.Tooltip("transport:N", title="transport (NCCL logs)"),
           alt.Tooltip("members:Q"), alt.Tooltip("bytes_f:Q", title="bytes", format=",.0f"), alt.Tooltip("instances:Q"),
           alt.Tooltip("busbw_gbps:Q", title="busbw median (GB/s)", format=".2f"),
           alt.Tooltip("busbw_p10_gbps:Q", title="busbw p10 (GB/s)", format=".2f"),
           alt.Tooltip("expected_gbps:Q", title="expected (GB/s)", format=".2f"), alt.Tooltip("expected_basis:N", title="expected from"),
           alt.Tooltip("transfer_ms_total:Q", title="transfer time, total (ms)", format=".1f")]
    base = alt.Chart(df).encode(y=y, tooltip=tip)
    bars = base.mark_bar().encode(
        x=alt.X("busbw_gbps:Q", title="bus bandwidth (GB/s, median; grey tick: p10; black tick: expected)"),
        color=alt.Color("scope_label:N", title=None, scale=alt.Scale(domain=scopes, range=[{"inter-node": "#b279a2", "intra-node": "#72b7b2"}[x] for x in scopes]),
                        legend=alt.Legend(orient="top")))
    p10 = base.mark_tick(color="#555555", thickness=2).encode(x="busbw_p10_gbps:Q")
    expected = base.mark_tick(color="black", thickness=3, size=22).encode(x="expected_gbps:Q")
    text = base.mark_text(align="left", dx=4, fontSize=11).encode(
        x="busbw_gbps:Q", text=alt.Text("busbw_gbps:Q", format=".1f"))
    layers = [bars, p10, text] + ([expected] if df["expected_gbps"].is_not_null().any() else [])
    return alt.layer(*layers).properties(width=WIDTH, height={"step": 26})


def timeline(tl: pl.DataFrame, step: int | None, culprits: list[int] | None = None) -> Any:
    """The worst step across ranks: computation lane and collectives lane per rank."""
    if tl.height == 0:
        return None
    alt = _alt()
    df = _rank_order(tl, culprits).with_columns(
        pl.when(pl.col("kind") == "compute").then(pl.lit("compute")).otherwise(pl.lit("collectives")).alias("lane"),
        (pl.col("end_ms") - pl.col("start_ms")).round(4).alias("dur_ms"))
    kinds = [k for k in ("compute", "waiting for peers", "moving bytes") if k in set(df["kind"].to_list())]
    n = df["rank"].n_unique()
    return alt.Chart(df).mark_bar(height={"band": 0.8}).encode(
        x=alt.X("start_ms:Q", title=f"ms since the start of step {step} (aligned clocks)"),
        x2="end_ms:Q",
        y=alt.Y("label:N", sort=alt.EncodingSortField("order"), title=None),
        yOffset=alt.YOffset("lane:N", sort=["compute", "collectives"]),
        color=alt.Color("kind:N", scale=_scale(kinds), title=None, legend=alt.Legend(orient="top")),
        tooltip=[alt.Tooltip("rank:Q"), alt.Tooltip("host:N"), alt.Tooltip("kind:N"),
                 alt.Tooltip("start_ms:Q", format=".3f"), alt.Tooltip("end_ms:Q", format=".3f"), alt.Tooltip("dur_ms:Q", title="ms", format=".3f")],
    ).properties(width=WIDTH, height={"step": 30 if n <= 16 else 18})


def clusters(cl: pl.DataFrame) -> Any:
    """Ranks as points: own work vs time in collectives, coloured by the clustering's groups."""
    if cl.height == 0:
        return None
    alt = _alt()
    groups = sorted(set(cl["cluster"].to_list()), key=lambda g: (g != "normal", g))
    palette = ["#9ecae9", "#e45756", "#f58518", "#54a24b", "#b279a2", "#eeca3b", "#ff9da6", "#9d755d"]
    color = alt.Color("cluster:N", title=None, scale=alt.Scale(domain=groups, range=[palette[i % len(palette)] for i in range(len(groups))]),
                      legend=alt.Legend(orient="top", columns=1, labelLimit=600))
    tip = [alt.Tooltip("rank:Q"), alt.Tooltip("host:N"), alt.Tooltip("cluster:N"),
           *[alt.Tooltip(f"{c}:Q", format=".3f") for c in ("compute_frac", "host_stall_frac", "sync_wait_frac", "comm_frac", "lateness_frac", "last_share")]]
    base = alt.Chart(cl).encode(
        x=alt.X("own_work_share:Q", title="own work: compute + host stall (share of step)", scale=alt.Scale(zero=False, padding=20)),
        y=alt.Y("collective_share:Q", title="in collectives: communication + waiting (share of step)", scale=alt.Scale(zero=False, padding=20)),
        tooltip=tip)
    points = base.mark_point(filled=True, opacity=0.85).encode(
        color=color, size=alt.Size("last_share:Q", title="arrived last (share)", scale=alt.Scale(range=[60, 400])))
    labels = base.transform_filter("datum.cluster != 'normal'").mark_text(align="left", dx=8, dy=-6, fontSize=11).encode(
        text=alt.Text("rank:Q"))
    return alt.layer(points, labels).properties(width=WIDTH - 160, height=320)


def step_times(st: pl.DataFrame) -> Any:
    """Slowest, median and fastest rank per step."""
    if st.height == 0:
        return None
    alt = _alt()
    df = st.unpivot(index="step", on=["step_ms_max", "step_ms_median", "step_ms_min"], variable_name="which", value_name="ms").with_columns(
        pl.col("which").replace_strict({"step_ms_max": "slowest rank", "step_ms_median": "median rank", "step_ms_min": "fastest rank"}),
        pl.col("ms").round(3))
    return alt.Chart(df).mark_line(point=True).encode(
        x=alt.X("step:O", title="profiler step"), y=alt.Y("ms:Q", title="step time (ms)", scale=alt.Scale(zero=False)),
        color=alt.Color("which:N", title=None, sort=["slowest rank", "median rank", "fastest rank"], legend=alt.Legend(orient="top")),
        tooltip=["step:O", "which:N", alt.Tooltip("ms:Q", format=".2f")],
    ).properties(width=min(WIDTH, max(240, 40 * st.height)), height=180)


# -- diff charts (from the diff document of report.diff) -------------------------------------------
_SIDES = ["base", "new"]
_SIDE_COLORS = ["#9ecae9", "#4c78a8"]


def diff_step_times(d: dict[str, Any]) -> Any:
    """Step time of the i-th profiled step, base vs new."""
    rows = [{"index": s["index"], "job": side, "ms": s[f"{side}_ms"]} for s in d["steps"] for side in _SIDES if s[f"{side}_ms"] is not None]
    if not rows:
        return None
    alt = _alt()
    return alt.Chart(pl.DataFrame(rows)).mark_line(point=True).encode(
        x=alt.X("index:O", title="profiled step (i-th)"), y=alt.Y("ms:Q", title="step time (ms, slowest rank)", scale=alt.Scale(zero=False)),
        color=alt.Color("job:N", scale=alt.Scale(domain=_SIDES, range=_SIDE_COLORS), title=None, legend=alt.Legend(orient="top")),
        tooltip=["index:O", "job:N", alt.Tooltip("ms:Q", format=".2f")],
    ).properties(width=min(WIDTH, max(240, 40 * len(d["steps"]))), height=200)


def diff_breakdown(d: dict[str, Any]) -> Any:
    """Mean ms per rank and step of each stall component, base vs new (grouped bars)."""
    rows = [{"component": t["component"], "job": side, "ms": t[side]} for t in d["breakdown"]["totals"]
            if t["component"] != "step" for side in _SIDES if t[side] is not None]
    if not rows:
        return None
    alt = _alt()
    order = [t["component"] for t in d["breakdown"]["totals"] if t["component"] != "step"]
    return alt.Chart(pl.DataFrame(rows)).mark_bar().encode(
        y=alt.Y("component:N", sort=order, title=None), yOffset=alt.YOffset("job:N", sort=_SIDES),
        x=alt.X("ms:Q", title="ms per rank and step (mean)"),
        color=alt.Color("job:N", scale=alt.Scale(domain=_SIDES, range=_SIDE_COLORS), title=None, legend=alt.Legend(orient="top")),
        tooltip=["component:N", "job:N", alt.Tooltip("ms:Q", format=".2f")],
    ).properties(width=WIDTH, height={"step": 34})


def diff_bandwidth(d: dict[str, Any]) -> Any:
    """Median bus bandwidth per collective shape, base vs new (grouped bars)."""
    from stallscope.report.data import human_bytes

    rows = []
    for c in d["collectives"][:20]:
        label = f"{c['op']} {human_bytes(c['bytes'])} · {c['scope']} · {c['members']} ranks"
        rows += [{"collective": label, "job": side, "gbps": c["busbw_gbps"][side]} for side in _SIDES if c["busbw_gbps"][side] is not None]
    if not rows:
        return None
    alt = _alt()
    return alt.Chart(pl.DataFrame(rows)).mark_bar().encode(
        y=alt.Y("collective:N", title=None, sort=None), yOffset=alt.YOffset("job:N", sort=_SIDES),
        x=alt.X("gbps:Q", title="bus bandwidth (GB/s, median)"),
        color=alt.Color("job:N", scale=alt.Scale(domain=_SIDES, range=_SIDE_COLORS), title=None, legend=alt.Legend(orient="top")),
        tooltip=["collective:N", "job:N", alt.Tooltip("gbps:Q", format=".2f")],
    ).properties(width=WIDTH, height={"step": 34})


#: the report's charts, in reading order
CHARTS: tuple[ChartSpec, ...] = (
    ChartSpec("heatmap", "Rank × step",
              "Late arrival at synchronous collectives per rank and step. "
              "A straggler is a hot row, a slow host a hot block of rows, jitter a speckle with no pattern.",
              lambda d: heatmap(d.heatmap, d.culprits),
              "The drop-down under the chart colours it by waiting, step time, compute or host stall instead; hover for values."),
    ChartSpec("breakdown", "Where each rank's step went",
              "Mean ms per step by component, per host and per rank. Victims of a straggler show long waiting or "
              "exposed communication; the straggler shows more compute or host stall instead.",
              lambda d: breakdown(d.breakdown, d.host_breakdown, d.culprits)),
    ChartSpec("bandwidth", "Collective bus bandwidth",
              "Median bus bandwidth (nccl-tests convention) per collective and group, once every member had arrived. "
              "Black tick: what it should get (inter-node: NCCL's topology or NICs; intra-node: what the hosts achieve).",
              lambda d: bandwidth(d.bandwidth)),
    ChartSpec("timeline", "The slowest step, across ranks",
              "Per rank, computation on the upper lane and collectives on the lower one (red: waiting for late peers, "
              "purple: moving bytes), on clocks aligned across hosts.",
              lambda d: timeline(d.timeline, d.worst_step, d.culprits)),
    ChartSpec("clusters", "Rank clusters",
              "Each rank by its own work and its time in collectives; colours are the groups the clustering "
              "(HDBSCAN over robust-scaled stall features) set apart from the normal ranks.",
              lambda d: clusters(d.clusters)),
    ChartSpec("step_times", "Step time per step",
              "Slowest, median and fastest rank of each step: synchronous training runs at the pace of the slowest.",
              lambda d: step_times(d.step_times)),
)


def build_all(data: "ReportData") -> list[tuple[ChartSpec, Any]]:
    """Every chart that has data, with its spec, in reading order."""
    out = []
    for spec in CHARTS:
        chart = spec.build(data)
        if chart is not None:
            out.append((spec, chart))
    return out


def to_vegalite(chart: Any) -> dict[str, Any]:
    """The chart as a Vega-Lite JSON dict (data inlined)."""
    spec: dict[str, Any] = chart.to_dict()
    return spec


def to_png(spec: dict[str, Any], *, scale: float = 1.5) -> bytes:
    """Render a Vega-Lite spec to PNG with vl-convert (no browser, no network)."""
    import vl_convert as vlc

    png: bytes = vlc.vegalite_to_png(spec, scale=scale)
    return png


def to_svg(spec: dict[str, Any]) -> str:
    """Render a Vega-Lite spec to SVG with vl-convert."""
    import vl_convert as vlc

    svg: str = vlc.vegalite_to_svg(spec)
    return svg
