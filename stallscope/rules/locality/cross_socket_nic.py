"""LOC004 cross-socket-nic."""

from __future__ import annotations

from stallscope.rules.base import Evidence, Finding, Rule, fmt_pct
from stallscope.rules.context import Context
from stallscope.rules.locality._host_facts import host_apart_by_stall, host_lost
from stallscope.rules.placement import log_hosts, placement_differences


class CrossSocketNic(Rule):
    """One host's GPUs reach their NIC across CPU sockets, without GDR, or run on the wrong NUMA node.

    What it detects:
        NCCL logs in which one host — unlike its peers — has a GPU–NIC path of type SYS/NODE in
        its topology graph search, inter-node connections without GPUDirect RDMA while the
        others have it, or a different CPU affinity for its GPUs. Without that host's log (or with
        only its log, nothing to compare it with): the
        one host whose every rank stalls on the CPU side several times more than the ranks of
        every other host, while inter-node collectives (members arriving together) move bytes
        far below what the fabric gives (FAB001's test, with the host counted like its peers) —
        a placement problem of that host explains both; a degraded link or TCP sockets would
        not stall one host's CPUs. In a job of **two** hosts the host standing apart is enough,
        reported medium with its cost unmeasured: its slow NIC path halves the one inter-node
        link both hosts share, so the transfers slow alike on both sides, the host is late by
        little, and neither a bandwidth test (no log, no port rates) nor a replay can measure it.

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
        The log path needs NCCL logs from the host and at least one peer. The trace path needs
        every rank of the host to stall on the host ≥ 3x the median rank of each other host and
        for ≥ 3 % of the step; it reports with lower confidence (two hosts: medium, unmeasured).
    """

    code = "LOC004"
    name = "cross-socket-nic"
    cause = "locality"

    def check(self, ctx: Context) -> list[Finding]:
        out = self._from_traces(ctx)
        if len(log_hosts(ctx)) < 2:
            return out
        for host in ctx.d.hosts:
            if any(f.hosts == [host] for f in out):
                continue
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

    def _from_traces(self, ctx: Context) -> list[Finding]:
        """A host without its own NCCL log (or whose log is the only one) that stands apart by
        host-side stalls while the job's inter-node bandwidth collapsed (two hosts: whatever the
        bandwidth, :meth:`_unmeasured`)."""
        from stallscope.rules.fabric._bandwidth import FLOOR_BASES, inter_far_below

        apart = host_apart_by_stall(ctx)
        if apart is None:
            return []
        host, stall_frac = apart
        if host in log_hosts(ctx) and len(log_hosts(ctx)) >= 2:
            return []  # its log and a peer's are there: the log path decides
        far, _, host_bw, expected, basis = inter_far_below(ctx, without=host)
        whose = "the other hosts'"
        if not far and basis in FLOOR_BASES and host in log_hosts(ctx):
            # the host's log is the only one: what its own NICs carry (NCCL's graph, its port rates)
            # is the bundle's one word on this fabric's NICs, and a path across the sockets only
            # lowers what the graph promises (seed 35000 #0199: 43 GB/s per host against the 82 of
            # its graph, its peers' traffic through it at half speed)
            far, _, host_bw, expected, basis = inter_far_below(ctx)
            whose = f"{host}'s own"
        lost = host_lost(ctx, host, intra=False, inter=True) if far else None
        if lost is None or lost < 0.01:
            return self._unmeasured(ctx, host, stall_frac) if len(ctx.d.hosts) == 2 else []
        why = {"nccl_graph": f"what NCCL's topology search gives {whose} NICs", "nic_rate": f"{whose} port rates",
               "nic_count": f"the RDMA NICs {whose} logs list", "reference": "any RDMA fabric"}[basis]
        summary = (f"Every rank of {host} stalls on the CPU side for at least {stall_frac:.0%} of the step, several times more "
                   f"than the ranks of every other host, while inter-node collectives reach {host_bw:.1f} GB/s per host, far below "
                   f"{why} (~{expected:.0f} GB/s). A placement problem of {host} — its processes on the far NUMA node, its NIC "
                   f"across the CPU sockets — explains both (a degraded link or TCP sockets would not stall one host's CPUs). "
                   f"{_no_log(ctx, host)} Replaying with {host} like its peers saves "
                   f"{fmt_pct(lost)} of the job.")
        ev = [_stall_evidence(ctx, stall_frac),
              Evidence("bus bandwidth of inter-node collectives by op and size",
                       f"SELECT op, members, bytes, instances, round(busbw_gbps_median, 3) AS busbw_gbps FROM collective_bandwidth "
                       f"WHERE {ctx.where} AND scope = 'inter' ORDER BY bytes DESC", round(host_bw, 3))]
        return [Finding(rule=self.code, cause=self.cause, title=f"{host}: CPU-side stalls and collapsed inter-node bandwidth "
                        "point at its GPU-NIC/NUMA placement", summary=summary, ranks=ctx.d.ranks_of(host), hosts=[host],
                        lost_time_fraction=lost, confidence=ctx.quality * 0.6, evidence=ev,
                        recommendation=_collect_and_bind(host),
                        details={"placement_differences": [], "affects_inter_node": True, "host_stall_frac": round(stall_frac, 4),
                                 "basis": basis})]

    def _unmeasured(self, ctx: Context, host: str, stall_frac: float) -> list[Finding]:
        """One of **two** hosts stands apart by host-side stalls, and no bandwidth test or replay
        can measure what its placement costs: the slow GPU-NIC path halves the one inter-node link
        both hosts share, so the transfers slow alike on both sides, and the host's stalls make
        it late by little. Reported medium, cost unmeasured."""
        summary = (f"Every rank of {host} stalls on the CPU side for at least {stall_frac:.0%} of the step, several times more "
                   f"than the ranks of the other host. A placement problem of {host} — its processes on the far NUMA node, its "
                   f"NIC across the CPU sockets — slows its CPUs and, through its NIC, the one inter-node link the two hosts "
                   f"share, so the transfers slow alike on both sides: with two hosts neither the bandwidth (nothing in the "
                   f"bundle says what the NICs carry) nor a replay of {host} like its peer can measure the cost. "
                   f"{_no_log(ctx, host)}")
        ev = [_stall_evidence(ctx, stall_frac)]
        f = Finding(rule=self.code, cause=self.cause, title=f"{host}: CPU-side stalls apart from its peer point at its GPU-NIC/NUMA "
                    "placement", summary=summary, ranks=ctx.d.ranks_of(host), hosts=[host], lost_time_fraction=None,
                    confidence=ctx.quality * 0.45, evidence=ev,
                    recommendation=_collect_and_bind(host),
                    details={"placement_differences": [], "affects_inter_node": True, "host_stall_frac": round(stall_frac, 4),
                             "measured": False})
        f.severity = "medium"
        return [f]


def _stall_evidence(ctx: Context, stall_frac: float) -> Evidence:
    """The trace paths' first evidence: host-side stall per host, the apart host first."""
    return Evidence("host-side stall per host (mean per rank and step): one host stands apart",
                    f"SELECT host, ranks, round(host_stall_ms, 2) AS host_stall_ms, round(step_ms, 2) AS step_ms, "
                    f"round(comm_inter_ms, 2) AS comm_inter_ms FROM host_breakdown WHERE {ctx.where} ORDER BY host_stall_ms DESC",
                    round(stall_frac, 3))


def _collect_and_bind(host: str) -> str:
    """The trace paths' recommendation: get the missing log, then fix the placement."""
    return (f"Collect {host}'s NCCL log (NCCL_DEBUG=INFO) and nvidia-smi topo -m; bind its ranks to "
            "their GPU's NUMA node and point NCCL_IB_HCA at the NIC on the GPU's PCIe switch.")


def _no_log(ctx: Context, host: str) -> str:
    """Why the logs cannot confirm the placement: none of the host's, or only the host's."""
    if host in log_hosts(ctx):
        return f"The only NCCL log in the bundle is {host}'s: no peer's to compare its GPU-NIC paths with."
    return f"The bundle has no NCCL log of {host} to confirm it."

