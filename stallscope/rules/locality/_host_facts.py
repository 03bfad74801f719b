"""Shared by LOC003/LOC004: time lost by a host that the logs single out; a host whose ranks all
stall on the CPU side far more than every other host's."""

from __future__ import annotations

import polars as pl

from stallscope.rules.context import Context
from stallscope.rules.locality._intra import intra_transfer_fix


def host_lost(ctx: Context, host: str, *, intra: bool, inter: bool = False) -> float | None:
    """The largest of: the host's ranks behaving like their peers (when they are late); for
    intra-node problems, its intra-node transfers at its peers' speed; for GPU-NIC problems,
    inter-node transfers at the bandwidth the fabric should give without this host's handicap
    (when they run below it: a ring is as slow as its slowest host), together with its ranks
    like their peers when they are late (one placement fault does both, in series)."""
    best = None
    late = set(ctx.late_sets.persistent)
    ranks = ctx.d.ranks_of(host)
    late_host = bool(ranks and late & set(ranks))
    if late_host:
        best = ctx.lost_if_like_peers(ranks)
    if intra:
        fix = intra_transfer_fix(ctx, host)
        if fix:
            v = ctx.lost_if_transfers(f"intra:{host}", fix)
            if v is not None and (best is None or v > best):
                best = v
    if inter:
        from stallscope.rules.fabric._bandwidth import (host_bandwidth_handicap, inter_expectations, transfers_at_bandwidth,
                                                         transfers_without_handicap)

        handicap = host_bandwidth_handicap(ctx, host)
        peers = ranks if late_host else None
        if handicap and handicap > 1.05:
            v = ctx.lost_if_transfers(f"nic-graph:{host}", transfers_without_handicap(ctx, host, handicap), like_peers=peers)
        else:
            e = inter_expectations(ctx, without=host)
            below = e.height and float((e["busbw_gbps"] / e["expected_gbps"]).median()) < 0.8
            v = (ctx.lost_if_transfers(f"fab:without:{host}", transfers_at_bandwidth(ctx, without=host), like_peers=peers)
                 if below else None)
        if v is not None and (best is None or v > best):
            best = v
    return best


def shm_hop_slows_inter(ctx: Context, host: str) -> bool:
    """Whether ``host``'s ranks take part in inter-node collectives that move bytes far below what
    the fabric should give (FAB001's test), while inter-node collectives without them, if there
    are any, do not: the slow hop is on that host (its intra-node SHM path or its NIC), not in
    the fabric every host shares."""
    from stallscope.rules.fabric._bandwidth import FAR_BELOW, inter_far_below

    far, inter, _, _, _ = inter_far_below(ctx)
    if not far or inter.height == 0:
        return False
    ranks = ctx.d.ranks_of(host)
    with_host = set(ctx.d.members.filter(pl.col("rank").is_in(ranks)).join(
        inter.select("instance_id"), on="instance_id")["instance_id"].unique().to_list())
    if not with_host:
        return False
    without = inter.filter(~pl.col("instance_id").is_in(sorted(with_host)))
    if without.height == 0:
        return True
    ratio_without = float((without["busbw_gbps"] / without["expected_gbps"]).median())
    return ratio_without >= FAR_BELOW


#: a host stands apart when each of its ranks stalls on the host at least this many times more
#: than the median rank of every other host ...
APART_FACTOR = 3.0
#: ... and for at least this share of the step
APART_MIN_FRAC = 0.03


def host_apart_by_stall(ctx: Context) -> tuple[str, float] | None:
    """The one host whose every rank spends far more time stalled on the host (device idle,
    nothing launched) than the ranks of every other host -> (host, its least-stalled rank's share
    of the step). Placement on one host (processes on the far NUMA node, a NIC across the CPU
    sockets whose proxy threads and copies cross the inter-socket link) slows *all* its processes
    on the CPU side; one busy rank (rank 0 logging) or a job-wide input pipeline does not single
    out a host. None when no host, or more than one, stands apart."""
    f = ctx.features
    if f.height == 0 or "host_stall_ns" not in f.columns or f["host"].n_unique() < 2:
        return None
    per = f.group_by("host").agg(pl.col("host_stall_ns").min().alias("lo"), pl.col("host_stall_ns").median().alias("med"),
                                 pl.col("host_stall_frac").min().alias("lo_frac"), pl.len().alias("n"))
    apart = []
    for h, lo, _med, lo_frac, n in per.iter_rows():
        others = per.filter(pl.col("host") != h)["med"].max()
        if n >= 2 and lo_frac is not None and lo_frac >= APART_MIN_FRAC and lo >= APART_FACTOR * max(float(others or 0), 1.0):
            apart.append((h, float(lo_frac)))
    return apart[0] if len(apart) == 1 else None
