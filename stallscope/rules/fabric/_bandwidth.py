"""Shared by the fabric rules: inter-node transfers, reference bandwidth, log facts."""

from __future__ import annotations

import polars as pl

from stallscope.rules.context import Context
from stallscope.rules.placement import connections, log_hosts

#: bus bandwidth any RDMA fabric delivers between nodes (a single 100 Gb/s NIC: ~10-12 GB/s
#: busbw in nccl-tests); healthy clusters exceed it, TCP sockets rarely reach it
REF_RDMA_GBPS = 10.0
#: "far below what the transport should give": under half the RDMA reference
COLLAPSE_GBPS = 0.5 * REF_RDMA_GBPS
#: messages smaller than this are latency-bound: their bandwidth says little about the fabric
MIN_BW_BYTES = 1 << 20
BW_OPS = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce")


def inter_transfers(ctx: Context, *, min_bytes: int = MIN_BW_BYTES) -> pl.DataFrame:
    """Multi-member inter-node instances of bandwidth-bound collectives with a transfer time."""
    return ctx.d.instances.filter(
        (pl.col("scope") == "inter") & (pl.col("members") > 1) & pl.col("op").is_in(BW_OPS)
        & (pl.col("bytes") >= min_bytes) & (pl.col("transfer_ns") > 0) & pl.col("busbw_gbps").is_not_null())


def arrive_together(df: pl.DataFrame) -> bool:
    """Ranks arrive on time relative to the transfer (skew is small next to moving the bytes)."""
    if df.height == 0:
        return False
    return float((df["skew_ns"] / df["transfer_ns"]).median()) < 0.5


def transfers_at_bandwidth(ctx: Context, gbps: float, *, only: pl.DataFrame | None = None) -> dict[int, float]:
    """Replay positions of inter-node instances -> transfer time at ``gbps`` bus bandwidth."""
    tl = ctx.timeline
    if tl is None:
        return {}
    inst = only if only is not None else inter_transfers(ctx, min_bytes=64 << 10)
    pos_of = {int(i): p for p, i in enumerate(tl.inst_ids.tolist())}
    out = {}
    for iid, b, f in inst.select("instance_id", "bytes", "bus_factor").iter_rows():
        if int(iid) in pos_of and b:
            out[pos_of[int(iid)]] = float(b) * float(f or 1.0) / gbps  # bytes / (GB/s) = ns
    return out


def socket_facts(ctx: Context) -> dict[str, object]:
    """What the logs say about the data network: selected nets, Socket inter-node connections."""
    hosts = log_hosts(ctx)
    if not hosts:
        return {"logs": False}
    conns = connections(ctx)
    socket_hosts: set[str] = set()
    rdma_hosts: set[str] = set()
    n_socket = 0
    if conns is not None and conns.height and "net" in conns.columns:
        net = conns.filter((pl.col("transport") == "NET") & pl.col("host").is_not_null())
        inter = net.filter(pl.col("inter_node").fill_null(True))
        sock = inter.filter(pl.col("net") == "Socket")
        n_socket = sock.height
        socket_hosts = set(sock["host"].to_list())
        rdma_hosts = set(inter.filter(pl.col("net") != "Socket")["host"].to_list())
    try:
        sel = ctx.store.sql("SELECT DISTINCT host, net FROM nccl_net WHERE job = ? AND kind = 'selected'", [ctx.job])
        for h, n in sel.iter_rows():
            if n == "Socket" and h:
                socket_hosts.add(h)
            elif n and h:
                rdma_hosts.add(h)
    except Exception:  # noqa: BLE001 - older stores without the table
        pass
    return {"logs": True, "hosts": hosts, "socket_hosts": socket_hosts - rdma_hosts, "rdma_hosts": rdma_hosts,
            "socket_connections": n_socket}
