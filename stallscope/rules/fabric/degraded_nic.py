"""FAB004 degraded-nic."""

from __future__ import annotations

import polars as pl

from stallscope.analysis.collectives import group_width
from stallscope.rules.base import Evidence, Finding, Rule, fmt_pct
from stallscope.rules.context import Context
from stallscope.rules.fabric._bandwidth import (
    expected_busbw, fabric_facts, graph_bandwidth_same_comm, host_bandwidth_handicap, inter_expectations, inter_transfers,
    lost_if_faster, transfers_at_bandwidth, transfers_without_handicap)
from stallscope.rules.placement import log_hosts, placement_differences

#: WARN texts that point at an RDMA NIC, port or link (not at NVML, CUDA or NCCL's configuration)
NIC_WARN = (r"(ibv_|NET/IB|NET/IBext|port error|port down|async event|[Cc]ompletion error|IBV_WC_|mlx\d|vendor err|"
            r"[Rr]etry exceeded|[Nn]etwork is unreachable|modify_qp|RoCE)")
#: WARN texts that report a hardware event on a port or a failed transfer (the RDMA driver's
#: asynchronous events, work completions in error): never configuration, evidence on their own
HW_EVENT = r"(port error|port down|async event : port (error|down)|[Cc]ompletion error|IBV_WC_|[Rr]etry exceeded|vendor err)"
#: exposed inter-node communication (median rank's share of time) above which a link with
#: hardware errors is a medium finding even when the traces cannot measure its cost
EXPOSED_INTER = 0.10


class DegradedNic(Rule):
    """One host's NIC or link is degraded: errors in its log, slower inter-node transfers through it.

    What it detects:
        A host whose NCCL log carries NIC/link warnings the other hosts' logs do not (IB
        completion errors, ``ibv_*`` failures, port or link messages; hardware events — port
        errors, transfers failed in the driver — count even when its log is the only one
        collected), and/or whose inter-node
        collectives are slower than the same collectives among the other hosts (when the job has
        inter-node groups that exclude it), and/or whose NICs can carry less than its peers':
        NCCL's topology search gives them less inter-node bandwidth, or the collector's manifest
        shows fewer RDMA ports up or ports trained to a lower rate (``/sys/class/infiniband``), or
        its NCCL log lists fewer RDMA NICs (``NET/IB : Using [0]... [1]...``) than the other
        hosts' logs do.

    Why it slows the job:
        A ring or tree collective runs at the speed of its slowest link: one degraded port
        (renegotiated to a lower rate, flapping, retransmitting) slows every collective that
        crosses it, for every rank of the group.

    Evidence it cites:
        The WARN lines of that host (``nccl_warnings``), bus bandwidth of inter-node instances
        with and without the host (``collective_instances``), the port states and rates per host
        (``manifest_topology``); time lost from the what-if replay
        with those instances as fast as the ones without it (or at the RDMA reference when
        bandwidth collapsed job-wide).

    How to fix:
        On that host: ``ibstat``/``ibv_devinfo`` (state, rate, width), ``perfquery`` error
        counters, the cable and the switch port; drain the host and rerun nccl-tests between it
        and a healthy host.

    Options:
        Transfers through the host count as slow below 60 % of the others' median busbw for the
        same (op, bytes, group size), over at least 3 instances, and for every kind of group (op,
        group size) with 3 or more instances through it (MoE jobs: a host is in a slow
        expert-parallel all-to-all group *and* a slow replica all-reduce group; its all-to-all
        peer, whose replica all-reduces run at full speed, is not); a host's NIC capacity (graph
        bandwidth or active port rate) counts as low below 75 % of the median of the others' (graph
        bandwidth from only two hosts' logs counts when it is lower for the same communicator,
        ranks and nodes, as NCCL's search is deterministic on identical hardware; else the
        transfers must run below 80 % of what the fabric gives without the host). When the
        traces cannot measure the cost (no message sizes, no peer to compare with), a host with
        hardware errors is medium severity when exposed inter-node communication takes ≥ 10 % of
        the median rank's time, else low; a medium one gives the replay with inter-node transfers
        ``UNMEASURED_SPEEDUP`` (2) times as fast, which orders it among measured findings of its
        severity: a link failing transfers under a job that waits on the network for a third of
        its time comes before a 4 % straggler.
    """

    code = "FAB004"
    name = "degraded-nic"
    cause = "fabric"

    def check(self, ctx: Context) -> list[Finding]:
        warned, hw = self._warned_hosts(ctx)
        slow = self._slow_hosts(ctx)
        facts = fabric_facts(ctx)
        graph_low = _low_hosts(facts["graph_bw"], at_least=3) or self._corroborated(ctx, _low_hosts(facts["graph_bw"], at_least=2))
        rate_low = _low_hosts(facts["nic_gbs"], at_least=2)
        # a host whose log lists fewer RDMA NICs than its peers' (one listed at least: a log
        # without the NET/IB line says nothing)
        few = _fewer_nics(facts["nics"])
        candidates = sorted(set(warned) | set(slow) | set(graph_low) | set(rate_low) | set(few))
        if not candidates or len(candidates) > max(1, len(ctx.d.hosts) // 3):
            return []
        out = []
        for host in candidates:
            if placement_differences(ctx, host).items:
                continue  # the host's placement differs: LOC004 explains its links
            lost = None
            if host in slow:
                lost = ctx.lost_if_transfers(f"nic:{host}", slow[host]["fix"])
            handicap = host_bandwidth_handicap(ctx, host)
            if (lost is None or lost < 0.01) and handicap and handicap > 1.05:
                lost = ctx.lost_if_transfers(f"nic-graph:{host}", transfers_without_handicap(ctx, host, handicap))
            if (lost is None or lost < 0.01) and (host in warned or host in few):
                inter = inter_expectations(ctx, without=host)
                _, basis = expected_busbw(ctx, without=host)
                if inter.height and basis != "reference" and float((inter["busbw_gbps"] / inter["expected_gbps"]).median()) < 0.8:
                    lost = ctx.lost_if_transfers(f"fab:without:{host}", transfers_at_bandwidth(ctx, without=host))
            if host not in warned and host not in graph_low and host not in rate_low and host not in few and (lost is None or lost < 0.01):
                continue
            parts = []
            if host in warned and len(log_hosts(ctx)) < 2:
                parts.append(f"its NCCL log (the only one in the bundle) has {warned[host]} NIC/link warning(s) with hardware "
                             f"errors (port errors, failed transfers)")
            elif host in warned:
                parts.append(f"its NCCL log has {warned[host]} NIC/link warning(s) the other hosts' logs do not")
            if host in slow:
                parts.append(f"inter-node collectives through it reach {slow[host]['ratio']:.0%} of the bus bandwidth of the same "
                             f"collectives among the other hosts")
            if host in graph_low:
                parts.append(f"NCCL's topology search gives its NICs {graph_low[host]:.0%} of the inter-node bandwidth of the "
                             f"other hosts' (a port running at a lower rate)")
            if host in rate_low:
                others = sorted(v for h, v in facts["nic_gbs"].items() if h != host)
                parts.append(f"its RDMA ports that are up carry {facts['nic_gbs'][host] * 8:.0f} Gb/s against "
                             f"{others[len(others) // 2] * 8:.0f} Gb/s on the other hosts (a port down or trained to a lower rate)")
            if host in few:
                others = sorted(v for h, v in facts["nics"].items() if h != host)
                parts.append(f"its NCCL log lists {facts['nics'][host]:.0f} RDMA NIC(s) where the other hosts' list "
                             f"{others[len(others) // 2]:.0f} (a NIC or port missing: its channels share the remaining ones)")
            summary = (f"Host {host}: " + "; ".join(parts) + "."
                       + (f" At the other hosts' speed the job would be {fmt_pct(lost)} shorter." if lost else
                          f" The traces do not show how much time it cost; exposed inter-node communication takes "
                          f"{fmt_pct(_exposed_inter(ctx))} of the median rank's time."))
            ev = [Evidence("NIC and link warnings per host",
                           f"SELECT host, src_file, src_line, message FROM nccl_warnings WHERE {ctx.where} ORDER BY host LIMIT 50",
                           warned.get(host))]
            if host in rate_low:
                ev.append(Evidence("RDMA ports per host: state and rate (collector manifest, /sys/class/infiniband)",
                                   "SELECT host, j->>'device' AS device, j->>'port' AS port, j->>'state' AS state, j->>'rate' AS rate "
                                   "FROM (SELECT host, unnest(from_json(json_extract(parsed, '$.ports'), '[\"JSON\"]')) AS j "
                                   f"FROM manifest_topology WHERE {ctx.where} AND probe = 'infiniband' AND status = 'ok') "
                                   "ORDER BY host, device, port", round(rate_low[host], 3)))
            if host in graph_low:
                ev.append(Evidence("NCCL's topology search per host: channels and inter-node bandwidth per channel (GB/s)",
                                   "SELECT host, n_channels, bw_intra_gbs, bw_inter_gbs, round(n_channels * bw_inter_gbs, 3) AS inter_gbs, "
                                   f"count(*) AS searches FROM nccl_topology WHERE {ctx.where} AND kind = 'graph' GROUP BY ALL "
                                   "ORDER BY host, inter_gbs DESC", round(graph_low[host], 3)))
            if host in slow:
                ev.append(Evidence("bus bandwidth of inter-node collectives with and without the host",
                                   f"SELECT list_contains(h.hosts, '{host}') AS with_host, i.op, i.bytes, count(*) AS n, "
                                   f"round(median(i.busbw_gbps), 3) AS busbw_gbps FROM collective_instances i "
                                   f"JOIN (SELECT job, instance_id, list(DISTINCT host) AS hosts FROM collective_members "
                                   f"GROUP BY job, instance_id) h USING (job, instance_id) WHERE i.{ctx.where} AND i.scope = 'inter' "
                                   f"AND i.members > 1 AND NOT coalesce(i.absent, false) GROUP BY ALL ORDER BY i.op, i.bytes, with_host", round(slow[host]["ratio"], 3)))
            f = Finding(rule=self.code, cause=self.cause, title=f"NIC or link of {host} is degraded", summary=summary,
                        ranks=ctx.d.ranks_of(host), hosts=[host], lost_time_fraction=lost,
                        confidence=ctx.quality * (0.85 if (host in warned or host in rate_low) and host in slow else 0.7), evidence=ev,
                        recommendation=f"On {host}: ibstat / ibv_devinfo (state, rate), perfquery error counters, cable and switch "
                                       "port; rerun nccl-tests between it and a healthy host.",
                        details={"warnings": warned.get(host, 0), "busbw_ratio": slow.get(host, {}).get("ratio"),
                                 "nic_capacity_ratio": rate_low.get(host, graph_low.get(host, few.get(host)))})
            if lost is None:
                f.severity = "medium" if host in hw and _exposed_inter(ctx) >= EXPOSED_INTER else "low"
                if f.severity == "medium":
                    # ranks this unmeasured but proven fault among measured ones of its severity
                    twice = lost_if_faster(ctx)
                    f.details.update(lost_time_fraction_at_2x=twice, lost_time_fraction_estimate=twice)
                    if twice:
                        f.summary += f" With inter-node transfers twice as fast the job would be {fmt_pct(twice)} shorter."
            out.append(f)
        return out

    def _corroborated(self, ctx: Context, low: dict[str, float]) -> dict[str, float]:
        """With graph bandwidth from only two hosts' logs, a lower one counts when it is lower for
        the same communicator (:func:`graph_bandwidth_same_comm`), or when the transfers agree:
        inter-node collectives run below 80 % of what the fabric would give without the host (a
        host whose log only shows a smaller communicator is not slower in the traces)."""
        same = _low_hosts(graph_bandwidth_same_comm(ctx), at_least=2)
        out = {h: ratio for h, ratio in low.items() if h in same}
        for h, ratio in low.items():
            if h in out:
                continue
            inter = inter_expectations(ctx, without=h)
            if inter.height and float((inter["busbw_gbps"] / inter["expected_gbps"]).median()) < 0.8:
                out[h] = ratio
        return out

    def _warned_hosts(self, ctx: Context) -> tuple[dict[str, int], set[str]]:
        """Hosts whose logs carry NIC/link warnings -> how many, and the hosts among them with
        hardware events (port errors, transfers failed in the driver). Warnings other than
        hardware events count only against peers' logs that lack them; hardware events count
        even in the only log collected."""
        hosts = log_hosts(ctx)
        if not hosts:
            return {}, set()
        try:
            w = ctx.store.sql("SELECT host, count(*) AS n, count(*) FILTER (WHERE regexp_matches(message, ?)) AS hw "
                              "FROM nccl_warnings WHERE job = ? AND regexp_matches(message, ?) GROUP BY host",
                              [HW_EVENT, ctx.job, NIC_WARN])
        except Exception:  # noqa: BLE001 - no log tables
            return {}, set()
        counts = {h: int(n) for h, n, _ in w.iter_rows() if h}
        hw = {h for h, _, k in w.iter_rows() if h and k}
        if len(hosts) < 2:
            counts = {h: n for h, n in counts.items() if h in hw}
        # a warning every host prints is configuration (or the whole fabric), not one host's NIC
        if len(counts) > max(1, len(hosts) // 3):
            return {}, set()
        return counts, hw & set(counts)

    def _slow_hosts(self, ctx: Context) -> dict[str, dict]:
        inter = inter_transfers(ctx)
        if inter.height < 6 or len(ctx.d.hosts) < 3:
            return {}
        mh = ctx.d.members.group_by("instance_id").agg(pl.col("host").unique().alias("hs"))
        x = inter.join(mh, on="instance_id").with_columns(group_width())
        out: dict[str, dict] = {}
        tl = ctx.timeline
        pos_of = {int(i): p for p, i in enumerate(tl.inst_ids.tolist())} if tl is not None else {}
        for h in ctx.d.hosts:
            x2 = x.with_columns(pl.col("hs").list.contains(h).alias("with"))
            a = x2.filter(pl.col("with")).group_by("op", "bytes", "width").agg(pl.col("busbw_gbps").median().alias("bw_w"), pl.len().alias("n"))
            b = x2.filter(~pl.col("with")).group_by("op", "bytes", "width").agg(pl.col("busbw_gbps").median().alias("bw_o"),
                                                                                 pl.col("transfer_ns").median().alias("t_o"))
            j = a.join(b, on=["op", "bytes", "width"]).with_columns((pl.col("bw_w") / pl.col("bw_o")).alias("r"))
            if j.height == 0 or int(j["n"].sum()) < 3:
                continue
            # a degraded NIC slows every kind of group that crosses it: when one kind (op, group
            # size) with enough instances runs through the host as fast as without it, the slow
            # kind is slow for another reason (a peer host in its groups)
            counted = j.group_by("op", "width").agg(pl.col("r").median(), pl.col("n").sum()).filter(pl.col("n") >= 3)
            ratio = float(j["r"].median())
            if counted.height >= 2:
                ratio = max(ratio, float(counted["r"].max()))
            if ratio < 0.6:
                withh = x2.filter(pl.col("with")).join(b, on=["op", "bytes", "width"])
                fix = {pos_of[int(i)]: float(t) for i, t in zip(withh["instance_id"].to_list(), withh["t_o"].to_list()) if int(i) in pos_of}
                out[h] = {"ratio": ratio, "fix": fix}
        return out


def _exposed_inter(ctx: Context) -> float:
    """The median rank's share of time in inter-node communication that nothing overlaps."""
    f = ctx.features
    if f.height == 0 or "comm_inter_frac" not in f.columns:
        return 0.0
    return float(f["comm_inter_frac"].median() or 0.0)


def _fewer_nics(nics: dict[str, float]) -> dict[str, float]:
    """Hosts whose NCCL log lists fewer RDMA NICs than the median of the other hosts' logs (at
    least one listed: a log without the ``NET/IB : Using`` line says nothing) -> the ratio. Hosts
    of one job are built alike, so one NIC fewer is a difference (3 of 4 is a quarter of the
    capacity gone, under :func:`_low_hosts`' 75 % bar)."""
    if len(nics) < 2:
        return {}
    out = {}
    for h, v in nics.items():
        others = sorted(x for k, x in nics.items() if k != h)
        med = others[len(others) // 2]
        if 1 <= v < med:
            out[h] = v / med
    return out


def _low_hosts(capacity: dict[str, float], *, at_least: int) -> dict[str, float]:
    """Hosts whose NIC capacity is below 75 % of the median of the other hosts' -> the ratio."""
    if len(capacity) < at_least:
        return {}
    out = {}
    for h, v in capacity.items():
        others = sorted(x for k, x in capacity.items() if k != h)
        med = others[len(others) // 2]
        if med > 0 and v < 0.75 * med:
            out[h] = v / med
    return out
