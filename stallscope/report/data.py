"""The tables a report draws, computed once per job from the documented views.

Every chart of a post-mortem report is fed by one polars DataFrame built here with SQL over the
views (``step_breakdown``, ``collective_members``, ``collective_instances``, ``nccl_transports``)
and, for the two things only the attribution stage knows (the rank clusters and the inter-node
bandwidth each collective should get), from the rules' :class:`~stallscope.rules.context.Context`.
Nothing here draws: :mod:`stallscope.report.charts` turns these frames into Altair charts.

Big jobs stay readable: per-rank charts keep at most ``max_ranks`` ranks — the ones the findings
blame first, then those that deviate most (latest arrivals, least or most waiting), then a
spread of ordinary ranks for comparison — and say so in ``ReportData.notes``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from stallscope.analysis.collectives import SYNCHRONOUS_OPS
from stallscope.report.verdict import rank_ranges
from stallscope.store.queries import Store

#: stall components of ``step_breakdown`` in drawing order (they sum to the step time)
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("compute_ns", "compute"),
    ("comm_intra_ns", "comm intra-node"),
    ("comm_inter_ns", "comm inter-node"),
    ("sync_wait_ns", "waiting for peers"),
    ("host_stall_ns", "host stall"),
    ("other_idle_ns", "other idle"),
)
#: collectives smaller than this are latency-bound; their bandwidth says little about the link
MIN_BW_BYTES = 1 << 20
#: per-rank charts (breakdown bars, worst-step timeline) keep at most this many ranks
MAX_RANKS = 48
#: the heatmap keeps at most this many ranks and the last MAX_STEPS steps
MAX_HEATMAP_RANKS = 256
MAX_STEPS = 60
#: the cluster chart names this many outlier groups (farthest first); the rest share one colour
MAX_CLUSTER_GROUPS = 6
#: intervals of one rank and kind closer than this share of the step are merged in the timeline
MERGE_GAP_SHARE = 1 / 400


@dataclass
class ReportData:
    """Everything a report shows besides the findings document (each frame may be empty)."""

    job: str
    #: rank, host, step, step_ms, compute_ms, host_stall_ms, wait_ms, late_ms
    heatmap: pl.DataFrame
    #: rank, host, component, component_order, ms_per_step (long form, one row per rank and component)
    breakdown: pl.DataFrame
    #: host, ranks, component, component_order, ms_per_step (mean per rank and step)
    host_breakdown: pl.DataFrame
    #: op, scope, group, transport, members, bytes, label, instances, busbw_gbps, busbw_p10_gbps,
    #: expected_gbps, expected_basis, transfer_ms_median, transfer_ms_total
    bandwidth: pl.DataFrame
    #: rank, host, label, kind, start_ms, end_ms (relative to the worst step's start)
    timeline: pl.DataFrame
    worst_step: int | None
    #: rank, host, cluster, own_work_share (compute + host stall), collective_share (exposed
    #: communication + waiting), plus the clustering features (shares of the step)
    clusters: pl.DataFrame
    #: step, step_ms_max, step_ms_median, step_ms_min
    step_times: pl.DataFrame
    #: what was left out or could not be computed, one sentence each
    notes: list[str] = field(default_factory=list)
    #: ranks the verdict blames (marked in per-rank charts)
    culprits: list[int] = field(default_factory=list)


def collect(store: Store, doc: dict[str, Any], *, max_ranks: int = MAX_RANKS) -> ReportData:
    """Compute every report table for the job of ``doc`` (``store`` restricted to that job)."""
    job = doc["job"]["id"]
    notes: list[str] = []
    heat = heatmap_table(store)
    focus = focus_ranks(heat, doc, limit=max_ranks)
    n_ranks = heat["rank"].n_unique() if heat.height else 0
    if n_ranks > max_ranks:
        notes.append(f"per-rank charts show {len(focus)} of {n_ranks} ranks: the culprits, the ranks that deviate most, "
                     "and a spread of ordinary ranks; host aggregates cover every rank")
    if n_ranks > MAX_HEATMAP_RANKS:
        keep = focus_ranks(heat, doc, limit=MAX_HEATMAP_RANKS)
        heat = heat.filter(pl.col("rank").is_in(keep))
        notes.append(f"the heatmap shows {len(keep)} of {n_ranks} ranks")
    steps = sorted(heat["step"].unique().to_list()) if heat.height else []
    if len(steps) > MAX_STEPS:
        heat = heat.filter(pl.col("step").is_in(steps[-MAX_STEPS:]))
        notes.append(f"the heatmap shows the last {MAX_STEPS} of {len(steps)} steps")
    st = store.sql("SELECT step, step_ms_max, step_ms_median, step_ms_min FROM step_times ORDER BY step")
    worst = int(st.sort("step_ms_max", descending=True)["step"][0]) if st.height else None
    ctx = _context(store, job, notes)
    return ReportData(
        job=job, heatmap=heat, breakdown=breakdown_table(store, focus), host_breakdown=host_breakdown_table(store),
        bandwidth=bandwidth_table(store, ctx, notes), timeline=timeline_table(store, worst, focus) if worst is not None else _empty_timeline(),
        worst_step=worst, clusters=clusters_table(ctx, notes), step_times=st, notes=notes, culprits=verdict_ranks(doc))


def verdict_ranks(doc: dict[str, Any]) -> list[int]:
    """The ranks the verdict (first finding of medium severity or more) blames, when it names a few."""
    from stallscope.report.verdict import SIGNIFICANT

    main = [f for f in doc.get("findings", []) if f["severity"] in SIGNIFICANT]
    ranks = list(main[0].get("ranks") or []) if main else []
    return ranks if 0 < len(ranks) <= 16 and len(ranks) < doc["job"].get("world_size", 0) else []


def _context(store: Store, job: str, notes: list[str]) -> Any:
    """The rules' context (clusters, expected bandwidth); None when it cannot be built."""
    from stallscope.rules.context import Context

    try:
        return Context.build(store, job)
    except Exception as exc:  # noqa: BLE001 - a report without the two derived charts beats no report
        notes.append(f"rank clusters and expected bandwidth unavailable: {str(exc).splitlines()[0][:160]}")
        return None


# -- rank x step ---------------------------------------------------------------------------------
def heatmap_table(store: Store) -> pl.DataFrame:
    """Per rank and step: step time, own work, and time waiting at / late to group collectives.

    ``late_ms`` sums, over the step's synchronous collectives, how much later than the early
    members (lower quartile of arrivals, as the attribution does) the rank arrived: a straggler's
    cells are hot while its victims' ``wait_ms`` cells are.
    """
    ops = ", ".join(f"'{o}'" for o in SYNCHRONOUS_OPS)
    return store.sql(f"""
        WITH m AS (
          SELECT m.rank, m.step, greatest(m.wait_ns, 0) AS wait_ns,
                 m.arrival_ns - quantile_disc(m.arrival_ns, 0.25) OVER (PARTITION BY m.instance_id) AS late_ns
          FROM collective_members m JOIN collective_instances i USING (instance_id)
          WHERE i.members > 1 AND i.op IN ({ops})
        ), per AS (
          SELECT rank, step, sum(wait_ns) AS wait_ns, sum(greatest(late_ns, 0)) AS late_ns FROM m GROUP BY rank, step
        )
        SELECT b.rank, b.host, b.step, b.step_ns / 1e6 AS step_ms, b.compute_ns / 1e6 AS compute_ms,
               b.host_stall_ns / 1e6 AS host_stall_ms, coalesce(p.wait_ns, 0) / 1e6 AS wait_ms,
               coalesce(p.late_ns, 0) / 1e6 AS late_ms
        FROM step_breakdown b LEFT JOIN per p ON p.rank = b.rank AND p.step = b.step
        ORDER BY b.rank, b.step""")


def focus_ranks(heat: pl.DataFrame, doc: dict[str, Any], *, limit: int) -> list[int]:
    """At most ``limit`` ranks for per-rank charts: culprits first, then the latest arrivers,
    the ranks that waited least and most, then evenly spaced ordinary ranks."""
    ranks = sorted(heat["rank"].unique().to_list()) if heat.height else []
    if len(ranks) <= limit:
        return ranks
    chosen: list[int] = []

    def add(rs: list[int]) -> None:
        for r in rs:
            if r in ranks and r not in chosen and len(chosen) < limit:
                chosen.append(r)

    for f in doc.get("findings", []):
        add(list(f.get("ranks", []))[: max(1, limit // 4)])
    per = heat.group_by("rank").agg(pl.col("late_ms").sum(), pl.col("wait_ms").sum(), pl.col("step_ms").sum())
    quota = max(1, limit // 6)
    add(per.sort("late_ms", descending=True)["rank"].head(quota).to_list())
    add(per.sort("wait_ms")["rank"].head(quota).to_list())
    add(per.sort("wait_ms", descending=True)["rank"].head(quota).to_list())
    rest = [r for r in ranks if r not in chosen]
    room = limit - len(chosen)
    if room > 0 and rest:
        add([rest[int(i * len(rest) / room)] for i in range(room)])
    return sorted(chosen)


# -- stall breakdown --------------------------------------------------------------------------------
def breakdown_table(store: Store, ranks: list[int]) -> pl.DataFrame:
    """Per rank (of ``ranks``): mean ms per step of each stall component, long form."""
    cols = ", ".join(f"avg({c}) / 1e6 AS \"{label}\"" for c, label in COMPONENTS)
    wide = store.sql(f"SELECT rank, host, {cols} FROM step_breakdown GROUP BY rank, host ORDER BY host, rank")
    if ranks:
        wide = wide.filter(pl.col("rank").is_in(ranks))
    return _long(wide, ["rank", "host"])


def host_breakdown_table(store: Store) -> pl.DataFrame:
    """Per host: mean ms per rank and step of each component (host_breakdown view), long form."""
    cols = ", ".join(f"{c.replace('_ns', '_ms')} AS \"{label}\"" for c, label in COMPONENTS)
    wide = store.sql(f"SELECT host, ranks, {cols} FROM host_breakdown ORDER BY host")
    return _long(wide, ["host", "ranks"])


def _long(wide: pl.DataFrame, ids: list[str]) -> pl.DataFrame:
    labels = [label for _, label in COMPONENTS]
    order = {label: i for i, label in enumerate(labels)}
    if wide.height == 0:
        return pl.DataFrame(schema={**{i: wide.schema[i] for i in ids}, "component": pl.String, "component_order": pl.Int64, "ms_per_step": pl.Float64})
    return (wide.unpivot(index=ids, on=labels, variable_name="component", value_name="ms_per_step")
            .with_columns(pl.col("component").replace_strict(order, return_dtype=pl.Int64).alias("component_order"),
                          pl.col("ms_per_step").fill_null(0.0).round(4)))


# -- bandwidth --------------------------------------------------------------------------------------
def bandwidth_table(store: Store, ctx: Any, notes: list[str]) -> pl.DataFrame:
    """Bus bandwidth per collective shape and group, against what it should get.

    A group is ``inter-node`` for collectives spanning hosts, else the host the members share.
    Expected bandwidth: for inter-node collectives the attribution's expectation (NCCL's graph
    bandwidth or the NICs it listed, shared among concurrent groups: ``expected_basis`` says
    which); for intra-node collectives what the hosts achieve for the same shape (a host
    whose intra-node bandwidth falls below its peers' is the locality signature): the median over
    hosts from three hosts on, else the better of the two.
    """
    inst = store.sql("""
        SELECT i.instance_id, i.op, i.scope, i.members, i.bytes, i.busbw_gbps, i.transfer_ns,
               CASE WHEN i.scope = 'inter' THEN 'inter-node' ELSE min(m.host) END AS "group"
        FROM collective_instances i JOIN collective_members m USING (instance_id)
        WHERE i.members > 1 AND i.busbw_gbps IS NOT NULL AND i.transfer_ns > 0
        GROUP BY i.instance_id, i.op, i.scope, i.members, i.bytes, i.busbw_gbps, i.transfer_ns""")
    big = inst.filter(pl.col("bytes") >= MIN_BW_BYTES)
    if big.height == 0 and inst.height:
        notes.append("every collective is under 1 MiB (latency-bound): bandwidth is shown for small messages")
        big = inst
    if big.height == 0:
        notes.append("no collective has both a known message size and a transfer time (older profiler traces do not "
                     "record sizes): no bandwidth chart")
        return pl.DataFrame(schema={"op": pl.String, "scope": pl.String, "group": pl.String, "transport": pl.String,
                                    "members": pl.Int32, "bytes": pl.Int64, "label": pl.String, "instances": pl.UInt32,
                                    "busbw_gbps": pl.Float64, "busbw_p10_gbps": pl.Float64, "expected_gbps": pl.Float64,
                                    "expected_basis": pl.String, "transfer_ms_median": pl.Float64, "transfer_ms_total": pl.Float64})
    keys = ["op", "scope", "group", "members", "bytes"]
    agg = big.group_by(keys).agg(
        pl.len().alias("instances"), pl.col("busbw_gbps").median().alias("busbw_gbps"),
        pl.col("busbw_gbps").quantile(0.1, interpolation="linear").alias("busbw_p10_gbps"),
        (pl.col("transfer_ns").median() / 1e6).alias("transfer_ms_median"), (pl.col("transfer_ns").sum() / 1e6).alias("transfer_ms_total"))
    agg = agg.join(_expected_inter(ctx, notes), on=["op", "members", "bytes"], how="left") if ctx is not None else agg.with_columns(
        pl.lit(None, dtype=pl.Float64).alias("expected_gbps"), pl.lit(None, dtype=pl.String).alias("expected_basis"))
    agg = agg.with_columns(pl.when(pl.col("scope") == "inter").then(pl.col("expected_gbps")).alias("expected_gbps"),
                           pl.when(pl.col("scope") == "inter").then(pl.col("expected_basis")).alias("expected_basis"))
    # intra-node: what the hosts achieve for the same shape (median over hosts from three on,
    # else the best of the two): a host far below it is the locality signature
    intra = agg.filter(pl.col("scope") == "intra").select(*keys, "busbw_gbps")
    if intra.height and intra["group"].n_unique() > 1:
        ref = intra.group_by("op", "members", "bytes").agg(
            pl.len().alias("_hosts"), pl.col("busbw_gbps").median().alias("_med"), pl.col("busbw_gbps").max().alias("_max"))
        ref = ref.filter(pl.col("_hosts") > 1).with_columns(
            pl.when(pl.col("_hosts") >= 3).then(pl.col("_med")).otherwise(pl.col("_max")).alias("_peer"),
            pl.when(pl.col("_hosts") >= 3).then(pl.lit("median over hosts")).otherwise(pl.lit("best host")).alias("_basis"))
        agg = agg.join(ref.select("op", "members", "bytes", "_peer", "_basis"), on=["op", "members", "bytes"], how="left").with_columns(
            pl.when(pl.col("scope") == "intra").then(pl.col("_peer")).otherwise(pl.col("expected_gbps")).alias("expected_gbps"),
            pl.when(pl.col("scope") == "intra").then(pl.col("_basis")).otherwise(pl.col("expected_basis")).alias("expected_basis"),
        ).drop("_peer", "_basis")
    agg = agg.join(_transports(store), on="group", how="left").with_columns(pl.col("transport").fill_null(""))
    agg = agg.with_columns(pl.format("{} {} · {}{}", pl.col("op"), pl.col("bytes").map_elements(human_bytes, return_dtype=pl.String),
                                     pl.col("group"), pl.when(pl.col("transport") != "").then(pl.format(" ({})", pl.col("transport")))
                                     .otherwise(pl.lit(""))).alias("label"))
    # the collectives that cost the most transfer time first; at most 24 rows
    out = agg.sort("transfer_ms_total", descending=True)
    if out.height > 24:
        notes.append(f"the bandwidth chart shows the 24 collective shapes with the most transfer time (of {out.height})")
        out = out.head(24)
    return out.with_columns(pl.col(c).round(3) for c in ("busbw_gbps", "busbw_p10_gbps", "expected_gbps", "transfer_ms_median", "transfer_ms_total"))


def _expected_inter(ctx: Any, notes: list[str]) -> pl.DataFrame:
    schema = {"op": pl.String, "members": pl.Int32, "bytes": pl.Int64, "expected_gbps": pl.Float64, "expected_basis": pl.String}
    try:
        from stallscope.rules.fabric._bandwidth import expected_busbw, inter_expectations

        exp = inter_expectations(ctx, min_bytes=0)
        if exp.height == 0:
            return pl.DataFrame(schema=schema)
        _, basis = expected_busbw(ctx)
    except Exception as exc:  # noqa: BLE001 - no NCCL facts: the chart simply has no reference line
        notes.append(f"expected inter-node bandwidth unavailable: {str(exc).splitlines()[0][:160]}")
        return pl.DataFrame(schema=schema)
    label = {"nccl_graph": "NCCL topology graph", "nic_count": "NICs listed by NCCL", "reference": "single-NIC RDMA reference"}.get(basis, basis)
    return (exp.group_by("op", "members", "bytes").agg(pl.col("expected_gbps").median())
            .with_columns(pl.lit(label).alias("expected_basis")).cast({"members": pl.Int32, "bytes": pl.Int64}))


def _transports(store: Store) -> pl.DataFrame:
    """group -> transport text from the NCCL logs ('NET/IB GDR', 'P2P', 'SHM', ...); empty without logs."""
    try:
        t = store.sql("""
            SELECT CASE WHEN inter_node THEN 'inter-node' ELSE host END AS "group",
                   string_agg(DISTINCT CASE WHEN transport IN ('NET', 'COLLNET')
                                            THEN transport || '/' || coalesce(net, '?') || CASE WHEN gdr THEN ' GDR' ELSE '' END
                                            ELSE transport END, ', ' ORDER BY 1) AS transport
            FROM nccl_transports WHERE inter_node IS NOT NULL AND (inter_node OR host IS NOT NULL)
            GROUP BY 1""")
    except Exception:  # noqa: BLE001 - stores without NCCL views
        return pl.DataFrame(schema={"group": pl.String, "transport": pl.String})
    return t


def human_bytes(n: int) -> str:
    """'798 MiB', '1.5 KiB', '12 B'."""
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n / k:.0f} {unit}" if n / k >= 10 else f"{n / k:.1f} {unit}"
    return f"{n} B"


# -- worst step timeline -------------------------------------------------------------------------
def _empty_timeline() -> pl.DataFrame:
    return pl.DataFrame(schema={"rank": pl.Int32, "host": pl.String, "label": pl.String, "kind": pl.String,
                                "start_ms": pl.Float64, "end_ms": pl.Float64})


def timeline_table(store: Store, step: int, ranks: list[int]) -> pl.DataFrame:
    """The step as intervals per rank on aligned clocks: compute (GPU kernels, or main-thread CPU
    ops on CPU-only traces), waiting inside collectives, and moving bytes; times in ms from the
    step's earliest start. Close intervals of one kind are merged so a big job stays small."""
    rank_list = ", ".join(str(int(r)) for r in ranks) or "NULL"
    win = store.sql(f"SELECT rank, host, timeline, start_ns, end_ns FROM step_breakdown WHERE step = {int(step)} AND rank IN ({rank_list})")
    if win.height == 0:
        return _empty_timeline()
    t0 = int(win.select(pl.col("start_ns").min()).item())
    span = max(int(win.select(pl.col("end_ns").max()).item()) - t0, 1)
    parts = [
        # GPU computation (GPU timelines)
        f"""SELECT k.rank, 'compute' AS kind, k.ts_aligned_ns AS s, k.ts_aligned_ns + k.dur_ns AS e
            FROM kernels_aligned k JOIN w ON w.rank = k.rank AND w.timeline = 'gpu'
            WHERE NOT k.is_comm AND k.dur_ns > 0 AND k.ts_aligned_ns < w.end_ns AND k.ts_aligned_ns + k.dur_ns > w.start_ns""",
        # CPU computation on CPU-only traces: the main thread's ops that are not collective plumbing
        f"""SELECT e.rank, 'compute', e.ts_aligned_ns, e.ts_aligned_ns + e.dur_ns
            FROM events_aligned e JOIN w ON w.rank = e.rank AND w.timeline = 'cpu'
            JOIN ranks r ON r.rank = e.rank AND e.tid = r.pid
            WHERE e.cat = 'cpu_op' AND e.dur_ns > 0 AND e.ts_aligned_ns < w.end_ns AND e.ts_aligned_ns + e.dur_ns > w.start_ns
              AND NOT regexp_matches(e.name, '^(c10d::|record_param_comms|gloo:|nccl:|ProcessGroup)')""",
        f"""SELECT m.rank, 'waiting for peers', m.arrival_ns, m.arrival_ns + m.wait_ns
            FROM collective_members m JOIN w ON w.rank = m.rank
            WHERE m.wait_ns > 0 AND m.arrival_ns < w.end_ns AND m.arrival_ns + m.wait_ns > w.start_ns""",
        f"""SELECT m.rank, 'moving bytes', m.arrival_ns + greatest(m.wait_ns, 0), m.end_ns
            FROM collective_members m JOIN w ON w.rank = m.rank
            WHERE m.end_ns > m.arrival_ns + greatest(m.wait_ns, 0) AND m.arrival_ns < w.end_ns AND m.end_ns > w.start_ns""",
    ]
    sql = (f"WITH w AS (SELECT rank, timeline, start_ns, end_ns FROM step_breakdown WHERE step = {int(step)} AND rank IN ({rank_list})) "
           + " UNION ALL ".join(parts))
    iv = store.sql(sql)
    if iv.height == 0:
        return _empty_timeline()
    gap = int(span * MERGE_GAP_SHARE)
    merged = (iv.sort("rank", "kind", "s")
              .with_columns(pl.col("e").cum_max().shift(1).over("rank", "kind").alias("_prev_end"))
              .with_columns((pl.col("_prev_end").is_null() | (pl.col("s") > pl.col("_prev_end") + gap)).cast(pl.Int32).alias("_new"))
              .with_columns(pl.col("_new").cum_sum().over("rank", "kind").alias("_grp"))
              .group_by("rank", "kind", "_grp").agg(pl.col("s").min(), pl.col("e").max()))
    hosts = win.select("rank", "host")
    return (merged.join(hosts, on="rank")
            .with_columns(((pl.col("s").clip(t0, t0 + span) - t0) / 1e6).round(4).alias("start_ms"),
                          ((pl.col("e").clip(t0, t0 + span) - t0) / 1e6).round(4).alias("end_ms"),
                          pl.format("{} · rank {}", pl.col("host"), pl.col("rank")).alias("label"))
            .filter(pl.col("end_ms") > pl.col("start_ms"))
            .select(pl.col("rank").cast(pl.Int32), "host", "label", "kind", "start_ms", "end_ms")
            .sort("rank", "start_ms"))


# -- clusters ---------------------------------------------------------------------------------------
def clusters_table(ctx: Any, notes: list[str]) -> pl.DataFrame:
    """One row per rank with its clustering features and the group the clustering put it in."""
    from stallscope.analysis.clustering import FEATURES, rank_vectors

    empty = pl.DataFrame(schema={"rank": pl.Int32, "host": pl.String, "cluster": pl.String,
                                 "own_work_share": pl.Float64, "collective_share": pl.Float64,
                                 **{f: pl.Float64 for f in FEATURES}})
    if ctx is None:
        return empty
    try:
        feats = ctx.features
        if feats.height < 3 or ctx.step_ms <= 0:
            if 0 < feats.height < 3:
                notes.append("rank clusters need at least 3 ranks: no cluster chart")
            return empty
        vec = rank_vectors(feats, ctx.step_ms)
        groups = ctx.clusters
    except Exception as exc:  # noqa: BLE001 - clustering needs scikit-learn and enough ranks
        notes.append(f"rank clusters unavailable: {str(exc).splitlines()[0][:160]}")
        return empty
    label: dict[int, str] = {}
    for i, c in enumerate(groups, start=1):  # farthest from the normal ranks first
        if i > MAX_CLUSTER_GROUPS:
            name = f"{len(groups) - MAX_CLUSTER_GROUPS} groups closer to normal"
        else:
            what = f"rank {c.ranks[0]}" if len(c.ranks) == 1 else f"ranks {rank_ranges(c.ranks)}"
            where = f"all of {', '.join(c.whole_hosts)}" if c.whole_hosts else ", ".join(c.hosts[:4]) + ("…" if len(c.hosts) > 4 else "")
            name = f"{'outliers' if c.label < 0 else 'group'} {i}: {what} ({where})"
        for r in c.ranks:
            label[int(r)] = name
    return vec.with_columns(
        pl.col("rank").cast(pl.Int32),
        pl.col("rank").map_elements(lambda r: label.get(int(r), "normal"), return_dtype=pl.String).alias("cluster"),
        (pl.col("compute_frac") + pl.col("host_stall_frac")).alias("own_work_share"),
        (pl.col("sync_wait_frac") + pl.col("comm_frac")).alias("collective_share"),
    ).with_columns(pl.col(pl.Float64).round(5)).select(empty.columns)

