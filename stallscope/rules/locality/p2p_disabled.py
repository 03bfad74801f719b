"""LOC003 p2p-disabled."""

from __future__ import annotations

from stallscope.rules.base import Finding, Rule, fmt_pct
from stallscope.rules.context import Context
from stallscope.rules.locality._host_facts import host_lost, shm_hop_slows_inter
from stallscope.rules.placement import (log_hosts, p2p_disabled_by_env, p2p_env_evidence, placement_differences, shm_evidence,
                                       shm_share)

#: bus bandwidth per host below which an SHM hop cannot be what holds a ring: copies through host
#: memory run at 5 GB/s or more on any server since PCIe 3 (x16: ~12 GB/s each way)
SHM_FLOOR_GBPS = 5.0


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
        other host's are; requires NCCL logs from the host and at least one peer. When the
        bundle holds one host's log only, that host is named when its log disables P2P itself
        (``NCCL_P2P_DISABLE=1``, ``NCCL_P2P_LEVEL=LOC``), ≥ 50 % of its intra-node connections
        are SHM, and the inter-node collectives through it collapse (FAB001's test) to a
        bandwidth an SHM hop can explain (≥ 5 GB/s per host; below, something else is broken
        too); without that collapse the finding is low (the setting is a fact, its cost unknown).
        The other hosts may share the setting: the finding says so.
    """

    code = "LOC003"
    name = "p2p-disabled"
    cause = "locality"

    def check(self, ctx: Context) -> list[Finding]:
        hosts = log_hosts(ctx)
        if len(hosts) == 1:
            return self._lone_log(ctx, next(iter(hosts)))
        if len(hosts) < 2:
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

    def _lone_log(self, ctx: Context, host: str) -> list[Finding]:
        """The only log in the bundle disables P2P on its host, whose GPUs talk through SHM: a
        measured finding when the inter-node collectives through it collapse to what an SHM hop
        explains, else a low one (the setting is a fact; its cost is not in the traces)."""
        from stallscope.rules.fabric._bandwidth import inter_far_below, transfers_at_bandwidth

        shm = shm_share(ctx).get(host, 0.0)
        if host not in p2p_disabled_by_env(ctx) or shm < 0.5:
            return []
        items = [f"its NCCL log (the only one in the bundle) disables P2P (NCCL_P2P_DISABLE / NCCL_P2P_LEVEL) and {shm:.0%} of "
                 f"its intra-node connections go through shared memory (SHM)"]
        lost = None
        crosses = False
        if shm_hop_slows_inter(ctx, host):
            _, _, host_bw, expected, _ = inter_far_below(ctx)
            if host_bw >= SHM_FLOOR_GBPS:
                crosses = True
                items.append(f"the job's inter-node collectives, whose rings cross this host's intra-node hops, run at "
                             f"{host_bw:.1f} GB/s per host against ~{expected:.0f} GB/s the NICs should carry, a speed "
                             f"host-memory copies explain")
                # the host's own log is the only word on the NICs: the what-if runs the inter-node
                # transfers at what they should carry, as FAB001's does
                lost = ctx.lost_if_transfers("fab:expected", transfers_at_bandwidth(ctx))
        summary = (f"On {host}: {'; '.join(items)}. The other hosts' logs are not in the bundle: if they set the same "
                   f"variable, they are on SHM too. "
                   + (f"At the bandwidth the fabric should give the job would be {fmt_pct(lost)} shorter." if lost
                      else "The traces do not show what it cost (no peer's log to compare with)."))
        f = Finding(rule=self.code, cause=self.cause, title=f"P2P is off on {host} (GPUs talk through host memory)",
                    summary=summary, ranks=ctx.d.ranks_of(host), hosts=[host], lost_time_fraction=lost,
                    confidence=ctx.quality * (0.7 if crosses else 0.5), evidence=[shm_evidence(ctx, round(shm, 3)), p2p_env_evidence(ctx)],
                    recommendation=f"Remove NCCL_P2P_DISABLE / NCCL_P2P_LEVEL from {host}'s environment (and every host's, if "
                                   "the launcher sets it job-wide); collect NCCL_DEBUG=INFO logs from every host.",
                    details={"placement_differences": items, "affects_inter_node": crosses, "lone_log": True})
        if lost is None:
            f.severity = "low"
        return [f]
