"""LOC001 slow-host."""

from __future__ import annotations

import polars as pl

from stallscope.rules.base import Evidence, Finding, Rule, fmt_pct, ranks_text
from stallscope.rules.context import Context
from stallscope.rules.locality._intra import LOW_RATIO, intra_bandwidth_by_host
from stallscope.rules.placement import placement_differences


class SlowHost(Rule):
    """The ranks of one host are late together: placement inside that node hurts.

    What it detects:
        The ranks persistently late at synchronous collectives are (almost) exactly the ranks of
        one host — not one rank, not scattered ranks. Placement evidence is attached when the
        data has it: NCCL connection facts that differ from the other hosts (SHM where they use
        P2P, P2P disabled, no GPUDirect RDMA, a cross-socket GPU–NIC path, CPU affinity), or the
        host's intra-node collectives moving bytes slower than the same collectives elsewhere.

    Why it slows the job:
        Every rank of the job waits for that host's ranks at every synchronization. A host whose
        GPUs cannot talk peer-to-peer, whose NIC hangs off the other CPU socket or whose
        processes run on the wrong NUMA node does everything a little slower, and the whole job
        runs at its pace.

    Evidence it cites:
        Host-level lateness (``host_breakdown``, ``rank_collective_stats``), the intra-node bus
        bandwidth of that host against its peers (``collective_instances``), and the NCCL facts
        that differ (``nccl_transports`` and friends, when logs are in the bundle). Time lost is
        the what-if replay with the host's ranks behaving like their median peers.

    How to fix:
        Compare the host with a healthy one: ``nvidia-smi topo -m`` (NVLink/PIX paths vs SYS),
        ``NCCL_P2P_DISABLE`` / ``NCCL_SHM_DISABLE`` and ACS/IOMMU settings, GPU–NIC affinity and
        ``NCCL_IB_HCA``, the CPU/NUMA binding of the launcher (``numactl``, ``--cpu-bind``).

    Options:
        Late ranks count as one host when they are ≥ 75 % of its ranks and nothing else; the
        host must have at least two ranks and the job at least two hosts. When NCCL logs of that
        host and its peers are present and show no placement difference, the finding is reported
        as synchronization (a slow host) instead.
    """

    code = "LOC001"
    name = "slow-host"
    cause = "locality"

    def check(self, ctx: Context) -> list[Finding]:
        v = ctx.sync_verdict
        if v.kind != "host" or v.host is None:
            return []
        host, ranks, lost = v.host, v.culprits, v.lost
        if lost < 0.01:
            return []
        diffs = placement_differences(ctx, host)
        bw = intra_bandwidth_by_host(ctx)
        bw_row = bw.filter(pl.col("host") == host)
        bw_ratio = float(bw_row["ratio"][0]) if bw_row.height else None
        placement_known = diffs.logs_cover(host)
        evidence_texts = list(diffs.items)
        if bw_ratio is not None and bw_ratio < LOW_RATIO:
            evidence_texts.append(f"its intra-node collectives reach {bw_ratio:.0%} of the bus bandwidth the other hosts get")
        cause = self.cause
        if placement_known and not diffs.items and (bw_ratio is None or bw_ratio >= LOW_RATIO):
            cause = "synchronization"  # logs say placement is the same as elsewhere: a slow host, not placement
        conf = ctx.quality * (0.85 if evidence_texts else 0.65)
        rs = ranks_text(ranks)
        why = ("; ".join(evidence_texts)) if evidence_texts else "the bundle has no placement facts for it (no NCCL log of that host)"
        summary = (f"The ranks of {host} ({rs}) arrived late together at synchronous collectives in most steps while the ranks of the "
                   f"other {len(ctx.d.hosts) - 1} host(s) waited. Placement evidence: {why}. Replaying with {host}'s ranks "
                   f"behaving like their peers saves {fmt_pct(lost)} of the job.")
        ev = [
            Evidence("per-host breakdown (mean per rank and step): the slow host computes or communicates longer, the others wait",
                     f"SELECT host, ranks, round(step_ms, 2) AS step_ms, round(compute_ms, 2) AS compute_ms, "
                     f"round(comm_intra_ms, 2) AS comm_intra_ms, round(comm_inter_ms, 2) AS comm_inter_ms, "
                     f"round(sync_wait_ms, 2) AS sync_wait_ms, round(host_stall_ms, 2) AS host_stall_ms "
                     f"FROM host_breakdown WHERE {ctx.where} ORDER BY sync_wait_ms", None),
            Evidence("lateness of every rank at synchronous collectives (the host's ranks are the late ones)",
                     f"SELECT rank, host, last_share, lateness_ms_median FROM rank_collective_stats WHERE {ctx.where} "
                     f"ORDER BY lateness_ms_median DESC", None),
            Evidence("intra-node bus bandwidth per host for the same collectives",
                     f"SELECT m.host, i.op, i.bytes, count(*) AS n, round(median(i.busbw_gbps), 2) AS busbw_gbps "
                     f"FROM collective_instances i JOIN (SELECT job, instance_id, any_value(host) AS host FROM collective_members "
                     f"GROUP BY job, instance_id) m USING (job, instance_id) WHERE i.{ctx.where} AND i.scope = 'intra' AND i.members > 1 "
                     f"GROUP BY m.host, i.op, i.bytes ORDER BY i.op, i.bytes, busbw_gbps", bw_ratio),
        ]
        ev += diffs.evidence
        title = f"host {host} is slow: its ranks are late together" + (" (placement differs)" if evidence_texts else "")
        return [Finding(rule=self.code, cause=cause, title=title, summary=summary, ranks=ranks, hosts=[host], lost_time_fraction=lost,
                        confidence=conf, evidence=ev,
                        recommendation=f"Compare {host} with a healthy host: nvidia-smi topo -m, NCCL_P2P_DISABLE/ACS settings, "
                                       "GPU-NIC affinity (NCCL_IB_HCA), and the launcher's CPU/NUMA binding.",
                        details={"placement_differences": diffs.items, "intra_busbw_ratio": bw_ratio})]
