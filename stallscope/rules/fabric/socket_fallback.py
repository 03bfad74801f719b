"""FAB002 socket-fallback."""

from __future__ import annotations

import polars as pl

from stallscope.rules.base import Evidence, Finding, Rule, fmt_pct
from stallscope.rules.context import Context
from stallscope.rules.fabric._bandwidth import (REF_RDMA_GBPS, inter_far_below, inter_transfers, lost_if_faster,
                                                nic_floor_factor, socket_facts, transfers_at_bandwidth)


class SocketFallback(Rule):
    """NCCL moves inter-node data over TCP sockets instead of RDMA.

    What it detects:
        NCCL logs in which a host selected the ``Socket`` network (``Using network Socket``) or
        whose inter-node connections go ``via NET/Socket/<n>`` — not merely the bootstrap
        interface lines (``NET/Socket : Using eth0``) that every IB job prints too.

    Why it slows the job:
        TCP through the kernel delivers a few GB/s at best and costs CPU; RDMA NICs deliver
        10-50 GB/s per NIC straight from GPU memory. Every inter-node collective pays the
        difference, usually exposed on every step.

    Evidence it cites:
        The log lines (``nccl_net`` selected network, ``nccl_connections`` with ``net =
        'Socket'``), the achieved inter-node bus bandwidth from the traces, and the time lost from
        what-if replays with inter-node transfers at what RDMA would give (shared by the groups
        that run at once), when traces are in the bundle. The healthy fabric is unknown when NCCL
        never used it, so the cost is bracketed: at least one NIC per host, at most one NIC per
        GPU (rail-optimized training nodes), each NIC at the slowest speed these GPUs' systems
        ship with (100 Gb/s, 200 on Hopper and Blackwell: :func:`nic_floor_factor`) or at what
        the sockets achieved per host, the faster: RDMA over the NICs that carried the TCP traffic
        is never slower than the TCP was (sockets at 20 GB/s per 4-GPU host, over 160 Gb/s of
        Ethernet or IPoIB, bracket RDMA at 20-80 GB/s, not 10-40). The estimate reported is the
        replay at the geometric mean of the two bandwidths: the log-scale middle of the bracket,
        which both bounds stay within a factor of sqrt(GPUs per host) of. The lower bound alone
        would call a proven socket fallback on a fast fabric harmless (TCP at 20 GB/s per host is
        above one 100 Gb/s NIC) and rank it below a 1 % straggler.

    How to fix:
        Find why NCCL could not use the RDMA NICs: ``NCCL_IB_DISABLE=1`` or a missing
        ``NCCL_IB_HCA`` match, missing ``libibverbs``/rdma-core in the container, no RDMA devices
        passed to the container, a missing net plugin (``NCCL_NET_PLUGIN``), or a wrong
        ``NCCL_SOCKET_IFNAME`` forcing TCP.

    Options:
        Severity follows the what-if when traces exist. Traces without message sizes (no
        collective metadata) and logs-only bundles are reported as medium with no measured time:
        how much faster RDMA would be than these sockets depends on NICs nobody measured. The
        traces still time each inter-node transfer once its members arrived; the replay with those
        transfers ``UNMEASURED_SPEEDUP`` (2) times as fast is given, and orders the finding among
        measured ones of the same severity (a proven cause whose plausible cost exceeds a measured
        3 % straggler's comes first).
    """

    code = "FAB002"
    name = "socket-fallback"
    cause = "fabric"

    def check(self, ctx: Context) -> list[Finding]:
        facts = socket_facts(ctx)
        floor = nic_floor_factor(ctx)
        hosts = sorted(facts.get("socket_hosts") or [])  # type: ignore[arg-type]
        if not hosts:
            return []
        inter = inter_transfers(ctx)
        lost = lost_low = lost_rail = twice = None
        bw = None
        low = REF_RDMA_GBPS * floor
        if inter.height:
            bw = float(inter["busbw_gbps"].median())
            # what RDMA would give: at least one NIC per host, up to one NIC per GPU on
            # rail-optimized nodes; the estimate is the log-scale middle of the two
            gpus = ctx.gpus_per_host
            # RDMA over the NICs that carried this TCP traffic is never slower than the TCP was:
            # sockets faster than the floor NIC raise the lower bound to what they achieved
            # (per host, groups sharing its NICs counted)
            low = max(low, inter_far_below(ctx)[2])
            lost_low = ctx.lost_if_transfers("fab:rdma", transfers_at_bandwidth(ctx, low))
            lost_rail = ctx.lost_if_transfers("fab:rdma-rail", transfers_at_bandwidth(ctx, low * gpus))
            lost = ctx.lost_if_transfers("fab:rdma-mid", transfers_at_bandwidth(ctx, low * gpus ** 0.5)) if gpus > 1 else lost_low
        else:
            # no message sizes: the transfers' durations are still measured
            twice = lost_if_faster(ctx)
        low_nic = f"one {100 * floor:.0f} Gb/s NIC per host"
        if low > REF_RDMA_GBPS * floor:
            low_nic = f"RDMA as fast as these sockets ({low:.1f} GB/s per host)"
        all_hosts = len(hosts) >= len(ctx.d.hosts) or len(hosts) == len(facts.get("hosts", []))  # type: ignore[arg-type]
        ranks = ctx.d.ranks["rank"].to_list() if all_hosts else [r for h in hosts for r in ctx.d.ranks_of(h)]
        culprit_hosts = ctx.d.hosts if all_hosts and ctx.d.hosts else hosts
        summary = (f"NCCL on {', '.join(hosts[:6])}{' …' if len(hosts) > 6 else ''} moved inter-node data over TCP sockets "
                   f"({facts.get('socket_connections', 0)} NET/Socket connections in the logs). "
                   + (f"The traces show inter-node bus bandwidth of {bw:.2f} GB/s; over RDMA the job would be about "
                      f"{fmt_pct(lost)} shorter (at least {fmt_pct(lost_low)} with {low_nic}, "
                      f"up to {fmt_pct(lost_rail)} with one per GPU)."
                      if bw is not None and lost is not None and lost_low is not None and lost_rail is not None
                      else _unmeasured(ctx, twice)))
        ev = [
            Evidence("network NCCL selected, per host",
                     f"SELECT DISTINCT host, net, plugin FROM nccl_net WHERE {ctx.where} AND kind = 'selected' ORDER BY host", None),
            Evidence("inter-node connections over sockets",
                     f"SELECT host, channel, src_rank, dst_rank, transport_detail FROM nccl_connections WHERE {ctx.where} "
                     f"AND transport = 'NET' AND net = 'Socket' ORDER BY host, channel LIMIT 50",
                     facts.get("socket_connections")),
        ]
        if bw is not None:
            ev.append(Evidence("bus bandwidth of inter-node collectives",
                               f"SELECT op, bytes, instances, round(busbw_gbps_median, 3) AS busbw_gbps FROM collective_bandwidth "
                               f"WHERE {ctx.where} AND scope = 'inter' ORDER BY bytes DESC", round(bw, 3)))
        f = Finding(rule=self.code, cause=self.cause, title="inter-node traffic falls back to TCP sockets",
                    summary=summary, ranks=ranks, hosts=culprit_hosts, lost_time_fraction=lost if (lost or 0) >= 0.0 else None,
                    confidence=ctx.quality * 0.95, evidence=ev,
                    recommendation="Make NCCL use RDMA: check NCCL_IB_DISABLE, NCCL_IB_HCA, NCCL_NET_PLUGIN and "
                                   "NCCL_SOCKET_IFNAME, that rdma-core/libibverbs and the RDMA devices are in the container.",
                    details={"socket_hosts": hosts, "busbw_gbps_median": bw, "rdma_low_gbps_per_host": round(low, 2),
                             # at the bracket's lower bound: one floor NIC per host, or the sockets' own speed
                             "lost_time_fraction_one_nic_per_host": lost_low,
                             "lost_time_fraction_rail_optimized": lost_rail, "lost_time_fraction_at_2x": twice,
                             # ranks this unmeasured but certain cause among measured ones of its severity
                             "lost_time_fraction_estimate": twice if lost is None else None})
        if lost is None:
            f.severity = "medium"
        return [f]


def _unmeasured(ctx: Context, twice: float | None) -> str:
    """Why the cost is not measured, and what the traces still show."""
    n_inter = ctx.d.instances.filter(pl.col("scope") == "inter").height if ctx.d.instances.height else 0
    if not n_inter:
        return "The bundle has no traces of inter-node collectives to measure the cost."
    f = ctx.features
    exposed = float(f["comm_inter_frac"].median() or 0.0) if "comm_inter_frac" in f.columns and f.height else 0.0
    return (f"The traces carry no message sizes (no collective metadata), so the bandwidth and the time lost cannot be "
            f"measured; exposed inter-node communication takes {exposed:.0%} of the median rank's time"
            + (f", and with inter-node transfers twice as fast the job would be {fmt_pct(twice)} shorter (how much faster "
               f"RDMA is than TCP depends on the NICs: about as fast on a slow Ethernet NIC, many times on IPoIB)."
               if twice else "."))
