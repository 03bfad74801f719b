"""FAB005 bandwidth-scaling-collapse."""

from __future__ import annotations

import polars as pl

from stallscope.rules.base import Evidence, Finding, Rule, fmt_pct
from stallscope.rules.context import Context
from stallscope.rules.fabric._bandwidth import inter_transfers


class BandwidthScalingCollapse(Rule):
    """Bus bandwidth collapses as collectives span more nodes.

    What it detects:
        The same collective (op and size) run by groups spanning different numbers of hosts —
        e.g. data-parallel groups of 2 and of 8 nodes, or hierarchical groups — reaching less
        than half the bus bandwidth at the largest node count than at the smallest.

    Why it slows the job:
        Bus bandwidth is normalized for group size, so on a non-blocking fabric it stays flat as
        nodes are added; a collapse means the fabric does not scale (oversubscribed uplinks,
        adaptive routing off, rings crossing the spine, congestion), and every step at scale pays.

    Evidence it cites:
        Median bus bandwidth per node count for each (op, bytes) (``collective_instances``);
        time lost from the what-if replay with the larger groups at the smaller groups'
        bandwidth.

    How to fix:
        Check the topology-aware placement (same leaf/rail), adaptive routing and SHARP on the
        switches, ``NCCL_ALGO``/``NCCL_CROSS_NIC``, and run nccl-tests at increasing node counts.

    Options:
        Collapse: < 50 % of the smallest inter-node group's bus bandwidth, each side over at
        least 2 instances of the same op and size.
    """

    code = "FAB005"
    name = "bandwidth-scaling-collapse"
    cause = "fabric"

    def check(self, ctx: Context) -> list[Finding]:
        inter = inter_transfers(ctx)
        if inter.height < 4 or inter["hosts"].n_unique() < 2:
            return []
        g = inter.group_by("op", "bytes", "hosts").agg(pl.col("busbw_gbps").median().alias("bw"), pl.col("transfer_ns").median().alias("t"),
                                                       pl.len().alias("n")).filter(pl.col("n") >= 2)
        worst = None
        for (op, b), grp in g.group_by("op", "bytes"):
            if grp.height < 2:
                continue
            small = grp.sort("hosts").row(0, named=True)
            big = grp.sort("hosts").row(-1, named=True)
            ratio = big["bw"] / small["bw"] if small["bw"] else 1.0
            if ratio < 0.5 and (worst is None or ratio < worst[0]):
                worst = (ratio, op, b, small, big)
        if worst is None:
            return []
        ratio, op, b, small, big = worst
        tl = ctx.timeline
        fix: dict[int, float] = {}
        if tl is not None:
            pos_of = {int(i): p for p, i in enumerate(tl.inst_ids.tolist())}
            sel = inter.filter((pl.col("hosts") > small["hosts"]))
            ref = {(r["op"], r["bytes"]): r["bw"] for r in g.filter(pl.col("hosts") == small["hosts"]).iter_rows(named=True)}
            for iid, o, by, f in sel.select("instance_id", "op", "bytes", "bus_factor").iter_rows():
                bw = ref.get((o, by))
                if bw and int(iid) in pos_of:
                    fix[pos_of[int(iid)]] = by * (f or 1.0) / bw
        lost = ctx.lost_if_transfers("fab005", fix) if fix else None
        if lost is None or lost < 0.01:
            return []
        summary = (f"{op} of {b / 2**20:.1f} MiB reaches {big['bw']:.2f} GB/s bus bandwidth across {big['hosts']} hosts but "
                   f"{small['bw']:.2f} GB/s across {small['hosts']} ({ratio:.0%}): the fabric does not scale. At the smaller "
                   f"groups' bandwidth the job would be {fmt_pct(lost)} shorter.")
        return [Finding(rule=self.code, cause=self.cause, title=f"bus bandwidth collapses from {small['hosts']} to {big['hosts']} nodes",
                        summary=summary, ranks=ctx.d.ranks["rank"].to_list(), hosts=ctx.d.hosts, lost_time_fraction=lost,
                        confidence=ctx.quality * 0.7,
                        evidence=[Evidence("bus bandwidth by node count for the same op and size",
                                           f"SELECT op, bytes, hosts, count(*) AS n, round(median(busbw_gbps), 3) AS busbw_gbps "
                                           f"FROM collective_instances WHERE {ctx.where} AND scope = 'inter' AND members > 1 "
                                           f"GROUP BY ALL ORDER BY op, bytes, hosts", round(ratio, 3))],
                        recommendation="Check topology-aware placement (same leaf/rail), adaptive routing/SHARP, NCCL_ALGO and "
                                       "NCCL_CROSS_NIC; run nccl-tests at increasing node counts.",
                        details={"op": op, "bytes": b, "small_hosts": small["hosts"], "big_hosts": big["hosts"]})]
