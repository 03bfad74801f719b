"""The what-if replay on hand-built timelines whose true answer is known."""

from __future__ import annotations

import polars as pl
import pytest

from stallscope.analysis.whatif import build_timeline, everyone_like_median, replay

MS = 1_000_000


def _ddp(*, late_ns: int = 0, slow_ns: int = 0, buckets: int = 6, steps: int = 4,
         overlaps: bool = True, transfer_ns: int = 2 * MS) -> tuple[pl.DataFrame, ...]:
    """Three ranks of DDP: backward produces a gradient bucket every 5 ms and all-reduces it on
    the NCCL stream while backward goes on; the optimizer waits for the last bucket. Rank 2 starts
    backward ``late_ns`` late in every step (a slow data loader), and takes ``slow_ns`` more to
    compute each bucket (a slow GPU). Each all-reduce moves its bytes in ``transfer_ns``."""
    compute, transfer, opt = 5 * MS, transfer_ns, 3 * MS
    ranks = (0, 1, 2)
    members, instances, windows = [], [], []
    t = 0
    iid = 0
    for step in range(steps):
        start = t
        prev_end = 0
        for k in range(buckets):
            # a bucket's all-reduce is enqueued when backward has produced it, and starts when the
            # stream's previous one is done
            ready = {r: start + (late_ns + (k + 1) * (compute + slow_ns) if r == 2 else (k + 1) * compute) for r in ranks}
            arrivals = {r: max(ready[r], prev_end) for r in ranks}
            end = max(arrivals.values()) + transfer
            for r, a in arrivals.items():
                members.append({"instance_id": iid, "rank": r, "step": step, "arrival_ns": a, "end_ns": end, "ready_ns": ready[r],
                                "gates_compute": k == buckets - 1,
                                # backward runs on under every bucket but the last
                                "compute_overlaps_end": overlaps and k < buckets - 1})
            instances.append({"instance_id": iid, "members": len(ranks), "op": "allreduce", "scope": "inter",
                              "bytes": 1 << 24, "bus_factor": 1.0, "transfer_ns": transfer, "step": step, "channel": "pg:0"})
            prev_end = end
            iid += 1
        t = prev_end + opt
        windows += [{"rank": r, "start_ns": start, "end_ns": t} for r in ranks]
    return (pl.DataFrame(members), pl.DataFrame(instances), pl.DataFrame(windows),
            pl.DataFrame({"rank": list(ranks), "host": ["a", "b", "c"]}))


@pytest.mark.parametrize("overlaps", [True, False])
def test_replay_of_the_recording_is_the_recording(overlaps: bool) -> None:
    tl = build_timeline(*_ddp(late_ns=2 * MS, overlaps=overlaps))
    assert tl is not None
    assert abs(replay(tl) - tl.makespan) <= 1.0


def test_a_late_start_costs_once_per_step_not_once_per_bucket() -> None:
    """Rank 2 starts each step's backward 2 ms late: every rank like the median saves 2 ms per step.
    Anchored on bucket k's shared end, rank 2 looked 2 ms slower at every one of the 6 buckets."""
    late, steps = 2 * MS, 4
    tl = build_timeline(*_ddp(late_ns=late, steps=steps))
    assert tl is not None and (tl.row_prev >= 0).any()
    truth = steps * late / tl.makespan
    assert everyone_like_median(tl) == pytest.approx(truth, rel=0.05)
    # the rows the rank computed through are what makes it right: without them the same recording
    # claims several times the truth
    old = build_timeline(*_ddp(late_ns=late, steps=steps, overlaps=False))
    assert old is not None and not (old.row_prev >= 0).any()
    assert everyone_like_median(old) > 2 * truth


def test_paced_rows_still_follow_a_straggler_s_compute() -> None:
    """A rank whose backward is slower at every bucket (not just late to start) still gains at every
    bucket when paced: its own time between buckets is what shrinks."""
    slow, buckets, steps = MS // 2, 6, 4
    tl = build_timeline(*_ddp(slow_ns=slow, buckets=buckets, steps=steps))
    assert tl is not None and (tl.row_prev >= 0).any()
    assert abs(replay(tl) - tl.makespan) <= 1.0
    assert everyone_like_median(tl) == pytest.approx(buckets * steps * slow / tl.makespan, rel=0.05)


def test_replica_groups_join_a_stage_s_replicas_not_the_stages() -> None:
    """Two pipeline stages of two tensor-parallel pairs each: ranks 0-3 are stage 0 (TP pairs
    {0,1}, {2,3}, gradient all-reduces {0,2}, {1,3}), ranks 4-7 stage 1 likewise, activations
    sent 0→4, 1→5, 2→6, 3→7, and one all-reduce over every rank (a gradient norm). The stage's
    replicas are alike; the global group, whose members exchange activations, joins nothing."""
    from stallscope.analysis.whatif import _replica_groups

    rows: list[dict[str, object]] = []
    pos = 0

    def inst(op: str, channel: str, ranks: tuple[int, ...], times: int = 1) -> None:
        nonlocal pos
        for _ in range(times):
            rows.extend({"pos": pos, "rank": r, "op": op, "channel": channel} for r in ranks)
            pos += 1

    for a in (0, 2, 4, 6):
        inst("allreduce", f"tp{a}", (a, a + 1), times=4)
    for a, b in ((0, 2), (1, 3), (4, 6), (5, 7)):
        inst("allreduce", f"dp{a}", (a, b))
    for a in range(4):
        inst("send", f"p2p{a}", (a, a + 4))
    inst("allreduce", "world", tuple(range(8)))
    role_of = {r: r // 2 for r in range(8)}  # each tensor-parallel pair is a role
    rep = _replica_groups(pl.DataFrame(rows), role_of)
    assert rep[0] == rep[1] and rep[2] == rep[3]
    assert rep[0] != rep[2]
    # without point-to-point traffic every group joins: one replica group
    no_p2p = pl.DataFrame([r for r in rows if r["op"] != "send"])
    assert len(set(_replica_groups(no_p2p, role_of).values())) == 1


def _fsdp_backward(*, late_ns: int = 0, layers: int = 6, steps: int = 4) -> tuple[pl.DataFrame, ...]:
    """Three ranks of FSDP's backward: each layer's gradients are reduce-scattered when backward
    reaches them (5 ms per layer), and the next layer's all-gather prefetch is queued on the NCCL
    stream right behind that reduce-scatter (its inputs were ready long before). Rank 2 starts
    backward ``late_ns`` late in every step."""
    compute, rs, ag, opt = 5 * MS, MS, MS, 3 * MS
    ranks = (0, 1, 2)
    members, instances, windows = [], [], []
    t, iid = 0, 0

    def add(op: str, step: int, arrivals: dict[int, int], transfer: int, **cols: object) -> int:
        nonlocal iid
        end = max(arrivals.values()) + transfer
        for r, a in arrivals.items():
            members.append({"instance_id": iid, "rank": r, "step": step, "arrival_ns": a, "end_ns": end,
                            "ready_ns": cols.get("ready", {}).get(r, a), "gates_compute": cols.get("gates", False),  # type: ignore[union-attr]
                            "compute_overlaps_end": cols.get("overlaps", True)})
        instances.append({"instance_id": iid, "members": len(ranks), "op": op, "scope": "inter", "bytes": 1 << 24,
                          "bus_factor": 1.0, "transfer_ns": transfer, "step": step, "channel": "pg:0"})
        iid += 1
        return end

    for step in range(steps):
        start, stream_free = t, t
        for k in range(layers):
            ready = {r: start + (late_ns if r == 2 else 0) + (k + 1) * compute for r in ranks}
            last = k == layers - 1
            stream_free = add("reducescatter", step, {r: max(ready[r], stream_free) for r in ranks}, rs,
                              gates=last, overlaps=not last, ready=ready)
            if not last:  # the prefetch, queued: its inputs were ready when the layer's backward began
                stream_free = add("allgather", step, dict.fromkeys(ranks, stream_free), ag,
                                  ready={r: ready[r] - compute for r in ranks})
        t = stream_free + opt
        windows += [{"rank": r, "start_ns": start, "end_ns": t} for r in ranks]
    return (pl.DataFrame(members), pl.DataFrame(instances), pl.DataFrame(windows),
            pl.DataFrame({"rank": list(ranks), "host": ["a", "b", "c"]}))


def test_fsdp_backward_paces_reduce_scatters_past_the_queued_prefetch() -> None:
    """Rank 2 starts backward 2 ms late in every step: every rank like the median saves 2 ms per
    step. Between two reduce-scatters sits an all-gather prefetch, queued right behind the first:
    its arrival is the stream's, not the computation's, so the next reduce-scatter is paced from
    the previous one. Anchored on the prefetch's shared end instead, the late start was counted
    again at every layer."""
    late, steps = 2 * MS, 4
    tl = build_timeline(*_fsdp_backward(late_ns=late, steps=steps))
    assert tl is not None and (tl.row_prev >= 0).any()
    assert abs(replay(tl) - tl.makespan) <= 1.0
    assert everyone_like_median(tl) == pytest.approx(steps * late / tl.makespan, rel=0.05)


def test_fsdp_backward_with_peers_queued_behind_a_late_rank() -> None:
    """Rank 2 starts backward 4 ms late: longer than the layer's compute leaves the NCCL stream
    idle, so its peers' reduce-scatters wait in the stream behind each prefetch (queued) while it
    delivers every one late. Like the median it saves its 4 ms once per step, not the whole gap
    from each prefetch's end at every layer."""
    late, steps = 4 * MS, 4
    tl = build_timeline(*_fsdp_backward(late_ns=late, steps=steps))
    assert tl is not None
    assert abs(replay(tl) - tl.makespan) <= 1.0
    assert everyone_like_median(tl) == pytest.approx(steps * late / tl.makespan, rel=0.05)


def _pipeline(*, late_ns: int = 0, micro: int = 4, steps: int = 3) -> tuple[pl.DataFrame, ...]:
    """Three pipeline stages of two data-parallel replicas (ranks 0-1, 2-3, 4-5; activations sent
    0→2→4 and 1→3→5), forward only. The stages compute a micro-batch in 4, 3 and 1 ms once its
    input is there; the later stages post their receives ahead, back to back on a receive stream of their
    own, and each replica pair all-reduces its gradients at the end of the step, then every rank
    the gradients' norm (which is what ends the step for the stages that finished early). Rank 2 starts
    ``late_ns`` late in every step (its data loader stalls before its first receive)."""
    compute, tr, ar, opt = 3 * MS, MS // 2, MS, 2 * MS
    members: list[dict[str, object]] = []
    instances: list[dict[str, object]] = []
    windows: list[dict[str, object]] = []
    iid, t = 0, 0

    def add(op: str, channel: str, step: int, arrivals: dict[int, int], transfer: int) -> int:
        nonlocal iid
        end = max(arrivals.values()) + transfer
        for r, a in arrivals.items():
            members.append({"instance_id": iid, "rank": r, "step": step, "arrival_ns": a, "end_ns": end, "ready_ns": a,
                            "gates_compute": op == "allreduce", "compute_overlaps_end": False})
        instances.append({"instance_id": iid, "members": len(arrivals), "op": op, "scope": "inter", "bytes": 1 << 22,
                          "bus_factor": 1.0, "transfer_ns": transfer, "step": step, "channel": channel})
        iid += 1
        return end

    for step in range(steps):
        start = t
        step_ends = []
        for rep in (0, 1):
            s0, s1, s2 = rep, rep + 2, rep + 4
            sent0 = [start + (k + 1) * 4 * MS for k in range(micro)]  # stage 0's sends: the slowest stage
            posted1 = start + (late_ns if s1 == 2 else 0)
            got1, posted = [], posted1
            for k in range(micro):
                posted = add("send", f"p2p:{s0}->{s1}", step, {s0: sent0[k], s1: posted}, tr)
                got1.append(posted)
            sent1, free = [], 0
            for k in range(micro):
                free = max(got1[k], free) + compute
                sent1.append(free)
            posted, got2 = start, []
            for k in range(micro):
                posted = add("send", f"p2p:{s1}->{s2}", step, {s1: sent1[k], s2: posted}, tr)
                got2.append(posted)
            free = 0
            for k in range(micro):
                free = max(got2[k], free) + MS  # the last stage is light
            step_ends.append({s0: sent0[-1] + tr, s1: sent1[-1] + tr, s2: free})
        stage_end = [add("allreduce", f"pg:dp{s}", step, {r: step_ends[r % 2][r] for r in (2 * s, 2 * s + 1)}, ar)
                     for s in range(3)]
        t = add("allreduce", "pg:world", step, {r: stage_end[r // 2] for r in range(6)}, ar) + opt
        windows += [{"rank": r, "start_ns": start, "end_ns": t} for r in range(6)]
    return (pl.DataFrame(members), pl.DataFrame(instances), pl.DataFrame(windows),
            pl.DataFrame({"rank": list(range(6)), "host": [f"h{r}" for r in range(6)]}))


def test_a_late_stage_replays_on_its_peers_dependencies() -> None:
    """Rank 2 starts 20 ms late: its inputs are already received when it begins, its receives
    complete back to back, and what ended last before each of its sends is the receive of a later
    micro-batch, not the one it computes on. Like its replica (rank 3) it depends on what rank 3
    depends on, and the replay gives back exactly the time the delay cost (as rerunning without
    it does). Anchored on its own recorded order it recovered about half."""
    from stallscope.analysis.whatif import culprits_like_median_peer

    late, steps = 20 * MS, 3
    tl = build_timeline(*_pipeline(late_ns=late, steps=steps))
    clean = build_timeline(*_pipeline(late_ns=0, steps=steps))
    assert tl is not None and clean is not None and tl.pipelined
    assert abs(replay(tl) - tl.makespan) <= 1.0
    truth = (tl.makespan - clean.makespan) / tl.makespan
    assert truth > 0.05
    assert culprits_like_median_peer(tl, [2]) == pytest.approx(truth, rel=0.02)


def _hsdp_backward(*, allreduce_ns: int, layers: int = 6, steps: int = 3) -> tuple[pl.DataFrame, ...]:
    """Two hosts of two ranks, HSDP's backward: each layer's gradients are reduce-scattered inside
    the host (1 ms; the next layer's computation waits for it), then all-reduced between the hosts
    on a communicator of their own (``allreduce_ns``, queued behind the reduce-scatter) while the
    next layer computes (5.3 ms). The optimizer waits for the last all-reduce."""
    compute, rs, opt = 5 * MS + MS // 3, MS, 2 * MS
    ranks = (0, 1, 2, 3)
    members: list[dict[str, object]] = []
    instances: list[dict[str, object]] = []
    windows: list[dict[str, object]] = []
    iid, t = 0, 0

    def add(op: str, channel: str, step: int, arrivals: dict[int, int], transfer: int, *, gates: bool, overlaps: dict[int, bool],
            ready: dict[int, int] | None = None, scope: str = "intra") -> int:
        nonlocal iid
        end = max(arrivals.values()) + transfer
        for r, a in arrivals.items():
            members.append({"instance_id": iid, "rank": r, "step": step, "arrival_ns": a, "end_ns": end,
                            "ready_ns": (ready or arrivals)[r], "gates_compute": gates, "compute_overlaps_end": overlaps[r]})
        instances.append({"instance_id": iid, "members": len(arrivals), "op": op, "scope": scope, "bytes": 1 << 24,
                          "bus_factor": 1.0, "transfer_ns": transfer, "step": step, "channel": channel})
        iid += 1
        return end

    for step in range(steps):
        start = t
        free = {r: start for r in ranks}       # each rank's computation
        stream = {r: start for r in ranks}     # each rank's inter-node stream
        last_ar = start
        for k in range(layers):
            done = {r: free[r] + compute for r in ranks}
            last = k == layers - 1
            rs_end = {}
            for host in (0, 1):
                grp = {r: done[r] for r in ranks if r // 2 == host}
                e = add("reducescatter", f"pg:shard{host}", step, grp, rs, gates=True, overlaps=dict.fromkeys(grp, False))
                rs_end.update(dict.fromkeys(grp, e))
            for local in (0, 1):
                grp = {r: max(rs_end[r], stream[r]) for r in ranks if r % 2 == local}
                # the next layer computes through the all-reduce (not after the last layer)
                last_ar = add("allreduce", f"pg:replica{local}", step, grp, allreduce_ns, gates=last, scope="inter",
                              overlaps=dict.fromkeys(grp, not last), ready={r: rs_end[r] for r in grp})
                stream.update(dict.fromkeys(grp, last_ar))
            free = rs_end
        t = max(stream.values()) + opt
        windows += [{"rank": r, "start_ns": start, "end_ns": t} for r in ranks]
    return (pl.DataFrame(members), pl.DataFrame(instances), pl.DataFrame(windows),
            pl.DataFrame({"rank": list(ranks), "host": ["a", "a", "b", "b"]}))


def test_faster_transfers_gain_only_what_the_computation_did_not_hide() -> None:
    """HSDP's inter-node all-reduces run at half speed (8 ms instead of 4) while the next layer
    computes for 5 ms: most of each one is hidden, only the excess over the computation and the
    last layer's are exposed. At full speed the job saves what rerunning it at full speed saves.
    Anchored on the all-reduce each next reduce-scatter happened to arrive after, the replay moved
    the computation with every all-reduce and counted the hidden time too."""
    from stallscope.analysis.whatif import transfers_at

    slow, fast = 8 * MS, 4 * MS
    tl = build_timeline(*_hsdp_backward(allreduce_ns=slow))
    ref = build_timeline(*_hsdp_backward(allreduce_ns=fast))
    assert tl is not None and ref is not None
    anchors, gaps, prevs = tl.waited
    assert (anchors != tl.row_anchor).any()
    assert abs(replay(tl, gaps=gaps, anchors=anchors, prevs=prevs) - tl.makespan) <= 1.0
    truth = (tl.makespan - ref.makespan) / tl.makespan
    inter = {p: float(fast) for p in range(tl.n_instances) if tl.attrs["scope"][p] == "inter"}
    assert transfers_at(tl, inter) == pytest.approx(truth, rel=0.02)


def test_faster_transfers_do_not_speed_up_a_straggler_s_computation() -> None:
    """Rank 2 computes each bucket in 6 ms, its peers in 5, and every all-reduce takes 5.5 ms
    instead of 2 (a compute straggler and a NIC at a third of its speed). The peers' buckets sit
    queued behind the stream; rank 2's arrive when its backward produces them, 0.5 ms after the
    previous all-reduce ended. At full speed only the last bucket's transfer and the queue behind
    it shrink: rank 2's backward still paces the buckets. Anchored on the previous all-reduce's
    end (its peers queued, so the gap-to-gap rule did not pace rank 2), the replay shrank rank 2's
    computation with every transfer and claimed both faults' cost for the NIC (seed 29000 #0122)."""
    from stallscope.analysis.whatif import transfers_at

    tl = build_timeline(*_ddp(slow_ns=MS, transfer_ns=11 * MS // 2))
    ref = build_timeline(*_ddp(slow_ns=MS, transfer_ns=2 * MS))
    both = build_timeline(*_ddp(transfer_ns=2 * MS))
    assert tl is not None and ref is not None and both is not None
    anchors, gaps, prevs = tl.waited
    assert (prevs >= 0).sum() > (tl.row_prev >= 0).sum()
    assert abs(replay(tl, gaps=gaps, anchors=anchors, prevs=prevs) - tl.makespan) <= 1.0
    truth = (tl.makespan - ref.makespan) / tl.makespan
    fast = {p: float(2 * MS) for p in range(tl.n_instances)}
    assert transfers_at(tl, fast) == pytest.approx(truth, rel=0.05)
    assert transfers_at(tl, fast) < 0.6 * (tl.makespan - both.makespan) / tl.makespan


def test_a_late_rank_with_slow_transfers_gains_both_in_series() -> None:
    """Rank 2 starts backward 6 ms late and every all-reduce takes 9 ms instead of 2 (one host's
    NIC across the CPU sockets, its processes on the far NUMA node: both at once). The buckets'
    all-reduces queue behind each other, and the late start delays the whole queue: the two are in
    series, so the rerun without either saves more than either what-if alone, and the combined
    what-if saves what the rerun saves."""
    from stallscope.analysis.whatif import culprits_like_median_peer, culprits_like_peers_and_transfers_at, transfers_at

    tl = build_timeline(*_ddp(late_ns=6 * MS, transfer_ns=9 * MS))
    ref = build_timeline(*_ddp(transfer_ns=2 * MS))
    assert tl is not None and ref is not None
    assert abs(replay(tl) - tl.makespan) <= 1.0
    truth = (tl.makespan - ref.makespan) / tl.makespan
    fast = {p: float(2 * MS) for p in range(tl.n_instances)}
    late_only, transfers_only = culprits_like_median_peer(tl, [2]), transfers_at(tl, fast)
    assert max(late_only, transfers_only) < 0.85 * truth
    assert culprits_like_peers_and_transfers_at(tl, [2], fast) == pytest.approx(truth, rel=0.02)
    # without slow transfers the combined what-if is the late rank's alone
    only_late = build_timeline(*_ddp(late_ns=6 * MS))
    assert only_late is not None
    assert culprits_like_peers_and_transfers_at(only_late, [2], {}) == pytest.approx(culprits_like_median_peer(only_late, [2]))


def _two_level(*, slow_ns: int, steps: int = 4, cut_after: int | None = None, cut: tuple[int, ...] = (1,),
               local_rounds: int = 1, named: bool = False, undeclared: bool = False) -> tuple[pl.DataFrame, ...]:
    """Four ranks on two hosts (HSDP-like): each step every rank computes 10 ms (rank 0
    ``slow_ns`` more), all-reduces with its host-mate (1 ms once both are there), computes 1 ms,
    then all-reduces with its replica on the other host (3 ms), then 2 ms of optimizer. Rank 1,
    rank 0's host-mate, waits for rank 0 at the local all-reduce and so arrives late at its
    cross-host one, where rank 3 waits for it. ``cut_after``: the traces of the ranks in ``cut``
    end after that step (a killed rank): their later rows and steps are not recorded. ``local_rounds``: local
    all-reduces per step (with two, each rank's peer is its host-mate, not its replica). ``named``:
    channels named as traces with ``Process Group Ranks`` name them (``pg:<name>:<ranks>``); with
    ``cut_after=-1`` the ranks in ``cut`` left no trace at all. ``undeclared``: as traces without
    collective metadata give them, no group size and channels per NCCL stream and first rank."""
    compute, local, gap, cross, opt = 10 * MS, 1 * MS, 1 * MS, 3 * MS, 2 * MS
    groups = {"local": [(0, 1), (2, 3)], "cross": [(0, 2), (1, 3)]}
    members, instances, windows = [], [], []
    start = {r: 0 for r in range(4)}
    iid = 0
    for step in range(steps):
        arrive = {r: start[r] + compute + (slow_ns if r == 0 else 0) for r in range(4)}
        stage_end: dict[int, int] = {}
        for kind, dur in [("local", local)] * local_rounds + [("cross", cross)]:
            for g, ranks in enumerate(groups[kind]):
                end = max(arrive[r] for r in ranks) + dur
                rows = [{"instance_id": iid, "rank": r, "step": step, "arrival_ns": arrive[r], "end_ns": end}
                        for r in ranks if cut_after is None or r not in cut or step <= cut_after]
                members += rows
                instances.append({"instance_id": iid, "members": len(rows), "group_size": None if undeclared else len(ranks),
                                  "op": "allreduce",
                                  "scope": "intra" if kind == "local" else "inter", "bytes": 1 << 20 if kind == "local" else 1 << 24,
                                  "bus_factor": 1.0, "transfer_ns": end - max((m["arrival_ns"] for m in rows), default=end),
                                  "step": step,
                                  "channel": f"stream:{kind}#{ranks[0]}" if undeclared else
                                  f"pg:{kind}{g}:{','.join(map(str, ranks))}" if named else f"{kind}:{g}"})
                for r in ranks:
                    stage_end[r] = end
                iid += 1
            arrive = {r: stage_end[r] + gap for r in range(4)}
        for r in range(4):
            if cut_after is None or r not in cut or step <= cut_after:
                windows.append({"rank": r, "start_ns": start[r], "end_ns": stage_end[r] + opt})
            start[r] = stage_end[r] + opt
    return (pl.DataFrame(members), pl.DataFrame(instances, schema_overrides={"group_size": pl.Int64}), pl.DataFrame(windows),
            pl.DataFrame({"rank": [0, 1, 2, 3], "host": ["a", "a", "b", "b"]}))


def test_a_truncated_rank_still_passes_a_straggler_s_delay_on() -> None:
    """Rank 0 computes 4 ms slower every step; rank 1's trace ends after the first step. Rank 1
    still took part in every collective: rank 3's cross-host all-reduces waited for it (it waited
    for rank 0 first), which rank 3 records as a 7 ms "transfer". The absent member's rows put
    that waiting back, so the straggler's what-if gains what it gains in the complete recording
    (and the recording still replays to itself)."""
    from stallscope.analysis.whatif import culprits_like_median_peer

    full = build_timeline(*_two_level(slow_ns=4 * MS))
    cut = build_timeline(*_two_level(slow_ns=4 * MS, cut_after=0))
    assert full is not None and cut is not None
    assert abs(replay(cut) - cut.makespan) <= 1.0
    truth = culprits_like_median_peer(full, [0])
    assert truth == pytest.approx(4 * 4 * MS / full.makespan, rel=0.05)
    assert culprits_like_median_peer(cut, [0]) == pytest.approx(truth, rel=0.05)
    # the recorded rows alone leave rank 3's waiting as transfer no what-if moves
    members, instances, windows, hosts = _two_level(slow_ns=4 * MS, cut_after=0)
    blind = build_timeline(members, instances.drop("group_size"), windows, hosts)
    assert blind is not None and culprits_like_median_peer(blind, [0]) < 0.8 * truth
    # an absent member that was not waited for costs nothing: no straggler, nothing to gain
    calm = build_timeline(*_two_level(slow_ns=0, cut_after=0))
    assert calm is not None and culprits_like_median_peer(calm, [0]) == pytest.approx(0.0, abs=1e-6)
    # estimated rows (each came as soon as it could) are no one's pace: with a cut rank on each
    # host, role medians taken with them would halve every recorded rank's computation
    paired = build_timeline(*_two_level(slow_ns=0, cut_after=0, cut=(1, 3), local_rounds=2))
    assert paired is not None and everyone_like_median(paired) == pytest.approx(0.0, abs=1e-6)
    assert everyone_like_median(cut) == pytest.approx(everyone_like_median(full), abs=0.01)


def test_a_truncated_rank_without_collective_metadata_still_passes_a_straggler_s_delay_on() -> None:
    """As above, in traces without collective metadata (no group size; groups per NCCL stream and
    first rank): a group is as wide as its fullest instance, so the instances the cut rank missed
    still get its estimated rows (seed 28000 #0050: 22 % of a 45 % straggler before)."""
    from stallscope.analysis.whatif import culprits_like_median_peer

    full = build_timeline(*_two_level(slow_ns=4 * MS, undeclared=True))
    cut = build_timeline(*_two_level(slow_ns=4 * MS, cut_after=0, undeclared=True))
    assert full is not None and cut is not None
    assert abs(replay(cut) - cut.makespan) <= 1.0
    truth = culprits_like_median_peer(full, [0])
    assert truth == pytest.approx(4 * 4 * MS / full.makespan, rel=0.05)
    assert culprits_like_median_peer(cut, [0]) == pytest.approx(truth, rel=0.05)
    calm = build_timeline(*_two_level(slow_ns=0, cut_after=0, undeclared=True))
    assert calm is not None and culprits_like_median_peer(calm, [0]) == pytest.approx(0.0, abs=1e-6)


def test_a_rank_without_a_trace_still_passes_a_straggler_s_delay_on() -> None:
    """As above, but rank 1 left no trace at all: it is in none of its groups' instances, so
    nothing records when it was last seen. Its groups' ``Process Group Ranks`` still name it, so
    it gets estimated rows in every instance, and the straggler's what-if gains what it gains in
    the complete recording. Channels that name no ranks give nothing to estimate from."""
    from stallscope.analysis.whatif import culprits_like_median_peer

    full = build_timeline(*_two_level(slow_ns=4 * MS, named=True))
    gone = build_timeline(*_two_level(slow_ns=4 * MS, cut_after=-1, named=True))
    assert full is not None and gone is not None
    assert 1 in gone.ranks.tolist() and bool(gone.rank_cut[gone.ranks.tolist().index(1)])
    assert abs(replay(gone) - gone.makespan) <= 1.0
    truth = culprits_like_median_peer(full, [0])
    assert culprits_like_median_peer(gone, [0]) == pytest.approx(truth, rel=0.05)
    blind = build_timeline(*_two_level(slow_ns=4 * MS, cut_after=-1))
    assert blind is not None and culprits_like_median_peer(blind, [0]) < 0.8 * truth
    calm = build_timeline(*_two_level(slow_ns=0, cut_after=-1, named=True))
    assert calm is not None and culprits_like_median_peer(calm, [0]) == pytest.approx(0.0, abs=1e-6)


def test_a_rank_without_a_trace_or_group_ranks_is_placed_by_elimination() -> None:
    """Rank 1 left no trace and the traces carry no collective metadata (no group size, no
    ``Process Group Ranks``): nothing names its groups. Each family of channels (one NCCL stream,
    groups told apart by first rank) has one channel a member short, and rank 1 is the only rank
    of the world seen in none of them: it is that member, and the straggler's delay it passed on
    replays as in the complete recording (seed 32000 #0153: 0.5 % of a 20 % straggler before).
    Without the world size nothing says a rank is missing."""
    from stallscope.analysis.whatif import culprits_like_median_peer

    full = build_timeline(*_two_level(slow_ns=4 * MS, undeclared=True))
    assert full is not None
    truth = culprits_like_median_peer(full, [0])
    members, instances, windows, hosts = _two_level(slow_ns=4 * MS, cut_after=-1, undeclared=True)
    traced = hosts.filter(pl.col("rank") != 1)
    gone = build_timeline(members, instances, windows, traced, world=4)
    assert gone is not None and 1 in gone.ranks.tolist()
    assert abs(replay(gone) - gone.makespan) <= 1.0
    assert culprits_like_median_peer(gone, [0]) == pytest.approx(truth, rel=0.05)
    blind = build_timeline(members, instances, windows, traced)
    assert blind is not None and culprits_like_median_peer(blind, [0]) < 0.8 * truth
    calm = build_timeline(*_two_level(slow_ns=0, cut_after=-1, undeclared=True)[:3], traced, world=4)
    assert calm is not None and culprits_like_median_peer(calm, [0]) == pytest.approx(0.0, abs=1e-6)
    # two channels of a family short: which one lacks the rank cannot be told; left as seen
    from stallscope.analysis.whatif import _traceless_members

    chan = pl.DataFrame({"channel": ["stream:7#0", "stream:7#4"], "_set": [[0, 1, 2], [4, 5, 6]]})
    widths = pl.DataFrame({"channel": ["stream:7#0", "stream:7#4"], "group_size": [4, 4]})
    assert _traceless_members(chan, widths, [3, 7]).equals(chan)
    one = _traceless_members(chan, widths.with_columns(pl.Series("group_size", [3, 4])), [7])
    assert one["_set"].to_list() == [[0, 1, 2], [4, 5, 6, 7]]


def _hosts(*, slow_ns: int, n_hosts: int = 3, steps: int = 4, traceless: tuple[int, ...] = ()) -> tuple[pl.DataFrame, ...]:
    """``n_hosts`` hosts of two ranks (HSDP-like: rank 2h and 2h+1 on host h): each step every
    rank computes 10 ms (host 0's ranks ``slow_ns`` more: a slow host), all-reduces twice with
    its host-mate (1 ms once both are there: the host's group is each rank's role), then with the
    ranks of the same local index on every other host (3 ms), then 2 ms of optimizer. Channels name their ranks (``Process Group
    Ranks``); the ranks in ``traceless`` left no trace."""
    compute, local, cross, opt = 10 * MS, 1 * MS, 3 * MS, 2 * MS
    world = 2 * n_hosts
    groups = {"local": [(2 * h, 2 * h + 1) for h in range(n_hosts)],
              "cross": [tuple(range(i, world, 2)) for i in range(2)]}
    members, instances, windows = [], [], []
    start = {r: 0 for r in range(world)}
    iid = 0
    for step in range(steps):
        arrive = {r: start[r] + compute + (slow_ns if r < 2 else 0) for r in range(world)}
        for kind, dur in (("local", local), ("local", local), ("cross", cross)):
            ends: dict[int, int] = {}
            for g, ranks in enumerate(groups[kind]):
                end = max(arrive[r] for r in ranks) + dur
                rows = [{"instance_id": iid, "rank": r, "step": step, "arrival_ns": arrive[r], "end_ns": end}
                        for r in ranks if r not in traceless]
                members += rows
                instances.append({"instance_id": iid, "members": len(rows), "group_size": len(ranks), "op": "allreduce",
                                  "scope": "intra" if kind == "local" else "inter", "bytes": 1 << 24, "bus_factor": 1.0,
                                  "transfer_ns": end - max(m["arrival_ns"] for m in rows), "step": step,
                                  "channel": f"pg:{kind}{g}:{','.join(map(str, ranks))}"})
                ends.update({r: end for r in ranks})
                iid += 1
            arrive = ends
        for r in range(world):
            if r not in traceless:
                windows.append({"rank": r, "start_ns": start[r], "end_ns": arrive[r] + opt})
            start[r] = arrive[r] + opt
    return (pl.DataFrame(members), pl.DataFrame(instances, schema_overrides={"group_size": pl.Int64}), pl.DataFrame(windows),
            pl.DataFrame({"rank": [r for r in range(world) if r not in traceless],
                          "host": [f"h{r // 2}" for r in range(world) if r not in traceless]}))


def test_a_host_whose_only_peer_left_no_trace_replays_like_the_other_hosts() -> None:
    """Host 0's ranks both compute 4 ms slower; rank 1 left no trace. Rank 0 behaving like its
    peers: its own group's only other member has estimated rows only (they set no pace), so its
    pace is that of the other hosts' groups at the same point of the step, and the host's what-if
    gains what replaying both ranks gains in the complete recording (before: 0 %; found on seed
    33000 #0007, a whole host's shard group with one rank without a trace)."""
    from stallscope.analysis.whatif import culprits_like_median_peer

    full = build_timeline(*_hosts(slow_ns=4 * MS))
    assert full is not None
    truth = culprits_like_median_peer(full, [0, 1])
    assert truth == pytest.approx(4 * 4 * MS / full.makespan, rel=0.05)
    members, instances, windows, hosts = _hosts(slow_ns=4 * MS, traceless=(1,))
    gone = build_timeline(members, instances, windows, hosts, world=6)
    assert gone is not None and 1 in gone.ranks.tolist()
    assert culprits_like_median_peer(gone, [0]) == pytest.approx(truth, rel=0.05)
    calm = build_timeline(*_hosts(slow_ns=0, traceless=(1,)), world=6)
    assert calm is not None and culprits_like_median_peer(calm, [0]) == pytest.approx(0.0, abs=1e-6)


def test_an_absent_member_that_was_not_waited_for_arrives_no_later_than_the_median() -> None:
    """Rank 2's trace ends at 5 ms. Afterwards its tensor-parallel partner, rank 3, goes on with
    their all-reduces (rank 2 is absent there; one ends at 25 ms), while the data-parallel
    all-reduce of ranks 0, 1 and 2 waits for rank 1 (arrivals 10 and 30 ms, then 1 ms of transfer,
    as where every member was recorded: nobody waited for rank 2). Rank 2's latest end before
    that all-reduce is on the other stream; estimated there (25 ms) it would hold the all-reduce
    in any what-if that moves rank 1 earlier. It came no later than the present members' median."""
    from stallscope.analysis.whatif import absent_members

    rows = [  # (instance, rank, arrival, end)
        (0, 0, 1, 2), (0, 1, 1, 2), (0, 2, 1, 2),   # data-parallel, complete: 1 ms transfer
        (1, 2, 3, 5), (1, 3, 3, 5),                 # tensor-parallel, complete; rank 2's last record
        (2, 3, 24, 25),                             # tensor-parallel, rank 2 cut
        (3, 0, 10, 31), (3, 1, 30, 31),             # data-parallel, rank 2 cut, rank 1 late
    ]
    members = pl.DataFrame([{"instance_id": i, "rank": r, "step": 0, "arrival_ns": a * MS, "end_ns": e * MS} for i, r, a, e in rows],
                           schema_overrides={"rank": pl.Int32})
    chan = {0: "pg:dp:0,1,2", 1: "pg:tp:2,3", 2: "pg:tp:2,3", 3: "pg:dp:0,1,2"}
    size = {0: 3, 1: 2, 2: 2, 3: 3}
    instances = pl.DataFrame([{"instance_id": i, "channel": chan[i], "step": 0, "op": "allreduce", "bytes": 1 << (20 + size[i]),
                               "group_size": size[i], "members": sum(1 for x in rows if x[0] == i)} for i in range(4)])
    hosts = pl.DataFrame({"rank": [0, 1, 2, 3], "host": ["a", "b", "c", "c"]}, schema_overrides={"rank": pl.Int32})
    est = absent_members(members, instances, hosts).sort("instance_id")
    assert est["instance_id"].to_list() == [2, 3] and est["rank"].to_list() == [2, 2]
    assert est["arrival_ns"].to_list() == [5 * MS, 20 * MS]  # after its own last end; then the median of 10 and 30, not 25


def test_a_pair_whose_other_end_left_no_trace_gets_a_row_for_it() -> None:
    """Rank 5 left no trace. Rank 1 sends to it and receives from it (``p2p:1->5``,
    ``p2p:5->1``), each instance with rank 1 alone; the pairs 0-4 were recorded whole, 2 ms of
    transfer. Rank 1's send took as long as theirs (rank 5 was there: estimated no later than
    rank 1), its receive 6 ms (rank 5 came last, its arrival the reference before the end). A
    traced rank whose row is missing from one pair (an unmatched row) gets none."""
    from stallscope.analysis.whatif import absent_members

    rows = [  # (instance, rank, arrival, end)
        (0, 0, 1, 3), (0, 4, 1, 3),    # p2p:0->4, both ends: 2 ms
        (1, 4, 4, 6), (1, 0, 4, 6),    # p2p:4->0, both ends: 2 ms
        (2, 1, 1, 3),                  # p2p:1->5, rank 5 without a trace, on time
        (3, 1, 4, 10),                 # p2p:5->1, rank 5 late: 4 ms of waiting
        (4, 2, 1, 9),                  # p2p:2->6, rank 6 traced: an unmatched row
        (5, 6, 12, 13), (5, 2, 12, 13),
    ]
    members = pl.DataFrame([{"instance_id": i, "rank": r, "step": 0, "arrival_ns": a * MS, "end_ns": e * MS} for i, r, a, e in rows],
                           schema_overrides={"rank": pl.Int32})
    chan = {0: "p2p:0->4", 1: "p2p:4->0", 2: "p2p:1->5", 3: "p2p:5->1", 4: "p2p:2->6", 5: "p2p:6->2"}
    op = {0: "send", 1: "send", 2: "send", 3: "send", 4: "send", 5: "send"}
    # a pair's declared group size is its process group's (here the pipeline's 8 ranks), never 2
    instances = pl.DataFrame([{"instance_id": i, "channel": chan[i], "step": 0, "op": op[i], "bytes": 1 << 24, "group_size": 8,
                               "members": sum(1 for x in rows if x[0] == i), "last_rank": max(x[1] for x in rows if x[0] == i)}
                              for i in range(6)], schema_overrides={"last_rank": pl.Int32})
    hosts = pl.DataFrame({"rank": [0, 1, 2, 4, 6], "host": ["a", "a", "a", "b", "b"]}, schema_overrides={"rank": pl.Int32})
    est = absent_members(members, instances, hosts, world=8).sort("instance_id")
    assert est["instance_id"].to_list() == [2, 3] and est["rank"].to_list() == [5, 5]
    assert est["arrival_ns"].to_list() == [1 * MS, 8 * MS]
