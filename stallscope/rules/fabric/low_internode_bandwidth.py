"""FAB001 low-internode-bandwidth."""

from __future__ import annotations

from stallscope.rules.base import Evidence, Finding, Rule, fmt_pct
from stallscope.rules.context import Context
from stallscope.rules.fabric._bandwidth import (COLLAPSE_GBPS, LATENCY_ALLOWANCE_NS, MIN_BW_BYTES, P2P_OPS, bound_share,
                                                collective_skew, inter_far_below, lost_if_faster, network_bound, socket_facts,
                                                transfers_at_bandwidth)


class LowInterNodeBandwidth(Rule):
    """Inter-node collectives move bytes far slower than any RDMA fabric would, while ranks arrive on time.

    What it detects:
        Bandwidth-bound collectives (≥ 1 MiB) whose members span hosts move bytes far below the
        bus bandwidth the fabric should give, although their members arrive together (arrival
        skew under half the transfer time): the time goes into moving bytes, not into waiting for
        a late rank. A job that moves nothing of 1 MiB or more between nodes (pipeline stages
        sending activations of a few hundred KiB) is judged on its messages of 64 KiB and more,
        by the time each takes beyond 1 ms (no inter-node latency reaches it; a message within
        it counts as fast): 0.8 MiB taking 7 ms is a collapsed link whatever the latency.
        Matched inter-node send/recv pairs (pipeline stages) count too, at the share of the
        host's NICs their ranks hold; a pair is timed from the later side's
        arrival, so a receiver posted early does not make it look slow. "Should give" and "far below" are: under 60 % of NCCL's own topology-search
        bandwidth when the logs have it (× 0.85, what nccl-tests achieves) or of the port rates
        in the collector's manifest; else under 70 % of a floor: 10 GB/s per RDMA NIC NCCL lists
        (their speed is not in the log: as if 100 Gb/s), or — no logs — 7 GB/s per host, 70 % of
        what one 100 Gb/s NIC gives, whatever the GPU model (an H100 host with one 100 Gb/s NIC
        is slow, not faulty). When NCCL logs show the data path runs
        over TCP sockets, FAB002 reports it instead; one host's degraded link is FAB004.

        When no bandwidth test can decide, the job is reported as **network-bound** when its
        bandwidth-bound inter-node collectives, whose members arrive together, are exposed for at
        least half of the median rank's time: it spends more time moving bytes between nodes,
        with everyone there, than computing. Two cases: traces without message sizes (PyTorch <
        2.1 without ``record_shapes``: transfers ≥ 0.5 ms count as bandwidth-bound), and traces
        whose bandwidth is above the no-log floor while nothing says what the NICs carry (a link
        of a 400 Gb/s host degraded to 20 GB/s looks like a healthy 200 Gb/s one). Not when NCCL's
        graph or the port rates show the fabric delivers what it should, or the transfers reach
        what a 400 Gb/s NIC per GPU carries (then the model is too communication-heavy for its
        fabric, a design matter). A pipeline's bubbles are spent inside its receives, so where
        stages on different hosts exchange point-to-point, the exposed time is that of the
        transfers once both sides are there (each pair timed from the later side's arrival), and
        the bar is a quarter of the median rank's time: a stage's activations are small beside its
        compute (healthy pipelines: 2-13 %, over TCP sockets 25-84 %; ``P2P_BOUND_SHARE``).
        The cost cannot be measured (no reference speed): the
        finding is medium, with what a fabric twice as fast would save in its details.

    Why it slows the job:
        Gradient and parameter exchanges that should overlap with compute take so long that they
        become exposed on every step; with data parallelism the whole job runs at the network's
        pace.

    Evidence it cites:
        Bus bandwidth per collective, size and scope (``collective_bandwidth``), arrival skew vs
        transfer time, exposed inter-node communication per rank (``rank_breakdown``); time lost
        from the what-if replay with inter-node transfers at the expected bandwidth.

    How to fix:
        Run nccl-tests (all_reduce_perf) across two nodes; check that NCCL uses the RDMA NICs
        (``NCCL_DEBUG=INFO``: ``NET/IB`` not ``NET/Socket``), ``NCCL_IB_HCA``, link state and
        speed (``ibstat``), GPUDirect RDMA (nvidia-peermem), and the switch fabric for congestion.

    Options:
        The 0.85 efficiency, 10 GB/s per NIC and 7 GB/s collapse thresholds are physics priors
        (nccl-tests on 100 Gb/s NICs). Findings costing < 1 % of the job are not reported.
    """

    code = "FAB001"
    name = "low-internode-bandwidth"
    cause = "fabric"

    def check(self, ctx: Context) -> list[Finding]:
        far_below, inter, host_bw, expected, basis = inter_far_below(ctx)
        if not far_below:
            return self._network_bound(ctx)
        bw = float(inter["busbw_gbps"].median())
        facts = socket_facts(ctx)
        if facts.get("socket_hosts"):
            return []  # FAB002 names the cause
        lost = ctx.lost_if_transfers("fab:expected", transfers_at_bandwidth(ctx))
        if lost is None or lost < 0.01:
            return []
        n_p2p = int(inter["op"].is_in(P2P_OPS).sum())
        what = ("collectives" if n_p2p == 0 else "point-to-point transfers" if n_p2p == inter.height
                else "collectives and point-to-point transfers")
        skew = collective_skew(inter)
        together = (f"while their members arrive together (median skew {skew:.0%} of the transfer)" if skew is not None
                    else "timed from the later side's arrival")
        why = {"nccl_graph": "what NCCL's own topology search says the NICs carry",
               "nic_count": "what the RDMA NICs NCCL lists should carry (as if 100 Gb/s: the log does not say their speed)",
               "reference": "any RDMA fabric (one 100 Gb/s NIC)"}[basis]
        if int(inter["bytes"].max() or 0) >= MIN_BW_BYTES:
            sizes = (f"of 1 MiB and more reach a median bus bandwidth of {bw:.2f} GB/s over {inter.height} instances "
                     f"({host_bw:.2f} GB/s per host once concurrent groups sharing the NICs are counted)")
        else:
            t_ms = float(inter["transfer_ns"].median()) / 1e6
            sizes = (f"are all under 1 MiB, yet take {t_ms:.2f} ms each (median over {inter.height} instances): beyond the "
                     f"{LATENCY_ALLOWANCE_NS / 1e6:.0f} ms no inter-node latency reaches, they move bytes at {host_bw:.2f} GB/s per "
                     f"host once concurrent groups sharing the NICs are counted")
        summary = (f"Inter-node {what} {sizes}, {together}. "
                   f"That is far below {why} (~{expected:.0f} GB/s per host); at that bandwidth "
                   f"the job would be {fmt_pct(lost)} shorter."
                   + ("" if facts.get("logs") else " The bundle has no NCCL logs: set NCCL_DEBUG=INFO to see which transport was used."))
        ev = [
            Evidence("bus bandwidth of inter-node collectives by op and size",
                     f"SELECT op, members, bytes, instances, round(busbw_gbps_median, 3) AS busbw_gbps, "
                     f"round(transfer_ms_median, 2) AS transfer_ms, round(skew_ms_median, 2) AS skew_ms FROM collective_bandwidth "
                     f"WHERE {ctx.where} AND scope = 'inter' ORDER BY bytes DESC", round(bw, 3)),
            _exposed_evidence(ctx, None),
        ]
        return [Finding(rule=self.code, cause=self.cause, title=f"inter-node bandwidth collapsed to {bw:.2f} GB/s",
                        summary=summary, ranks=ctx.d.ranks["rank"].to_list(), hosts=ctx.d.hosts, lost_time_fraction=lost,
                        confidence=ctx.quality * (0.8 if bw < 0.3 * COLLAPSE_GBPS else 0.65), evidence=ev,
                        recommendation="Run nccl-tests across two nodes; make NCCL use the RDMA NICs (NET/IB, NCCL_IB_HCA), "
                                       "check link state/speed (ibstat) and GPUDirect RDMA.",
                        details={"busbw_gbps_median": round(bw, 3), "expected_gbps": round(expected, 2), "basis": basis})]

    def _network_bound(self, ctx: Context) -> list[Finding]:
        """Network-bound: exposed inter-node collectives, everyone there, no bandwidth verdict."""
        bound, inst, exposed, sized = network_bound(ctx)
        facts = socket_facts(ctx) if bound else {}
        if not bound or facts.get("socket_hosts"):
            return []
        skew = collective_skew(inst)
        twice = lost_if_faster(ctx)
        if sized:
            bw = float(inst["busbw_gbps"].median())
            why = (f"They reach a median bus bandwidth of {bw:.2f} GB/s, above what the slowest RDMA NIC gives, and "
                   f"nothing in the bundle says what this fabric's NICs should carry: a degraded link and a thin healthy "
                   f"fabric look alike here, so what a healthy fabric would save cannot be measured")
            advice = " Set NCCL_DEBUG=INFO (its graph search gives the NICs' bandwidth) or run nccl-tests across two nodes."
        else:
            bw = None
            why = "The traces carry no message sizes, so the bandwidth and what a healthy fabric would save cannot be measured"
            advice = (" Set NCCL_DEBUG=INFO to see which transport was used, and record_shapes=True in the profiler to "
                      "measure the bandwidth.")
        pairs = bool(inst["op"].is_in(P2P_OPS).any())
        if pairs:
            what = (f"Inter-node point-to-point transfers (pipeline stages on different hosts) take {exposed:.0%} of the "
                    f"median rank's time once both sides are there (a receive posted early waits before that, not in it) "
                    f"over {inst.height} instances: a pipeline on a working fabric moves its activations between stages "
                    f"in well under {bound_share(True):.0%} of its time")
        else:
            what = (f"Inter-node collectives take {exposed:.0%} of the median rank's time, exposed (not hidden under "
                    f"computation), while their members arrive together (median skew {skew or 0:.0%} of the transfer) "
                    f"over {inst.height} instances: the job spends more time moving bytes between nodes than computing")
        summary = (f"{what}. {why}"
                   + (f"; with transfers twice as fast the job would be {fmt_pct(twice)} shorter." if twice else ".")
                   + ("" if facts.get("logs") and not sized else advice))
        ev = [
            _exposed_evidence(ctx, round(exposed, 3)),
            Evidence("inter-node collectives: transfer, bandwidth and arrival skew",
                     f"SELECT op, members, bytes, instances, round(busbw_gbps_median, 3) AS busbw_gbps, "
                     f"round(transfer_ms_median, 2) AS transfer_ms, round(skew_ms_median, 2) AS skew_ms "
                     f"FROM collective_bandwidth WHERE {ctx.where} AND scope = 'inter' ORDER BY transfer_ms DESC", inst.height),
        ]
        f = Finding(rule=self.code, cause=self.cause, title=f"network-bound: exposed inter-node {'transfers' if pairs else 'collectives'} take {exposed:.0%} of the time",
                    summary=summary, ranks=ctx.d.ranks["rank"].to_list(), hosts=ctx.d.hosts, lost_time_fraction=None,
                    confidence=ctx.quality * 0.45, evidence=ev,
                    recommendation="Measure the fabric with nccl-tests across two nodes and compare with what the NICs should "
                                   "carry" + ("." if sized else "; profile with record_shapes=True so that stallscope can measure "
                                                                 "the bandwidth."),
                    details={"exposed_inter_share": round(exposed, 3), "threshold": bound_share(pairs),
                             "lost_time_fraction_at_2x": twice, "lost_time_fraction_estimate": twice, "sizes": sized,
                             "busbw_gbps_median": None if bw is None else round(bw, 3)})
        f.severity = "medium"
        return [f]


def _exposed_evidence(ctx: Context, value: float | None) -> Evidence:
    return Evidence("exposed inter-node communication per rank",
                    f"SELECT rank, host, round(comm_inter_ms / steps, 2) AS comm_inter_ms_per_step, round(comm_frac, 3) AS comm_frac "
                    f"FROM rank_breakdown WHERE {ctx.where} ORDER BY rank", value)
