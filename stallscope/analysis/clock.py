"""Clock alignment: one offset per host, estimated from the data.

Ranks on one host share a clock; hosts do not (offsets of milliseconds to days: Kineto uses a
monotonic clock). A synchronous collective (all-reduce, all-gather, reduce-scatter, barrier,
all-to-all, broadcast) ends at nearly the same instant on every member: the last chunk reaches
everyone within microseconds. So for every matched instance ``i`` and host ``h`` taking part,
with ``e[i,h]`` the median raw end time of h's members,

    e[i,h] = t[i] + c[h] + noise

where ``t[i]`` is the true end and ``c[h]`` the host's clock offset. We fit ``t`` and ``c`` by
alternating medians (robust to stragglers in either direction), reject residuals beyond five
robust spreads (or 50 µs), refit, and report per host ``offset_ns = -c[h]`` relative to the
reference host (the host of the lowest rank) with the spread of its residuals.

Peer tools shift every rank by one global minimum (HTA) or assume clocks are aligned; both
misplace cross-host arrivals by the full offset. Hosts that never share a synchronous
collective with the reference component cannot be pinned: they fall back to Kineto's
``baseTimeNanoseconds`` (wall clock, whole-second resolution in practice) when every rank has it,
else offset 0 with method ``none`` (the ING rules say so).
"""

from __future__ import annotations

import polars as pl

from stallscope.analysis.collectives import SYNCHRONOUS_OPS

ITERATIONS = 12
REJECT_SPREADS = 5.0
REJECT_FLOOR_NS = 50_000


def estimate_offsets(rows: pl.DataFrame, ranks: pl.DataFrame) -> pl.DataFrame:
    """Per-host offsets from matched collective rows (raw times) and the ranks table.

    ``rows``: instance_id, host, op, end_ns (raw). ``ranks``: rank, host, base_time_ns.
    """
    hosts_of = ranks.with_columns(pl.coalesce(pl.col("host"), pl.lit("rank-") + pl.col("rank").cast(pl.String)).alias("host"))
    all_hosts = hosts_of.sort("rank")["host"].unique(maintain_order=True).to_list()
    if not all_hosts:
        return _empty()
    ref = all_hosts[0]
    e = (
        rows.filter(pl.col("op").is_in(SYNCHRONOUS_OPS))
        .group_by("instance_id", "host")
        .agg(pl.col("end_ns").median().alias("e"))
    )
    multi = e.group_by("instance_id").agg(pl.len().alias("nh")).filter(pl.col("nh") > 1)
    e = e.join(multi.select("instance_id"), on="instance_id")
    comp = _components(e, all_hosts)
    solved: dict[str, tuple[float, float, int, int]] = {}
    ref_comp = comp.get(ref, ref)
    members = [h for h in all_hosts if comp.get(h, h) == ref_comp]
    if len(members) > 1 and e.height:
        solved = _fit(e.filter(pl.col("host").is_in(members)), ref)
    rows_out = []
    base = _base_offsets(hosts_of, ref)
    for h in all_hosts:
        if h == ref:
            n = solved.get(h, (0.0, 0.0, 0, 0))
            rows_out.append((h, 0, int(round(n[1])), n[2], n[3], True, "reference"))
        elif h in solved:
            c, spread, n_used, n_rej = solved[h]
            rows_out.append((h, int(round(-c)), int(round(spread)), n_used, n_rej, False, "collective_end"))
        elif h in base:
            rows_out.append((h, base[h], None, 0, 0, False, "base_time"))
        else:
            rows_out.append((h, 0, None, 0, 0, False, "none"))
    return pl.DataFrame(rows_out, schema={"host": pl.String, "offset_ns": pl.Int64, "spread_ns": pl.Int64, "instances": pl.Int64,
                                          "rejected": pl.Int64, "reference": pl.Boolean, "method": pl.String}, orient="row")


def _fit(e: pl.DataFrame, ref: str) -> dict[str, tuple[float, float, int, int]]:
    """Alternating medians with one round of outlier rejection."""
    hosts = e["host"].unique().to_list()
    c = pl.DataFrame({"host": hosts, "c": [0.0] * len(hosts)})
    # start from each host's median difference to the reference to converge fast
    keep = e.with_columns(pl.lit(True).alias("keep"))
    for round_ in range(2):
        cur = keep.filter(pl.col("keep"))
        for _ in range(ITERATIONS):
            t = cur.join(c, on="host").group_by("instance_id").agg((pl.col("e") - pl.col("c")).median().alias("t"))
            c = cur.join(t, on="instance_id").group_by("host").agg((pl.col("e") - pl.col("t")).median().alias("c"))
            c_ref = c.filter(pl.col("host") == ref)["c"]
            shift = float(c_ref[0]) if len(c_ref) else 0.0
            c = c.with_columns(pl.col("c") - shift)
        t = cur.join(c, on="host").group_by("instance_id").agg((pl.col("e") - pl.col("c")).median().alias("t"))
        res = keep.join(c, on="host").join(t, on="instance_id", how="left").with_columns(
            (pl.col("e") - pl.col("t") - pl.col("c")).alias("r"))
        spread = res.filter(pl.col("keep")).group_by("host").agg(
            (1.4826 * (pl.col("r") - pl.col("r").median()).abs().median()).alias("s"))
        if round_ == 0:
            res = res.join(spread, on="host").with_columns(
                (pl.col("r").abs() <= pl.max_horizontal(pl.col("s") * REJECT_SPREADS, pl.lit(float(REJECT_FLOOR_NS)))).alias("keep"))
            keep = res.select("instance_id", "host", "e", "keep")
    counts = keep.group_by("host").agg(pl.col("keep").sum().alias("used"), (~pl.col("keep")).sum().alias("rej"))
    out = c.join(spread, on="host", how="left").join(counts, on="host", how="left")
    return {r["host"]: (float(r["c"]), float(r["s"] or 0.0), int(r["used"] or 0), int(r["rej"] or 0)) for r in out.iter_rows(named=True)}


def _components(e: pl.DataFrame, hosts: list[str]) -> dict[str, str]:
    """Union-find over hosts linked by a shared instance (hosts are few: plain Python)."""
    parent = {h: h for h in hosts}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for hs in e.group_by("instance_id").agg(pl.col("host").unique())["host"].to_list():
        hs = [h for h in hs if h in parent]
        for h in hs[1:]:
            a, b = find(hs[0]), find(h)
            if a != b:
                parent[b] = a
    return {h: find(h) for h in hosts}


def _base_offsets(hosts_of: pl.DataFrame, ref: str) -> dict[str, int]:
    """Fallback from baseTimeNanoseconds (only if every rank has it)."""
    if hosts_of["base_time_ns"].null_count() > 0:
        return {}
    per_host = hosts_of.group_by("host").agg(pl.col("base_time_ns").median())
    b = dict(zip(per_host["host"].to_list(), per_host["base_time_ns"].to_list()))
    return {h: int(b[h] - b[ref]) for h in b}


def _empty() -> pl.DataFrame:
    return pl.DataFrame(schema={"host": pl.String, "offset_ns": pl.Int64, "spread_ns": pl.Int64, "instances": pl.Int64,
                                "rejected": pl.Int64, "reference": pl.Boolean, "method": pl.String})
