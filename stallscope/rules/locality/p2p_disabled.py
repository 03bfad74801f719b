"""LOC003 p2p-disabled."""

from __future__ import annotations

from stallscope.rules.base import Finding, Rule, fmt_pct
from stallscope.rules.context import Context
from stallscope.rules.locality._host_facts import host_lost, shm_hop_slows_inter
from stallscope.rules.placement import log_hosts, placement_differences


class P2PDisabled(Rule):
    """One host's GPUs talk through host memory (SHM) or have P2P disabled, unlike the other hosts.

    What it detects:
        NCCL logs in which one host's intra-node connections go ``via SHM`` (any spelling:
        ``SHM/direct/direct``, ``direct shared memory``, ``SHM/CE``) where the other hosts'
        go ``via P2P`` (IPC, CUMEM, direct pointer), or in which that host alone echoes
        ``NCCL_P2P_DISABLE=1`` / ``NCCL_P2P_LEVEL=LOC``.

    Why it slows the job:
        SHM copies every intra-node message through host memory over PCIe twice: a fraction of
        NVLink/P2P bandwidth. That host's intra-node collectives (tensor parallelism, the
        intra-node phase of every all-reduce) take longer, and the rest of the job waits for it.
        A ring that spans hosts crosses each host's intra-node hops too, so one host on SHM can
        hold every inter-node all-reduce to host-memory speed: when the inter-node collectives
        with that host's ranks run far below what the NICs should carry (and any without them
        do not), the collapse is this host's, and this finding replaces FAB001.

    Evidence it cites:
        Intra-node transports per host (``nccl_connections``), the P2P settings each host echoes
        (``nccl_env``), that host's intra-node bus bandwidth against its peers; time lost from
        the what-if replay (the host's ranks like their peers, or its intra-node transfers at its
        peers' speed) when the traces show it.

    How to fix:
        Remove ``NCCL_P2P_DISABLE``/``NCCL_P2P_LEVEL`` from that host's environment; check
        ``nvidia-smi topo -m`` for NVLink, IOMMU/ACS settings that block P2P, and that every
        process sees all GPUs of the node (per-process ``CUDA_VISIBLE_DEVICES`` prevents P2P).

    Options:
        A host differs when ≥ 50 % of its intra-node connections are SHM and < 50 % of every
        other host's are; requires NCCL logs from the host and at least one peer.
    """

    code = "LOC003"
    name = "p2p-disabled"
    cause = "locality"

    def check(self, ctx: Context) -> list[Finding]:
        if len(log_hosts(ctx)) < 2:
            return []
        out = []
        for host in ctx.d.hosts:
            diffs = placement_differences(ctx, host)
            items = [t for t in diffs.items if "SHM" in t or "P2P is disabled" in t]
            if not items:
                continue
            crosses = shm_hop_slows_inter(ctx, host)
            lost = host_lost(ctx, host, intra=True, inter=crosses)
            if crosses:
                items.append("the job's inter-node collectives, whose rings cross this host's intra-node hops, run far below "
                             "what the NICs should carry, while those without it (if any) do not")
            summary = (f"On {host}: {'; '.join(items)}. "
                       + (f"Replaying with {host} behaving like its peers saves {fmt_pct(lost)} of the job." if lost
                          else "The traces do not show a measurable cost (no intra-node collectives or late ranks on it)."))
            f = Finding(rule=self.code, cause=self.cause, title=f"P2P is off on {host} (GPUs talk through host memory)",
                        summary=summary, ranks=ctx.d.ranks_of(host), hosts=[host], lost_time_fraction=lost,
                        confidence=ctx.quality * 0.9, evidence=[e for e in diffs.evidence if "P2P" in e.description or "SHM" in e.description],
                        recommendation=f"On {host}: remove NCCL_P2P_DISABLE / NCCL_P2P_LEVEL, check nvidia-smi topo -m, IOMMU/ACS, "
                                       "and that every process sees all GPUs of the node.",
                        details={"placement_differences": diffs.items, "affects_inter_node": crosses})
            if lost is None:
                f.severity = "low"
            out.append(f)
        return out
