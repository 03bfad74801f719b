"""Shared by locality rules: intra-node collective speed per host, compared with the other hosts.

Two hosts' intra-node collectives are comparable when they move the same bytes: same op, same
group size and same message size. Traces without message sizes (no collective metadata:
PyTorch < 2.1 or metadata off) still compare: the collectives at the same position of the same
step of each host's own group (the tensor-parallel all-reduce of one layer, the shard
all-gather of one FSDP unit) move the same bytes on every host of a symmetric job, so their
transfer times are compared directly.
"""

from __future__ import annotations

import polars as pl

from stallscope.analysis.collectives import group_width, transfer_measured
from stallscope.rules.context import Context

#: a host's intra-node bandwidth below this share of its peers' is "below peers"
LOW_RATIO = 0.6
MIN_INSTANCES = 3

_SCHEMA = {"host": pl.String, "ratio": pl.Float64, "n": pl.UInt32, "busbw": pl.Float64, "peer_busbw": pl.Float64}


def _intra_instances(ctx: Context) -> pl.DataFrame:
    """Multi-member intra-node instances with their host and a ``shape`` key: instances of one
    shape move the same bytes."""
    inst = ctx.d.instances.filter((pl.col("scope") == "intra") & transfer_measured())
    if inst.height == 0:
        return inst.with_columns(pl.lit(None, dtype=pl.String).alias("host"), pl.lit(None, dtype=pl.String).alias("shape"))
    host_of_inst = ctx.d.members.group_by("instance_id").agg(pl.col("host").first(), pl.col("arrival_ns").min().alias("_a"))
    x = inst.join(host_of_inst, on="instance_id")
    # position of the instance among its group's instances of the step (groups: the channel)
    x = x.with_columns(pl.col("_a").rank("ordinal").over(["channel", "step"]).alias("_k"))
    sized = pl.col("bytes").is_not_null() & (pl.col("bytes") > 0)
    shape = pl.when(sized).then(pl.format("{}|{}|{}", "op", "width", "bytes")).otherwise(
        pl.format("{}|{}|step {}|#{}", "op", "width", "step", "_k"))
    return x.with_columns(group_width()).with_columns(shape.alias("shape"), sized.alias("sized")).drop("_a", "_k", "width")


def intra_bandwidth_by_host(ctx: Context) -> pl.DataFrame:
    """Per host: median ratio of its intra-node speed to the other hosts' median for the same
    shape (bus bandwidth when sizes are known; inverse transfer time otherwise); plus counts and
    bus bandwidths (null without sizes). Empty when fewer than two hosts run intra-node collectives."""
    x = _intra_instances(ctx)
    if x.height == 0 or x["host"].n_unique() < 2:
        return pl.DataFrame(schema=_SCHEMA)
    per = x.group_by("host", "shape").agg(pl.col("transfer_ns").median().alias("t"), pl.col("busbw_gbps").median().alias("bw"),
                                          pl.len().alias("n"))
    rows = []
    for h in per["host"].unique().to_list():
        mine = per.filter(pl.col("host") == h)
        peers = per.filter(pl.col("host") != h).group_by("shape").agg(pl.col("t").median().alias("peer_t"),
                                                                        pl.col("bw").median().alias("peer_bw"))
        j = mine.join(peers, on="shape")
        if j.height == 0:
            continue
        bw, pbw = j["bw"].drop_nulls(), j["peer_bw"].drop_nulls()
        rows.append({"host": h, "ratio": float((j["peer_t"] / j["t"]).median()), "n": int(j["n"].sum()),
                     "busbw": float(bw.median()) if bw.len() else None, "peer_busbw": float(pbw.median()) if pbw.len() else None})
    return pl.DataFrame(rows, schema=_SCHEMA)


def _replayable(ctx: Context) -> tuple[dict[int, int], pl.DataFrame]:
    """(instance id -> replay position, the intra-node instances); empty without a timeline."""
    tl = ctx.timeline
    x = _intra_instances(ctx) if tl is not None else None
    if tl is None or x is None or x.height == 0:
        return {}, pl.DataFrame()
    return {int(i): p for p, i in enumerate(tl.inst_ids.tolist())}, x


def intra_transfer_fix(ctx: Context, host: str) -> dict[int, float]:
    """Replay positions of the host's intra-node instances -> peers' median transfer for the same shape."""
    pos_of, x = _replayable(ctx)
    if not pos_of:
        return {}
    peers = x.filter(pl.col("host") != host).group_by("shape").agg(pl.col("transfer_ns").median().alias("peer_t"))
    mine = x.filter(pl.col("host") == host).join(peers, on="shape")
    return {pos_of[int(i)]: float(t) for i, t in zip(mine["instance_id"].to_list(), mine["peer_t"].to_list()) if int(i) in pos_of}


def intra_busbw_per_host(ctx: Context, min_bytes: int) -> dict[str, tuple[float, int]]:
    """Per host: median bus bandwidth (GB/s) of its intra-node collectives of ``min_bytes`` and
    more whose sizes are known, and how many there were (hosts with fewer than
    :data:`MIN_INSTANCES` are left out)."""
    x = _intra_instances(ctx)
    if x.height == 0:
        return {}
    x = x.filter(pl.col("sized") & (pl.col("bytes") >= min_bytes) & pl.col("busbw_gbps").is_not_null() & pl.col("host").is_not_null())
    per = x.group_by("host").agg(pl.col("busbw_gbps").median().alias("bw"), pl.len().alias("n"))
    return {h: (float(bw), int(n)) for h, bw, n in per.iter_rows() if n >= MIN_INSTANCES}


def intra_transfers_at(ctx: Context, hosts: set[str], gbps: float, latency_ns: float) -> dict[int, float]:
    """Replay positions of the sized intra-node instances on ``hosts`` -> their transfer at ``gbps``
    of bus bandwidth after ``latency_ns`` (never longer than measured)."""
    pos_of, x = _replayable(ctx)
    if not pos_of:
        return {}
    x = x.filter(pl.col("sized") & pl.col("host").is_in(sorted(hosts)))
    out = {}
    for iid, b, f, t in x.select("instance_id", "bytes", "bus_factor", "transfer_ns").iter_rows():
        if int(iid) in pos_of and b:
            out[pos_of[int(iid)]] = min(float(t), latency_ns + float(b) * float(f or 1.0) / gbps)  # bytes / (GB/s) = ns
    return out
