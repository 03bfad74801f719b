"""LOC002 intra-node-bandwidth-below-peers."""

from __future__ import annotations

import polars as pl

from stallscope.rules.base import Evidence, Finding, Rule, fmt_pct
from stallscope.rules.context import Context
from stallscope.rules.locality._intra import LOW_RATIO, MIN_INSTANCES, intra_bandwidth_by_host, intra_transfer_fix
from stallscope.rules.placement import placement_differences


class IntraNodeBandwidthBelowPeers(Rule):
    """One host's intra-node collectives move bytes much slower than the same collectives on other hosts.

    What it detects:
        For collectives whose members all sit on one host (tensor-parallel groups, intra-node
        phases), the bus bandwidth achieved on one host is well below the median of the other
        hosts for the same operation, size and group — the signature of GPUs talking through
        host memory (SHM) instead of NVLink/P2P, P2P disabled, or a PCIe topology that crosses
        sockets. Traces without message sizes compare the transfer times of the collectives at
        the same position of the same step on each host (the same layer's all-reduce moves the
        same bytes on every host).

    Why it slows the job:
        Intra-node traffic is the fastest link of the job; when it degrades on one host, that
        host's collectives take longer and, at the next inter-node synchronization, the whole
        job waits for it.

    Evidence it cites:
        Intra-node bus bandwidth per host and operation (``collective_instances`` with
        ``scope = 'intra'``), NCCL connection facts for the host when logs are present; time lost
        from the what-if replay with the host's intra-node transfers taking as long as its peers'.

    How to fix:
        Check ``nvidia-smi topo -m`` and ``nvidia-smi nvlink -s`` on that host, the
        ``NCCL_P2P_DISABLE`` / ``NCCL_P2P_LEVEL`` environment, IOMMU/ACS settings that disable
        P2P, and the container's device visibility (each process seeing only its GPU prevents P2P).

    Options:
        "Well below" is under 60 % of the peers' median for matching (op, bytes, members) — or
        (op, members, step, position) without sizes — over at least 3 instances; findings costing < 1 % of the job are not reported.
    """

    code = "LOC002"
    name = "intra-node-bandwidth-below-peers"
    cause = "locality"

    def check(self, ctx: Context) -> list[Finding]:
        bw = intra_bandwidth_by_host(ctx)
        low = bw.filter((pl.col("ratio") < LOW_RATIO) & (pl.col("n") >= MIN_INSTANCES)).sort("ratio")
        if low.height == 0 or low.height > max(1, bw.height // 3):
            return []  # most hosts "low" means the reference is wrong, not one host
        out = []
        for row in low.iter_rows(named=True):
            host = row["host"]
            fix = intra_transfer_fix(ctx, host)
            lost = ctx.lost_if_transfers(f"intra:{host}", fix) if fix else None
            if lost is None or lost < 0.01:
                continue
            diffs = placement_differences(ctx, host)
            ranks = ctx.d.ranks_of(host)
            speed = (f"reach {row['busbw']:.1f} GB/s bus bandwidth against {row['peer_busbw']:.1f} GB/s for the same collectives "
                     f"on the other hosts ({row['ratio']:.0%})" if row["busbw"] is not None and row["peer_busbw"] is not None else
                     f"move their bytes at {row['ratio']:.0%} of the speed of the same collectives on the other hosts (the traces "
                     f"carry no message sizes: compared position by position within each step)")
            summary = (f"Collectives inside {host} {speed}. "
                       + (f"NCCL facts: {'; '.join(diffs.items)}. " if diffs.items else "")
                       + f"At the peers' speed the job would be {fmt_pct(lost)} shorter.")
            ev = [Evidence("intra-node transfer time and bus bandwidth per host for the same collectives",
                           f"SELECT m.host, i.op, i.bytes, i.members, count(*) AS n, round(median(i.transfer_ns) / 1e6, 3) AS transfer_ms, "
                           f"round(median(i.busbw_gbps), 2) AS busbw_gbps "
                           f"FROM collective_instances i JOIN (SELECT job, instance_id, any_value(host) AS host FROM collective_members "
                           f"GROUP BY job, instance_id) m USING (job, instance_id) WHERE i.{ctx.where} AND i.scope = 'intra' "
                           f"AND i.members > 1 GROUP BY ALL ORDER BY i.op, i.bytes, transfer_ms DESC", round(row["ratio"], 3))]
            ev += diffs.evidence
            out.append(Finding(rule=self.code, cause=self.cause, title=f"intra-node bandwidth on {host} is {row['ratio']:.0%} of its peers'",
                               summary=summary, ranks=ranks, hosts=[host], lost_time_fraction=lost,
                               confidence=ctx.quality * (0.85 if diffs.items else 0.7), evidence=ev,
                               recommendation=f"On {host}: nvidia-smi topo -m / nvlink -s, NCCL_P2P_DISABLE and NCCL_P2P_LEVEL, "
                                              "IOMMU/ACS settings, and per-process GPU visibility.",
                               details={"speed_ratio": round(row["ratio"], 3),
                                        "busbw_gbps": None if row["busbw"] is None else round(row["busbw"], 2),
                                        "peer_busbw_gbps": None if row["peer_busbw"] is None else round(row["peer_busbw"], 2),
                                        "placement_differences": diffs.items}))
        return out
