"""Shared by locality rules: intra-node collective bandwidth per host, and placement facts."""

from __future__ import annotations

import polars as pl

from stallscope.rules.context import Context

#: a host's intra-node bandwidth below this share of its peers' is "below peers"
LOW_RATIO = 0.6
MIN_INSTANCES = 3


def intra_bandwidth_by_host(ctx: Context) -> pl.DataFrame:
    """Per host: median ratio of its intra-node busbw to the other hosts' median for the same
    (op, bytes, members); plus counts. Empty when fewer than two hosts run intra-node collectives."""
    inst = ctx.d.instances.filter((pl.col("scope") == "intra") & (pl.col("members") > 1) & pl.col("busbw_gbps").is_not_null()
                                  & (pl.col("bytes") > 0))
    if inst.height == 0:
        return pl.DataFrame(schema={"host": pl.String, "ratio": pl.Float64, "n": pl.UInt32, "busbw": pl.Float64, "peer_busbw": pl.Float64})
    host_of_inst = ctx.d.members.group_by("instance_id").agg(pl.col("host").first())
    x = inst.join(host_of_inst, on="instance_id").select("instance_id", "host", "op", "bytes", "members", "busbw_gbps", "transfer_ns")
    if x["host"].n_unique() < 2:
        return pl.DataFrame(schema={"host": pl.String, "ratio": pl.Float64, "n": pl.UInt32, "busbw": pl.Float64, "peer_busbw": pl.Float64})
    per = x.group_by("host", "op", "bytes", "members").agg(pl.col("busbw_gbps").median().alias("bw"), pl.len().alias("n"))
    rows = []
    for h in per["host"].unique().to_list():
        mine = per.filter(pl.col("host") == h)
        peers = per.filter(pl.col("host") != h).group_by("op", "bytes", "members").agg(pl.col("bw").median().alias("peer_bw"))
        j = mine.join(peers, on=["op", "bytes", "members"])
        if j.height == 0:
            continue
        rows.append({"host": h, "ratio": float((j["bw"] / j["peer_bw"]).median()), "n": int(j["n"].sum()),
                     "busbw": float(j["bw"].median()), "peer_busbw": float(j["peer_bw"].median())})
    return pl.DataFrame(rows, schema={"host": pl.String, "ratio": pl.Float64, "n": pl.UInt32, "busbw": pl.Float64, "peer_busbw": pl.Float64})


def intra_transfer_fix(ctx: Context, host: str) -> dict[int, float]:
    """Replay positions of the host's intra-node instances -> peers' median transfer for the same shape."""
    tl = ctx.timeline
    if tl is None:
        return {}
    inst = ctx.d.instances.filter((pl.col("scope") == "intra") & (pl.col("members") > 1))
    host_of_inst = ctx.d.members.group_by("instance_id").agg(pl.col("host").first())
    x = inst.join(host_of_inst, on="instance_id")
    peers = x.filter(pl.col("host") != host).group_by("op", "bytes", "members").agg(pl.col("transfer_ns").median().alias("peer_t"))
    mine = x.filter(pl.col("host") == host).join(peers, on=["op", "bytes", "members"])
    pos_of = {int(i): p for p, i in enumerate(tl.inst_ids.tolist())}
    return {pos_of[int(i)]: float(t) for i, t in zip(mine["instance_id"].to_list(), mine["peer_t"].to_list()) if int(i) in pos_of}
