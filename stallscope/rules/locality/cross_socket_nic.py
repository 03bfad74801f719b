"""LOC004 cross-socket-nic."""

from __future__ import annotations

from stallscope.rules.base import Finding, Rule, fmt_pct
from stallscope.rules.context import Context
from stallscope.rules.locality._host_facts import host_lost
from stallscope.rules.placement import log_hosts, placement_differences


class CrossSocketNic(Rule):
    """One host's GPUs reach their NIC across CPU sockets, without GDR, or run on the wrong NUMA node.

    What it detects:
        NCCL logs in which one host — unlike its peers — has a GPU–NIC path of type SYS/NODE in
        its topology graph search, inter-node connections without GPUDirect RDMA while the
        others have it, or a different CPU affinity for its GPUs.

    Why it slows the job:
        Traffic that crosses the inter-socket link (UPI/xGMI) loses bandwidth and cannot use
        GPUDirect RDMA; processes bound to the far NUMA node pay for every host-side copy and
        launch. The host's collectives (and, through rings and trees, everyone's) slow down, and
        its ranks tend to arrive late.

    Evidence it cites:
        ``nccl_topology`` graph path types, ``nccl_connections`` GDR per host, ``nccl_affinity``
        masks per host and GPU; time lost from the what-if replay with the host's ranks like
        their peers when they are late.

    How to fix:
        Bind each rank to the NUMA node of its GPU and NIC (``numactl``, launcher
        ``--cpu-bind``), set ``NCCL_IB_HCA`` to the NIC on the GPU's PCIe switch, check the BIOS
        PCIe/ACS settings and that the host has the same wiring as its peers.

    Options:
        Requires NCCL logs from the host and at least one peer.
    """

    code = "LOC004"
    name = "cross-socket-nic"
    cause = "locality"

    def check(self, ctx: Context) -> list[Finding]:
        if len(log_hosts(ctx)) < 2:
            return []
        out = []
        for host in ctx.d.hosts:
            diffs = placement_differences(ctx, host)
            items = [t for t in diffs.items if "socket" in t or "GPUDirect" in t or "affinity" in t]
            if not items:
                continue
            nic_path = any("socket" in t or "GPUDirect" in t for t in items)
            lost = host_lost(ctx, host, intra=False, inter=nic_path)
            summary = (f"On {host}: {'; '.join(items)}. "
                       + (f"Replaying with {host} like its peers (its ranks on time, inter-node links as fast as the fabric "
                          f"should be) saves {fmt_pct(lost)} of the job." if lost
                          else "The traces do not show a measurable cost."))
            f = Finding(rule=self.code, cause=self.cause, title=f"{host}: GPU-NIC path or CPU affinity crosses sockets",
                        details={"placement_differences": diffs.items, "affects_inter_node": nic_path},
                        summary=summary, ranks=ctx.d.ranks_of(host), hosts=[host], lost_time_fraction=lost,
                        confidence=ctx.quality * 0.85,
                        evidence=[e for e in diffs.evidence if "GPU-NIC" in e.description or "GPUDirect" in e.description
                                  or "affinity" in e.description],
                        recommendation=f"Bind {host}'s ranks to their GPU's NUMA node (numactl / --cpu-bind), point NCCL_IB_HCA at "
                                       "the NIC on the GPU's PCIe switch, compare the host's wiring and BIOS with its peers.")
            if lost is None:
                f.severity = "low"
            out.append(f)
        return out
