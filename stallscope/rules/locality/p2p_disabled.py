"""LOC003 p2p-disabled."""

from __future__ import annotations

from stallscope.rules.base import Evidence, Finding, Rule, fmt_pct
from stallscope.rules.context import Context
from stallscope.rules.locality._host_facts import host_lost, shm_hop_slows_inter
from stallscope.rules.locality._intra import intra_busbw_per_host, intra_transfers_at
from stallscope.rules.locality._nvlink import LATENCY_NS, MIN_BYTES, SLOW_SHARE, nvlink_busbw
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

        Also P2P off on **every** host (a launcher or container image that exports
        ``NCCL_P2P_DISABLE=1``), or on several, or on the only host of a one-node job, where no
        host stands apart from its peers: the traces show it on GPUs of an NVLink board (SXM/OAM
        names in ``deviceProperties``, see ``_nvlink.py``) whose intra-node collectives of 16 MiB
        and more move their bytes at host-memory or PCIe speed on each such host; the logs show it
        when every host's intra-node connections are SHM (with the setting echoed, or on an NVLink
        board: on PCIe cards without P2P, SHM is the hardware, not a fault), or every one of two
        or more hosts' logs where the others' are missing.

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
        peers' speed) when the traces show it. Job-wide: each host's intra-node bus bandwidth and
        GPU model (``collective_instances``, ``ranks``); the cost replays those transfers at the
        board's conservative NVLink bandwidth after 10 µs of start-up (about half of nccl-tests'
        bandwidth, so a lower bound when
        ranks wait on them in line), plus, when the logs put every ring's intra-node hops on SHM
        and the inter-node collectives collapse to SHM speed, those at what the fabric should give.

    How to fix:
        Remove ``NCCL_P2P_DISABLE``/``NCCL_P2P_LEVEL`` from that host's environment; check
        ``nvidia-smi topo -m`` for NVLink, IOMMU/ACS settings that block P2P, and that every
        process sees all GPUs of the node (per-process ``CUDA_VISIBLE_DEVICES`` prevents P2P).

    Options:
        A host differs when ≥ 50 % of its intra-node connections are SHM and < 50 % of every
        other host's are; requires NCCL logs from the host and at least one peer. When the
        bundle holds one host's log only, that host is named when ≥ 50 % of its intra-node
        connections are SHM and its log disables P2P itself (``NCCL_P2P_DISABLE=1``,
        ``NCCL_P2P_LEVEL=LOC``) or its GPUs are of an NVLink board (where SHM is never the
        hardware's choice), and the inter-node collectives through it collapse (FAB001's test) to a
        bandwidth an SHM hop can explain (≥ 5 GB/s per host; below, something else is broken
        too); without that collapse the finding is low (the setting is a fact, its cost unknown).
        The other hosts may share the setting: the finding says so. Job-wide or several hosts:
        a host is slow under 40 % of its board's conservative NVLink bandwidth (H100/H200 200,
        A100 120, V100 60, B200 350 GB/s; PCIe and NVL variants never), median over at least 3
        sized collectives of 16 MiB and more; two or more such hosts, or the only host, fire; a
        single slow host among fast peers is left to LOC002 and the per-host test above. When
        the logs put every host on SHM and the traces carry no message sizes, a network-bound job
        (FAB001's test: exposed inter-node collectives, members arriving together) waits on rings
        whose every intra-node hop is host memory: medium, unmeasured, replacing FAB001's reading.
    """

    code = "LOC003"
    name = "p2p-disabled"
    cause = "locality"

    def check(self, ctx: Context) -> list[Finding]:
        hosts = log_hosts(ctx)
        out = self._off_beyond_one_host(ctx, hosts)
        covered = {h for f in out for h in f.hosts}
        if len(hosts) == 1:
            return out + ([] if hosts & covered else self._lone_log(ctx, next(iter(hosts))))
        if len(hosts) < 2:
            return out
        for host in ctx.d.hosts:
            diffs = placement_differences(ctx, host)
            items = [t for t in diffs.items if "SHM" in t or "P2P is disabled" in t]
            if not items or host in covered:
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
        by_env = host in p2p_disabled_by_env(ctx)
        if shm < 0.5 or not (by_env or nvlink_busbw(ctx.device_names) is not None):
            return []
        items = [(f"its NCCL log (the only one in the bundle) disables P2P (NCCL_P2P_DISABLE / NCCL_P2P_LEVEL) and {shm:.0%} of "
                  f"its intra-node connections go through shared memory (SHM)") if by_env else
                 (f"{shm:.0%} of the intra-node connections in its NCCL log (the only one in the bundle) go through shared "
                  f"memory (SHM), on GPUs of an NVLink board ({ctx.device_names[0]}): P2P is off or unavailable there")]
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

    def _off_beyond_one_host(self, ctx: Context, logged: set[str]) -> list[Finding]:
        """P2P off on every host (a job-wide setting), or on several: nothing stands apart from peers.

        Two kinds of proof, either enough: the traces (GPUs of an NVLink board whose intra-node
        collectives of ``MIN_BYTES`` and more run under ``SLOW_SHARE`` of what NVLink gives, on
        each such host) and the logs (every logged host's intra-node connections on SHM, the logs
        covering every host, with P2P disabled by environment or an NVLink board to make it a
        fault rather than the hardware). The cost: those intra-node transfers at NVLink's
        conservative speed, and, when the logs put the rings' intra-node hops on SHM and the
        inter-node collectives collapse to a speed SHM explains, those at what the fabric should
        give (as for a lone log)."""
        from stallscope.rules.fabric._bandwidth import inter_far_below, network_bound, transfers_at_bandwidth

        names = ctx.device_names
        ref = nvlink_busbw(names)
        measured = intra_busbw_per_host(ctx, MIN_BYTES) if ref else {}
        slow = {h: v for h, v in measured.items() if v[0] < SLOW_SHARE * ref} if ref else {}
        shm = shm_share(ctx)
        env_off = p2p_disabled_by_env(ctx)
        job_hosts = set(ctx.d.hosts)
        # every log says SHM: all hosts' logs, or two or more (the others' missing logs are no
        # evidence of a different setting; one log alone is the lone-log case)
        logs_all_shm = (bool(logged) and (job_hosts <= logged or len(logged) >= 2) and all(shm.get(h, 0.0) >= 0.5 for h in logged)
                        and (bool(env_off) or ref is not None))
        if len(slow) >= 2 or (slow and len(job_hosts) == 1):
            hosts = set(slow)
        elif logs_all_shm and (len(job_hosts) >= 2 or ref is not None):
            hosts = set(job_hosts)
        else:
            return []  # one slow host among fast peers is LOC002's and the per-host LOC003's
        items = []
        if slow:
            bws = sorted(v[0] for v in slow.values())
            n = sum(v[1] for v in slow.values())
            where = "its host" if len(slow) == 1 else f"{len(slow)} hosts"
            items.append(f"intra-node collectives of {MIN_BYTES >> 20} MiB and more move {bws[len(bws) // 2]:.1f} GB/s of bus "
                         f"bandwidth on {where} (median of {n}), where the {names[0]} NVLink board gives at least "
                         f"~{ref:.0f} GB/s: host-memory (SHM) or PCIe speed")
        if hosts & logged:
            on_shm = sorted(h for h in hosts & logged if shm.get(h, 0.0) >= 0.5)
            if on_shm:
                items.append(f"NCCL's logs put the intra-node connections of {len(on_shm)} of {len(hosts)} host(s) on SHM")
            off = sorted(hosts & env_off)
            if off:
                items.append(f"{len(off)} host(s) echo NCCL_P2P_DISABLE / NCCL_P2P_LEVEL that disable P2P")
            if not on_shm and not off:
                items.append("NCCL's logs show P2P connections: the P2P path itself (NVLink down, PCIe P2P) is slow")
        fix: dict[int, float] = {}
        if slow:
            fix.update(intra_transfers_at(ctx, set(slow), ref, LATENCY_NS))
        crosses = False
        bound_share = None
        if logs_all_shm:
            far, _, host_bw, expected, _ = inter_far_below(ctx)
            if far and host_bw >= SHM_FLOOR_GBPS:
                crosses = True
                items.append(f"the inter-node collectives, whose rings cross every host's intra-node hops, run at "
                             f"{host_bw:.1f} GB/s per host against ~{expected:.0f} GB/s the NICs should carry, a speed "
                             f"host-memory copies explain")
                fix.update(transfers_at_bandwidth(ctx))
            elif not fix:
                # no bandwidth to measure (no message sizes): a job waiting on rings whose every
                # intra-node hop is SHM waits on host memory, whatever its NICs carry
                bound, _, exposed, _ = network_bound(ctx)
                if bound:
                    crosses = True
                    bound_share = round(exposed, 3)
                    items.append(f"the inter-node collectives, whose rings cross every host's intra-node hops, are exposed "
                                 f"{exposed:.0%} of the median rank's time (the traces carry no message sizes to measure "
                                 f"their bandwidth)")
        lost = ctx.lost_if_transfers("p2p:wide:" + ",".join(sorted(hosts)), fix) if fix else None
        every = hosts == job_hosts
        label = (next(iter(hosts)) if len(hosts) == 1 else "every host" if every else ", ".join(sorted(hosts)))
        apart = ("The job has one host: nothing to compare it with but what its GPUs' board gives. " if len(job_hosts) == 1
                 else f"No host stands apart: the setting is {'the job' if every else 'those hosts'}'s, not one machine's. ")
        summary = (f"On {label}: {'; '.join(items)}. {apart}"
                   + (f"At NVLink's (conservative) speed{' and the fabric' if crosses else ''}'s, the job would be "
                      f"{fmt_pct(lost)} shorter." if lost else "The traces do not show what it cost."))
        ev = [shm_evidence(ctx, None), p2p_env_evidence(ctx)] if hosts & logged else []
        if slow:
            ev.insert(0, Evidence("intra-node bus bandwidth per host for collectives of 16 MiB and more, and the GPU model",
                                  f"SELECT m.host, r.device_name, i.op, count(*) AS n, round(median(i.busbw_gbps), 2) AS busbw_gbps "
                                  f"FROM collective_instances i JOIN (SELECT job, instance_id, any_value(host) AS host, "
                                  f"any_value(rank) AS rank FROM collective_members GROUP BY job, instance_id) m USING (job, instance_id) "
                                  f"JOIN ranks r ON r.job = m.job AND r.rank = m.rank WHERE i.{ctx.where} AND i.scope = 'intra' "
                                  f"AND i.members > 1 AND i.bytes >= {MIN_BYTES} GROUP BY ALL ORDER BY m.host, i.op",
                                  round(min(v[0] for v in slow.values()), 2)))
        ranks = sorted(r for h in hosts for r in ctx.d.ranks_of(h))
        f = Finding(rule=self.code, cause=self.cause,
                    title=f"P2P is off on {label} (GPUs talk through host memory)" if hosts & (env_off | set(h for h in shm if shm[h] >= 0.5))
                    else f"intra-node collectives on {label} run far below NVLink speed",
                    summary=summary, ranks=ranks, hosts=sorted(hosts), lost_time_fraction=lost,
                    confidence=ctx.quality * (0.85 if slow and hosts & logged else 0.75 if slow else 0.6), evidence=ev,
                    recommendation=("Remove NCCL_P2P_DISABLE / NCCL_P2P_LEVEL from the job's environment (launcher, container "
                                    "image, module files); on each node check nvidia-smi topo -m and nvidia-smi nvlink -s, "
                                    "IOMMU/ACS settings, and that every process sees all GPUs of its node."),
                    details={"placement_differences": items, "affects_inter_node": crosses, "job_wide": every,
                             "intra_busbw_gbps": {h: round(v[0], 2) for h, v in sorted(slow.items())},
                             "nvlink_reference_gbps": ref}
                    | ({"exposed_inter_share": bound_share} if bound_share is not None else {}))
        if lost is None:
            # the setting is a fact; its cost is measured, or (network-bound through SHM hops) as
            # likely as FAB001's network-bound reading it replaces, or unknown
            f.severity = "medium" if bound_share is not None else "low"
        return [f]

