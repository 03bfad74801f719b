"""What-if replay: how much shorter would the job have been without a given cause?

Each rank's profiled time is a set of **synchronization points** — the multi-member collective
instances (and point-to-point pairs) it took part in. Each one has an **anchor**: the rank's own
synchronization that most recently *ended* before it started (its stream predecessor, or the
collective whose data it needed), and a **gap** — the rank's own work between the anchor's end
and its arrival (compute, host stalls, launches). A synchronization completes when its last
member arrives plus the time to move the bytes:

    arrival[r, i] = end[r, anchor(r, i)] + gap[r, i]
    end[r, i]     = max_m arrival[m, i] + transfer[r, i]

Anchoring on the last *completed* predecessor (not simply the previous one) keeps concurrency
right: two buckets in flight on different streams, a pipeline send overlapping the next
receive, or a collective queued on a busy NCCL stream all replay as they ran.

A member that sat **queued** (it started the moment its anchor ended, although its inputs were
ready earlier: ``ready_ns`` in ``collective_members``) is not pulled earlier than its readiness
when its anchor moves: ``arrival = max(anchor end + gap, ready + the rank's own shift)``, where the
shift is how much the rank's computation has moved so far: by its own arrivals that were
not queued, and by the end of every collective its computation waited for (``gates_compute``:
FSDP's forward waits for its all-gather, the optimizer for the last bucket). This keeps hidden
communication hidden when a what-if speeds transfers up (a bucket cannot start before its
gradients exist), and lets a straggler's delay reach computation that waited for it.

A member whose anchor's end the rank **computed through** (``compute_overlaps_end``: DDP's
gradient buckets under backward) is paced by the rank's own computation instead: its gap is the
time since the rank's previous arrival that was not queued (a queued arrival is its stream's: FSDP
queues each all-gather prefetch right behind a reduce-scatter), ``arrival = max(previous arrival +
gap, anchor end)`` (see :func:`_paced_rows`).

Replaying the recorded gaps and transfers reproduces the recorded timeline exactly (a tested
identity). A *scenario* changes gaps or transfers — the culprit ranks behave like their median
**peer** (ranks doing the same work: the members of their most frequent synchronous group; for
a pipeline rank, its data-parallel replicas, not its pipeline partner) at the same step and
synchronization (in a pipeline: of the same kind, see :func:`_slots`), depending on what they
depend on (:func:`_anchors_like_peers`); every rank behaves like the median of its peers (no jitter); the
transfers of some instances run at a reference bandwidth — and the replay propagates the change
through every later synchronization of every rank. The lost fraction is ``(T - T') / T`` with
``T`` the recorded makespan (first step start to last step end, less the time between profiling
windows that no rank's step covers: :func:`unprofiled_ns`).

A member whose trace ended before a collective (a killed rank) still took part in it: it gets
an estimated row there (:func:`absent_members`), so the waiting for it is not frozen into the
present members' transfers.

This is a model, not a simulator: it ignores how a change would move work between streams
inside a rank. It reports how much of the recorded waiting and transfer time a cause is
responsible for; it never guesses a fixed percentage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import polars as pl

#: a predecessor that ended this little after an arrival still counts: µs-rounded timestamps, and
#: the members of one collective end a few µs apart, so the next collective queued behind it on
#: another stream (FSDP's all-gathers) can start on a rank just before that rank's copy ends (3 µs
#: on seed 22000 #0189, where 2 µs anchored the queued all-gather on the step before and turned a
#: 0.58 s stall of one rank into its three peers' own work)
ANCHOR_TOLERANCE_NS = 10_000


@dataclass
class Timeline:
    """The recorded synchronizations, ready to replay (built once per job)."""

    ranks: np.ndarray            #: rank ids
    start: np.ndarray            #: per rank: first step start (aligned ns)
    end: np.ndarray              #: per rank: last step end (aligned ns)
    inst_ids: np.ndarray         #: instance ids in processing order
    inst_rows: list[np.ndarray]  #: per instance: its member rows (indexes into ``chain``)
    row_rank_idx: np.ndarray     #: per row: index of its rank
    row_anchor: np.ndarray       #: per row: anchor row, or -1 (anchored on the rank's start)
    row_gap: np.ndarray          #: per row: gap (ns) between the anchor's end and the arrival
    row_transfer: np.ndarray     #: per row: own end - last arrival of its instance (ns)
    row_end: np.ndarray          #: per row: recorded end (ns)
    row_arrival: np.ndarray      #: per row: recorded arrival (ns)
    row_ready: np.ndarray        #: per row: recorded readiness for queued rows, NaN otherwise (ns)
    row_gates: np.ndarray        #: per row: the rank's computation waited for this synchronization
    row_overlaps: np.ndarray     #: per row: the rank's GPU computed through its end (did not sit waiting for it)
    #: per row: the rank's previous row (by arrival) its arrival is paced from, or -1 (paced from
    #: its anchor's end); for such rows ``row_gap`` is the time since that row's arrival
    row_prev: np.ndarray
    #: per row: the previous row its arrival could be paced from by its own rank alone (the rank
    #: computed through its anchor's end, neither row queued), whether or not the rest of its
    #: instance is; -1 otherwise. Transfer what-ifs pace from it (:func:`waited_anchors`)
    row_own_prev: np.ndarray
    tail_row: np.ndarray         #: per rank: its row that ended last, or -1
    tail: np.ndarray             #: per rank: last step end - end of tail_row (or - start)
    makespan: float              #: recorded T (ns)
    attrs: pl.DataFrame          #: per instance (by position): instance_id, op, scope, bytes, bus_factor, transfer_ns, step, channel
    chain: pl.DataFrame          #: per row: row, pos, rank, gap, step, ordinal, role, op, absent
    tail_role: np.ndarray        #: per rank: its role
    #: per rank: its trace ended early and it has estimated rows (:func:`absent_members`); its
    #: gaps and tail are no measure of its peers' pace
    rank_cut: np.ndarray

    @property
    def n_instances(self) -> int:
        return len(self.inst_ids)

    @property
    def pipelined(self) -> bool:
        """Whether the job has point-to-point synchronizations (pipeline stages): its ranks do
        different work by stage, and only a stage's replicas are alike."""
        from stallscope.analysis.collectives import P2P_OPS

        return bool(self.attrs["op"].is_in(P2P_OPS).any())

    @cached_property
    def waited(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Anchors, gaps and pacing rows for what-ifs that change transfers (:func:`waited_anchors`)."""
        return waited_anchors(self)

    @cached_property
    def estimated(self) -> dict[int, float]:
        """Per position of an instance with a member's row estimated (:func:`absent_members`): its
        transfer as replayed (the median over its rows). The recorded members' own "transfer" there
        may be waiting for the absent one; the estimate of its arrival turned that into waiting,
        and what is left is the time to move the bytes."""
        rows = self.chain.filter(pl.col("absent"))
        if rows.height == 0:
            return {}
        return {int(p): float(np.median(self.row_transfer[self.inst_rows[int(p)]])) for p in rows["pos"].unique().to_list()}

    @property
    def synchronous(self) -> np.ndarray:
        """Per position: a synchronous collective (a receive's gap before its send is a pipeline
        dependency, not lateness)."""
        from stallscope.analysis.collectives import SYNCHRONOUS_OPS

        return self.attrs["op"].is_in(SYNCHRONOUS_OPS).to_numpy()


def _queued_on_stream(m: pl.DataFrame, instances: pl.DataFrame, anc: pl.DataFrame) -> pl.DataFrame:
    """``anc`` (row, anchor) with a row that arrived as the rank's previous collective of the same
    communicator ended (within ``ANCHOR_TOLERANCE_NS``) anchored on that one.

    A communicator's collectives run in order on its stream: one that arrives the moment its
    predecessor ends was queued behind it. The latest end before an arrival is usually that
    predecessor, but another stream's collective can end within the same microseconds, and then
    the anchor is a coincidence the replay keeps: when the predecessor moves, the row stays
    pinned to the other stream. Seed 42000 #0138: a tensor-parallel all-reduce ended 5.5 µs after
    a data-parallel all-reduce started behind its predecessor; anchored there, the data-parallel
    chain of every rank stayed where a 17 ms DataLoader stall had put it, and replaying the
    stalled rank recovered 0.06 % of the job instead of the 3.0 % it cost."""
    if "channel" not in instances.columns:
        return anc
    same = (m.select("row", "rank", "instance_id", "arrival_ns", "end_ns")
            .join(instances.select("instance_id", "channel"), on="instance_id", how="left")
            .filter(pl.col("channel").is_not_null())
            .sort("rank", "channel", "arrival_ns", "row")
            .with_columns(pl.col("row").shift(1).over("rank", "channel").alias("_pred"),
                          pl.col("end_ns").shift(1).over("rank", "channel").alias("_pend"))
            .filter(pl.col("_pred").is_not_null() & (pl.col("_pred") < pl.col("row"))
                    & ((pl.col("arrival_ns") - pl.col("_pend")).abs() <= ANCHOR_TOLERANCE_NS))
            .select("row", pl.col("_pred").cast(pl.Int64).alias("_queued")))
    if same.height == 0:
        return anc
    return (anc.join(same, on="row", how="left")
            .with_columns(pl.coalesce("_queued", "anchor").alias("anchor")).drop("_queued"))


def build_timeline(members: pl.DataFrame, instances: pl.DataFrame, windows: pl.DataFrame,
                   hosts: pl.DataFrame, *, world: int | None = None) -> Timeline | None:
    """Synchronizations from ``collective_members`` (aligned), ``collective_instances``,
    ``step_breakdown`` windows (rank, start_ns, end_ns); ``hosts`` (rank, host) lists the ranks
    with a trace, ``world`` the job's size (for ranks that left none). None when there is nothing
    to replay."""
    if windows.height == 0:
        return None
    span = windows.group_by("rank").agg(pl.col("start_ns").min().alias("s"), pl.col("end_ns").max().alias("e"))
    absent = absent_members(members, instances, hosts, world=world)
    if absent.height:
        members = pl.concat([members, absent], how="diagonal_relaxed")
        span = _spans_with_absent(span, members, absent)
    span = span.sort("rank")
    # times relative to the first step start: epoch nanoseconds (~1.7e18) exceed float64's exact range
    origin = int(span["s"].min())  # type: ignore[arg-type]
    span = span.with_columns(pl.col("s") - origin, pl.col("e") - origin)
    ranks = span["rank"].to_numpy()
    idx_of = {int(r): i for i, r in enumerate(ranks)}
    start = span["s"].to_numpy().astype(np.float64)
    end = span["e"].to_numpy().astype(np.float64)
    with_absent = pl.col("instance_id").is_in(absent["instance_id"].implode())
    multi = instances.filter((pl.col("members") > 1) | with_absent).select("instance_id")
    m = members.join(multi, on="instance_id").filter(pl.col("rank").is_in(list(idx_of)))
    # members outside the rank's profiled span are not part of its timeline
    m = m.with_columns(*(pl.col(c) - origin for c in ("arrival_ns", "end_ns", "ready_ns") if c in m.columns))
    m = m.join(span.rename({"s": "_s", "e": "_e"}), on="rank").filter(
        (pl.col("arrival_ns") >= pl.col("_s")) & (pl.col("arrival_ns") <= pl.col("_e")))
    full = m.group_by("instance_id").agg(pl.len().alias("_n")).filter(pl.col("_n") > 1)
    m = m.join(full.select("instance_id"), on="instance_id")
    if m.height == 0:
        return None  # no synchronization with two members inside the profiled spans
    m = m.with_columns(pl.col("arrival_ns").max().over("instance_id").alias("_last"))
    m = m.sort(["_last", "instance_id", "rank"]).with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))
    # anchor: the rank's row with the latest end <= arrival (+ tolerance), not itself
    ends = m.select("rank", pl.col("end_ns").alias("_aend"), pl.col("row").alias("anchor")).sort("_aend")
    probe = m.select("row", "rank", (pl.col("arrival_ns") + ANCHOR_TOLERANCE_NS).alias("_probe")).sort("_probe")
    anc = probe.join_asof(ends, left_on="_probe", right_on="_aend", by="rank", strategy="backward", check_sortedness=False)
    if "anchor_tol_ns" in m.columns and m["anchor_tol_ns"].is_not_null().any():
        # an absent member's estimated arrival: the anchor may end a little after it, if replayed before it
        loose = (m.filter(pl.col("anchor_tol_ns").is_not_null())
                 .select("row", "rank", (pl.col("arrival_ns") + pl.col("anchor_tol_ns")).alias("_probe")).sort("_probe")
                 .join_asof(ends, left_on="_probe", right_on="_aend", by="rank", strategy="backward", check_sortedness=False)
                 .filter(pl.col("anchor") < pl.col("row")).select("row", pl.col("anchor").alias("_loose")))
        anc = anc.join(loose, on="row", how="left").with_columns(pl.coalesce("_loose", "anchor").alias("anchor")).drop("_loose")
    # a row that ends within the tolerance of its own arrival (an all-to-all of a few µs) finds
    # itself: its anchor is then the rank's latest *other* end up to its own
    own = anc.filter(pl.col("anchor") == pl.col("row")).select("row")
    if own.height:
        again = (m.join(own, on="row").select("row", "rank", (pl.col("end_ns") - 1).alias("_probe")).sort("_probe")
                 .join_asof(ends, left_on="_probe", right_on="_aend", by="rank", strategy="backward", check_sortedness=False)
                 .select("row", pl.col("anchor").alias("_again")))
        anc = anc.join(again, on="row", how="left").with_columns(
            pl.when(pl.col("anchor") == pl.col("row")).then(pl.col("_again")).otherwise(pl.col("anchor")).alias("anchor"))
    anc = anc.with_columns(pl.when(pl.col("anchor") == pl.col("row")).then(None).otherwise(pl.col("anchor")).alias("anchor"))
    anc = _queued_on_stream(m, instances, anc)
    m = m.join(anc.select("row", "anchor"), on="row", how="left").sort("row")
    anchor = m["anchor"].fill_null(-1).to_numpy().astype(np.int64)
    arrival = m["arrival_ns"].to_numpy().astype(np.float64)
    row_end = m["end_ns"].to_numpy().astype(np.float64)
    row_rank_idx = np.array([idx_of[int(r)] for r in m["rank"].to_list()], dtype=np.int64)
    base = np.where(anchor >= 0, row_end[np.maximum(anchor, 0)], start[row_rank_idx])
    gap = arrival - base
    transfer = row_end - m["_last"].to_numpy().astype(np.float64)
    if "ready_ns" in m.columns:
        ready = m["ready_ns"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    else:
        ready = np.full(len(arrival), np.nan)
    gates = m["gates_compute"].fill_null(False).to_numpy() if "gates_compute" in m.columns else np.zeros(len(arrival), dtype=bool)
    queued = (anchor >= 0) & (gap <= ANCHOR_TOLERANCE_NS) & np.isfinite(ready) & (ready < arrival - ANCHOR_TOLERANCE_NS)
    row_ready = np.where(queued, ready, np.nan)
    overlaps = (m["compute_overlaps_end"].fill_null(False).to_numpy() if "compute_overlaps_end" in m.columns
                else np.zeros(len(arrival), dtype=bool))
    # the rank's previous arrival that was not queued (a queued row's arrival is its stream's, not
    # its computation's: FSDP's backward queues each all-gather prefetch right behind the
    # reduce-scatter before it, and the next reduce-scatter is paced from the one before)
    by_arrival = m.sort("rank", "arrival_ns", "row")
    prev = (by_arrival.with_columns(pl.Series("_q", queued[by_arrival["row"].to_numpy()]))
            .with_columns(pl.when(~pl.col("_q")).then(pl.col("row")).alias("_own"))
            .with_columns(pl.col("_own").shift(1).forward_fill().over("rank").alias("_prev")).sort("row"))
    prev_row = prev["_prev"].fill_null(-1).to_numpy().astype(np.int64)
    # tails: from each rank's latest end to its last step end
    tail_row = np.full(len(ranks), -1, dtype=np.int64)
    tail = end - start
    last_rows = m.group_by("rank").agg(pl.col("row").sort_by("end_ns").last())
    for r, row in zip(last_rows["rank"].to_list(), last_rows["row"].to_list()):
        i = idx_of[int(r)]
        tail_row[i] = int(row)
        tail[i] = end[i] - row_end[int(row)]
    inst = m.group_by("instance_id", maintain_order=True).agg(pl.col("row"))
    inst_ids = inst["instance_id"].to_numpy()
    inst_rows = [np.asarray(rs, dtype=np.int64) for rs in inst["row"].to_list()]
    attrs = (pl.DataFrame({"instance_id": inst_ids}).with_row_index("pos")
             .join(instances.select("instance_id", "op", "scope", "bytes", "bus_factor", "transfer_ns", "step", "channel"),
                   on="instance_id", how="left").sort("pos"))
    pos_of = dict(zip(inst_ids.tolist(), range(len(inst_ids))))
    absent_row = m["absent"].fill_null(False).to_numpy() if "absent" in m.columns else np.zeros(len(arrival), dtype=bool)
    rank_cut = np.isin(ranks, np.unique(m["rank"].to_numpy()[absent_row]))
    chain = m.select("row", "instance_id", "rank", "step", "arrival_ns").with_columns(
        pl.col("instance_id").replace_strict(pos_of).alias("pos"), pl.Series("gap", gap), pl.Series("absent", absent_row))
    chain, tail_role = _roles(chain, attrs, ranks)
    pos = chain["pos"].to_numpy().astype(np.int64)
    # the latest end of a collective the rank's computation waited for, before each arrival: pacing
    # from the previous arrival skips it unless it ended before that arrival
    gate_end = (m.filter(pl.Series(gates)).select("rank", pl.col("end_ns").cast(pl.Float64).alias("_ge")).sort("_ge"))
    probe_g = m.select("row", "rank", pl.col("arrival_ns").cast(pl.Float64).alias("_a")).sort("_a")
    last_gate = (probe_g.join_asof(gate_end, left_on="_a", right_on="_ge", by="rank", strategy="backward", check_sortedness=False)
                 .sort("row")["_ge"].fill_null(-np.inf).to_numpy())
    own_paced = _own_paced(anchor, prev_row, queued, gates, overlaps, pos)
    paced = _paced_rows(chain, own_paced)
    after_gate = last_gate <= arrival[np.maximum(prev_row, 0)]
    paced &= after_gate
    own_paced &= after_gate
    row_prev = np.where(paced, prev_row, -1)
    gap = np.where(paced, arrival - arrival[np.maximum(prev_row, 0)], gap)
    chain = chain.with_columns(pl.Series("gap", gap))
    return Timeline(ranks=ranks, start=start, end=end, inst_ids=inst_ids, inst_rows=inst_rows, row_rank_idx=row_rank_idx,
                    row_anchor=anchor, row_gap=gap, row_transfer=transfer, row_end=row_end, row_arrival=arrival,
                    row_ready=row_ready, row_gates=gates, row_overlaps=overlaps, row_prev=row_prev,
                    row_own_prev=np.where(own_paced, prev_row, -1), tail_row=tail_row, tail=tail,
                    makespan=float(end.max() - start.min()) - unprofiled_ns(windows), attrs=attrs, chain=chain,
                    tail_role=tail_role, rank_cut=rank_cut)


def unprofiled_ns(windows: pl.DataFrame) -> float:
    """Time between profiling windows that no rank's step covers (``step_breakdown`` windows:
    rank, start_ns, end_ns). ``torch.profiler.schedule`` with ``repeat`` records a few steps,
    skips some, records again: what happened in between was not seen, so it is no part of the
    makespan the lost fractions divide by (each window's time is). 0 for one window.

    >>> unprofiled_ns(pl.DataFrame({"start_ns": [0, 10, 50, 60], "end_ns": [10, 20, 60, 70]}))
    30.0
    """
    iv = windows.select("start_ns", "end_ns").sort("start_ns")
    holes = iv.select((pl.col("start_ns") - pl.col("end_ns").cum_max().shift(1)).clip(lower_bound=0).sum())
    return float(holes.item() or 0)


def absent_members(members: pl.DataFrame, instances: pl.DataFrame, hosts: pl.DataFrame, *,
                   world: int | None = None) -> pl.DataFrame:
    """Rows for members whose traces ended before the collective (a killed rank, a trace cut
    mid-write), or that left no trace at all (a file lost): the collective still waited for them.

    A truncated rank is in every collective of its communicators after the cut, but its trace
    holds none of them, so each such instance shows fewer members than its group. Its present
    members recorded their own arrivals and ends: the end came when the last member arrived plus
    the time to move the bytes, so what they record as "transfer" beyond what the same collective
    took where every member was recorded (same op, size and group size: the median transfer of
    complete instances) is waiting for the absent member. Left out, that waiting is fixed transfer
    time that no what-if can move, and a straggler whose delay reaches a truncated rank's
    collectives through its own group replays as if nobody waited for it (seed 25000 #0207:
    rank 7 slow, rank 5 of its host cut, rank 5's replicas waited for it every step; 0.7 % of a
    34 % straggler, 29 % with these rows, 34.4 % from the same job untruncated).

    Each absent member gets a row that ends with the instance (``end_ns``, the members' median).
    When the present members' transfer exceeds the reference by more than ``ABSENT_EXCESS`` it
    came last, ``reference`` before the end; its anchor is then the latest own collective,
    replayed before it, that ended up to ``ABSENT_EXCESS`` of the reference after that estimate
    (``anchor_tol_ns``: the estimate is as good as the reference; #0207's was 0.15 ms before its
    own reduce-scatter ended, and anchored on the all-reduce before it missed the straggler's
    delay). Otherwise no record says when it came, only that it was not last: it is taken to
    have arrived as soon as its own previous collective ended (before its first row, at the
    earliest arrival of any member), and no later than the present members' median arrival, so it
    never holds a what-if back that its own anchors do not. Its latest end may be on another
    stream that kept working while this collective waited: a tensor-parallel pair's all-reduces go
    on while the data-parallel gradient all-reduce waits for a straggler's replica, and an arrival
    at their end held that all-reduce in every what-if of the straggler (seed 38000 #0108: rank 5's
    stall in the step rank 6 was cut replayed for 0.25 %, 2.0 % from the same job untruncated;
    now 2.0 %). Not a copy of the last present member's arrival: in a straggler's own group the
    last present member is the straggler, and an absent member that copied it would be a second
    straggler no what-if of the first removes.

    Its arrivals are then replayed like any rank's, anchored on its own previous collectives (its
    other communicators' instances, where the straggler holds it), so a what-if that speeds the
    straggler moves it too. They are no measure of anyone's pace: the medians that what-ifs give
    culprits (their peers') and every rank (its role's) leave them out, and a cut rank's tail.
    Only members of the communicator (the ranks seen in it, or those its ``Process Group Ranks``
    name: a rank without a trace is seen nowhere), when the set is as large as the group, and only
    instances after their last recorded end (any instance, for a rank with none) get a row. A rank
    without a trace has no host in the bundle and no steps: its rows are its whole timeline,
    no measure of anyone; without ``Process Group Ranks`` it is placed by elimination
    (:func:`_traceless_members`, given ``world``). A point-to-point pair with one end recorded
    gets a row for the other end, which its channel names, where that rank left no trace or its
    trace had ended (its reference: the pairs of the same op and size where both ends were
    recorded; seed 40000 #0050: rank 5's trace lost, rank 1's sends to it and receives from it
    were its own work in every replay, and kept rank 1 as slow in each what-if of the fabric:
    0.2 % of a 9.7 % socket fallback). Instances of a group of unknown width are left as
    recorded; traces without collective
    metadata declare no group size, and a group is then as wide as its family's fullest instance
    (:func:`stallscope.analysis.collectives.group_width`: seed 28000 #0050, a compute straggler's
    delay reached a cut rank's replica partner, replayed as its fixed "transfer" in the step the
    rank was cut: 22 % of 45 %). (Per-instance arrivals and ends are taken from ``members``, not
    ``instances``, so hand-built tables need only the group size.)"""
    from stallscope.analysis.collectives import (ABSENT_EXCESS, P2P_OPS, REFERENCE_KEY, complete_reference,
                                                 declared_ranks, group_width, held_back, p2p_partner)

    empty = members.clear()
    if "group_size" not in instances.columns or members.height == 0:
        return empty
    if {"channel", "members", "op"} <= set(instances.columns):
        instances = instances.with_columns(pl.coalesce(pl.col("group_size"), group_width()).alias("group_size"))
    inst = instances.filter(pl.col("group_size").is_not_null() & (pl.col("members") < pl.col("group_size"))
                            & ~pl.col("op").is_in(P2P_OPS))
    pairs = (instances.filter(pl.col("op").is_in(P2P_OPS) & (pl.col("members") == 1))
             if {"channel", "last_rank"} <= set(instances.columns) else instances.clear())
    if inst.height == 0 and pairs.height == 0:
        return empty
    mc = members.select("instance_id", "rank", "end_ns").join(instances.select("instance_id", "channel"), on="instance_id")
    # the channel's members: those recorded in it, and those its Process Group Ranks name (a rank
    # that left no trace at all is in none of its instances)
    named = (instances.select("channel", "group_size").unique("channel")
             .with_columns(declared_ranks().alias("_named"))
             .filter(pl.col("_named").list.len() == pl.col("group_size")).select("channel", "_named"))
    chan = (mc.group_by("channel").agg(pl.col("rank").unique().alias("_set"))
            .join(named, on="channel", how="left")
            .with_columns(pl.when(pl.col("_named").is_not_null() & (pl.col("_set").list.set_difference("_named").list.len() == 0))
                          .then(pl.col("_named").cast(pl.List(mc.schema["rank"]))).otherwise(pl.col("_set")).alias("_set"))
            .drop("_named"))
    if world:
        traceless = sorted(set(range(world)) - set(hosts["rank"].cast(pl.Int64).to_list()))
        if traceless:
            chan = _traceless_members(chan, instances.select("channel", "group_size").unique("channel"), traceless)
    chan = chan.filter(pl.col("_set").list.len() > 1)
    # when each rank was last seen; one that left no collective at all, never (every instance is after it)
    seen = mc.group_by("rank").agg(pl.col("end_ns").max().alias("_seen"))
    present = (members.group_by("instance_id")
               .agg(pl.col("rank").alias("_present"), pl.col("arrival_ns").min().alias("_first"),
                    pl.col("arrival_ns").max().alias("_last"), pl.col("arrival_ns").median().cast(pl.Int64).alias("_mid"),
                    pl.col("end_ns").median().cast(pl.Int64).alias("_end"))
               .with_columns((pl.col("_end") - pl.col("_last")).alias("_transfer")))
    kind = instances.select("instance_id", "op", "bytes", "group_size")
    ref = complete_reference(present.join(kind, on="instance_id"), "_transfer",
                             pl.col("_present").list.len() == pl.col("group_size"))
    miss = (inst.select("instance_id", "channel", "step", "op", "bytes", "group_size")
            .join(chan, on="channel").join(present, on="instance_id")
            .filter(pl.col("_set").list.len() == pl.col("group_size"))
            .with_columns(pl.col("_set").list.set_difference("_present").alias("rank"))
            .explode("rank").drop_nulls("rank")
            .with_columns(pl.col("rank").cast(members.schema["rank"])))
    miss = miss.join(ref, on=list(REFERENCE_KEY), how="left", nulls_equal=True).drop("_set")
    if pairs.height:
        # a pair with one end recorded: the other end, which the channel names, gets a row where
        # it left no trace, or its trace ended before (below). Its reference: the pairs of the
        # same op and size where both ends were recorded (a pair's declared group size is its
        # process group's, the pipeline's or the world's: two members make it whole)
        both = present.join(kind, on="instance_id").filter(pl.col("op").is_in(P2P_OPS))
        pref = (both.filter((pl.col("_present").list.len() == 2) & (pl.col("_transfer") > 0))
                .group_by("op", "bytes").agg(pl.col("_transfer").median().alias("_ref")))
        other = (pairs.with_columns(p2p_partner().alias("rank")).drop_nulls("rank")
                 .select("instance_id", "channel", "step", "op", "bytes", "group_size", pl.col("rank").cast(members.schema["rank"]))
                 .join(present, on="instance_id").join(pref, on=["op", "bytes"], how="left", nulls_equal=True))
        miss = pl.concat([miss, other], how="diagonal_relaxed")
    miss = (miss.join(seen, on="rank", how="left")
            .filter(pl.col("_seen").is_null() | (pl.col("_first") > pl.col("_seen")))  # after its trace ended: not a matching gap
            .with_columns(held_back("_transfer").alias("_late")))
    if miss.height == 0:
        return empty
    # its own previous end: the latest end of its rows (recorded, or absent: the instance's end)
    # before the last present member arrived
    ends = pl.concat([members.select("rank", pl.col("end_ns").alias("_prev_end")),
                      miss.select("rank", pl.col("_end").alias("_prev_end"))]).sort("_prev_end")
    miss = (miss.sort("_last")
            .join_asof(ends, left_on="_last", right_on="_prev_end", by="rank", strategy="backward", check_sortedness=False))
    arrival = (pl.when(pl.col("_late")).then(pl.col("_end") - pl.col("_ref").cast(pl.Int64))
               # before its first row: as soon as anyone (a rank without a trace has no start of its own);
               # never after the present members' median arrival: its latest end may be on another
               # stream that kept working while this collective waited (a TP pair's all-reduces go on
               # while the data-parallel gradient all-reduce waits for a straggler's replica)
               .otherwise(pl.min_horizontal(pl.coalesce(pl.col("_prev_end"), pl.lit(members["arrival_ns"].min())),
                                            pl.col("_mid")).cast(pl.Int64)))
    tol = pl.when(pl.col("_late")).then((pl.col("_ref") * ABSENT_EXCESS).cast(pl.Int64))
    rows = miss.select("instance_id", "rank", "step", arrival.alias("arrival_ns"), pl.col("_end").alias("end_ns"),
                       tol.alias("anchor_tol_ns")).join(
        hosts.select(pl.col("rank").cast(members.schema["rank"]), "host"), on="rank", how="left")
    return pl.concat([empty, rows.with_columns(pl.lit(False).alias("gates_compute"), pl.lit(False).alias("compute_overlaps_end"),
                                               pl.lit(True).alias("absent"))], how="diagonal_relaxed")


def _traceless_members(chan: pl.DataFrame, widths: pl.DataFrame, traceless: list[int]) -> pl.DataFrame:
    """Put the ranks that left no trace into the one channel of a family that lacks members.

    Without ``Process Group Ranks`` a channel's members are the ranks seen in it, and a rank
    without a trace is seen nowhere. But groups of one family (``stream:<id>#<first rank>``: the
    same communicator of the same program on different ranks; a ``pg:`` channel is a family of
    its own) partition their ranks, so when exactly one of the family's channels is short of its
    width, by as many ranks as there are traceless ranks seen in none of the family's channels,
    those are its missing members (seed 32000 #0153: rank 7 lost, its tensor-parallel group 4-6
    one short, its data-parallel pair with rank 3 alone; rank 4's compute straggling reached
    rank 3 through rank 7 and replayed as nobody waiting: 0.5 % of 20 %). Several short
    channels cannot be told apart: left as seen."""
    x = (chan.join(widths, on="channel", how="left")
         .with_columns(pl.col("channel").str.replace(r"#[0-9]+$", "").alias("_fam"),
                       (pl.col("group_size") - pl.col("_set").list.len()).alias("_short")))
    fill: dict[str, list[int]] = {}
    for (_fam,), g in x.group_by("_fam"):
        short = g.filter(pl.col("_short") > 0)
        if short.height != 1:
            continue
        seen = {int(r) for rs in g["_set"].to_list() for r in rs}
        cand = [r for r in traceless if r not in seen]
        if cand and len(cand) == int(short["_short"][0]):
            fill[str(short["channel"][0])] = cand
    if not fill:
        return chan
    dtype = chan.schema["_set"]
    extra = pl.DataFrame({"channel": list(fill), "_extra": list(fill.values())}).with_columns(pl.col("_extra").cast(dtype))
    return (chan.join(extra, on="channel", how="left")
            .with_columns(pl.when(pl.col("_extra").is_not_null()).then(pl.concat_list("_set", "_extra")).otherwise(pl.col("_set"))
                          .alias("_set")).drop("_extra"))


def _spans_with_absent(span: pl.DataFrame, members: pl.DataFrame, absent: pl.DataFrame) -> pl.DataFrame:
    """Profiled spans reaching each absent member's last row: a truncated rank without a complete
    step starts at its first recorded arrival; one with steps keeps its start."""
    reach = (members.join(absent.select("rank").unique(), on="rank")
             .group_by("rank").agg(pl.col("arrival_ns").min().alias("_a"), pl.col("end_ns").max().alias("_z")))
    out = span.join(reach, on="rank", how="full", coalesce=True).with_columns(
        pl.coalesce(pl.col("s"), pl.col("_a")).alias("s"),
        pl.max_horizontal(pl.col("e"), pl.col("_z")).alias("e"))
    return out.select("rank", "s", "e")


def _own_paced(anchor: np.ndarray, prev_row: np.ndarray, queued: np.ndarray, gates: np.ndarray, overlaps: np.ndarray,
               pos: np.ndarray) -> np.ndarray:
    """Rows whose arrival is paced by the rank's own computation since its previous arrival, not
    by its anchor's end: the rank was computing when the anchor ended (``compute_overlaps_end``)
    and did not wait for it, and neither row sat queued. DDP's gradient buckets: backward runs on
    under the all-reduces, and bucket k+1 is ready when backward reaches it, whenever bucket k
    ended. Anchored on bucket k's end instead, a rank that started backward late looks slower at
    every bucket (its gap from the shared end is longer by its delay each time), and a what-if
    that gives it its peers' gap would recover its delay once per bucket; a what-if that speeds
    the transfers up would let a straggler's slow computation shrink with them (seed 29000
    #0122: a compute straggler and a NIC at half speed, the NIC's replay 18.0 % where the rerun
    without it saves 3 %)."""
    a = np.maximum(anchor, 0)
    p = np.maximum(prev_row, 0)
    return ((anchor >= 0) & (prev_row >= 0) & ~queued & overlaps[a] & ~gates[a] & ~queued[p]
            & (pos[p] < pos))  # the previous row is replayed before this one


def _paced_rows(chain: pl.DataFrame, ok: np.ndarray) -> np.ndarray:
    """The rows of :func:`_own_paced` (``ok``) that every peer row is paced alongside, for the
    what-ifs that compare gaps between peers: gap to gap, so the two kinds never mix where gaps are
    compared. A row is paced only when every row of its instance, of its role at that step and
    ordinal, and of the other roles doing the same op there, is."""
    n = len(ok)
    if not ok.any():
        return np.zeros(n, dtype=bool)
    keys = chain.select("pos", "role", "step", "ordinal", "op")
    for _ in range(4):  # to a fixpoint: each pass can only clear rows
        df = keys.with_columns(pl.Series("ok", ok))
        same = np.ones(n, dtype=bool)
        for by in (["pos"], ["role", "step", "ordinal"], ["step", "ordinal", "op"]):
            same &= df.select(pl.col("ok").all().over(by, mapping_strategy="group_to_rows"))["ok"].to_numpy()
        new = ok & same
        if (new == ok).all():
            break
        ok = new
    return ok


def _roles(chain: pl.DataFrame, attrs: pl.DataFrame, ranks: np.ndarray) -> tuple[pl.DataFrame, np.ndarray]:
    """Peers are ranks that do the same work: the members of a rank's most frequent synchronous
    group (data-parallel replicas of a pipeline stage, a tensor-parallel group, all ranks of plain
    data parallelism). Rows get an ``ordinal`` (n-th synchronization of the rank in the step, by
    arrival) so a culprit is compared with its peers at the same point of the same step, and a
    ``replica`` group: roles joined by a synchronous group whose members never exchange
    point-to-point messages (see :func:`_replica_groups`)."""
    from stallscope.analysis.collectives import SYNCHRONOUS_OPS

    ch = chain.join(attrs.select("pos", "op", "channel"), on="pos", how="left")
    members = ch.group_by("channel").agg(pl.col("rank").unique().sort().cast(pl.String).str.join(",").alias("mset"))
    prim = (ch.filter(pl.col("op").is_in(SYNCHRONOUS_OPS)).group_by("rank", "channel").agg(pl.len().alias("n"))
            .sort(["rank", "n", "channel"], descending=[False, True, False]).group_by("rank", maintain_order=True).first()
            .join(members, on="channel", how="left"))
    roles = pl.DataFrame({"rank": [int(r) for r in ranks]}, schema={"rank": ch.schema["rank"]}).join(
        prim.select("rank", "mset"), on="rank", how="left").with_columns(
        pl.coalesce(pl.col("mset"), pl.lit("solo:") + pl.col("rank").cast(pl.String)).alias("mset"))
    sig = roles.with_columns(pl.col("mset").rank("dense").cast(pl.Int64).alias("role")).select("rank", "role")
    role_of = dict(zip(sig["rank"].to_list(), sig["role"].to_list()))
    replica_of = _replica_groups(ch, role_of)
    sig = sig.with_columns(pl.col("role").replace_strict(replica_of, default=pl.col("role")).alias("replica"))
    ch = ch.join(sig, on="rank", how="left")
    ch = _slots(ch, prim.select("rank", pl.col("channel").alias("_prim")), members)
    return ch.sort("row"), np.array([role_of.get(int(r), -1) for r in ranks], dtype=np.int64)


#: slot numbers of one kind of synchronization: its occurrence in the step plus this times the kind
SLOT_KIND = 1_000_000


def _slots(ch: pl.DataFrame, prim: pl.DataFrame, members: pl.DataFrame) -> pl.DataFrame:
    """Add ``ordinal``: which synchronization of its rank's step a row is, so that a culprit's row
    is compared with its peers' row doing the same thing.

    On a single communicator it is the n-th synchronization of the rank in the step, by arrival.
    With several communicators (a pipeline, TP+DP) it is the n-th synchronization *of its kind*
    (plus ``SLOT_KIND`` times the kind): a send to, a receive from, or an exchange with a given
    stage (the partner's ``replica``), or a collective of a given size (the rank's own group or
    another). A late rank's TP and DP collectives interleave differently than its replicas' (seed
    25000 #0097: by arrival the culprit's DP all-reduce was compared with its peers' TP one, and
    the what-if named its TP partner). A stage
    receives its inputs on a stream of their own, posted ahead, and computes between them; when it
    is late, the inputs are already there, its receives complete back to back, and its arrival
    order interleaves differently than its replicas' (seed 23000 #0162: the culprit's third row
    was a receive, its peers' a send). Each kind's own order is a communicator's, which NCCL runs
    in order, so it does not move with timing."""
    if ch["channel"].n_unique() == 1:
        return ch.with_columns(pl.int_range(pl.len()).over(["rank", "step"], order_by="arrival_ns").alias("ordinal"))
    from stallscope.analysis.collectives import P2P_CHANNEL

    rep = dict(zip(ch["rank"].to_list(), ch["replica"].to_list()))
    ends = ch["channel"].cast(pl.String).str.extract_groups(P2P_CHANNEL)
    x = ch.with_columns(ends.struct.field("1").cast(pl.Int64, strict=False).alias("_a"),
                        ends.struct.field("2").alias("_dir"), ends.struct.field("3").cast(pl.Int64, strict=False).alias("_b"))
    x = x.join(prim, on="rank", how="left").join(
        members.select("channel", pl.col("mset").str.count_matches(",").alias("_n")), on="channel", how="left")
    partner = pl.when(pl.col("rank") == pl.col("_a")).then(pl.col("_b")).otherwise(pl.col("_a"))
    x = x.with_columns(partner.replace_strict(rep, default=-1, return_dtype=pl.Int64).alias("_prep"))
    kind = (pl.when(pl.col("_dir") == "-").then(pl.lit("x") + pl.col("_prep").cast(pl.String))
            .when(pl.col("_dir") == "->").then(pl.when(pl.col("rank") == pl.col("_a")).then(pl.lit("s")).otherwise(pl.lit("r"))
                                                + pl.col("_prep").cast(pl.String))
            .when(pl.col("channel").cast(pl.String).str.starts_with("p2p:")).then(pl.lit("p?"))
            .otherwise(pl.lit("c") + pl.col("_n").cast(pl.String)
                       + pl.when(pl.col("channel") == pl.col("_prim")).then(pl.lit("p")).otherwise(pl.lit(""))))
    x = x.with_columns(kind.alias("_kind"))
    x = x.with_columns((pl.col("_kind").rank("dense").cast(pl.Int64) * SLOT_KIND
                        + pl.int_range(pl.len()).over(["rank", "step", "_kind"], order_by="arrival_ns")).alias("ordinal"))
    return x.drop("_a", "_dir", "_b", "_prim", "_n", "_prep", "_kind")


def _replica_groups(ch: pl.DataFrame, role_of: dict[int, int]) -> dict[int, int]:
    """Roles that replicate each other's work: a pipeline stage's data-parallel replicas.

    Two roles are replicas when a synchronous group holds ranks of both and no two of its members
    exchange point-to-point messages: ranks that send each other activations sit in different
    pipeline stages, which do different work by design, while the members of a gradient
    all-reduce between a stage's replicas never talk point-to-point. Roles joined through such
    groups share a replica id (the smallest role id among them); in a job without
    point-to-point traffic every group qualifies."""
    from stallscope.analysis.collectives import P2P_OPS, SYNCHRONOUS_OPS, DisjointSets

    pairs = (ch.filter(pl.col("op").is_in(P2P_OPS)).group_by("pos").agg(pl.col("rank").unique().sort())
             .filter(pl.col("rank").list.len() == 2)["rank"].to_list())
    talks = {(int(a), int(b)) for a, b in pairs}
    sets = DisjointSets(set(role_of.values()))
    groups = ch.filter(pl.col("op").is_in(SYNCHRONOUS_OPS)).group_by("channel").agg(pl.col("rank").unique().sort())
    for mem in groups["rank"].to_list():
        mem = [int(r) for r in mem]
        rs = {role_of[r] for r in mem if r in role_of}
        if len(rs) < 2:
            continue
        if talks and any((a, b) in talks for i, a in enumerate(mem) for b in mem[i + 1:]):
            continue  # spans pipeline stages
        first, *rest = sorted(rs)
        for x in rest:
            sets.union(first, x)
    return {r: min(v) for v in sets.sets() for r in v}


TransferRule = Callable[[int, np.ndarray], np.ndarray]


def replay(tl: Timeline, *, gaps: np.ndarray | None = None, transfers: TransferRule | None = None,
           tails: np.ndarray | None = None, anchors: np.ndarray | None = None, prevs: np.ndarray | None = None) -> float:
    """Replayed makespan T' (ns): ``gaps`` replaces every row's gap, ``tails`` every rank's tail,
    ``transfers(pos, own_transfers) -> own_transfers`` changes transfers, ``anchors`` every row's
    anchor (each one replayed before the row), ``prevs`` the rows each row is paced from."""
    g_all = tl.row_gap if gaps is None else gaps
    anchor = tl.row_anchor if anchors is None else anchors
    prev_all = tl.row_prev if prevs is None else prevs
    new_end = tl.row_end.copy()
    new_arr = tl.row_arrival.copy()
    start = tl.start
    shift = np.zeros(len(tl.ranks))  # per rank: how far its compute-gated arrivals moved
    for pos in range(tl.n_instances):
        rows = tl.inst_rows[pos]
        ridx = tl.row_rank_idx[rows]
        anc = anchor[rows]
        base = np.where(anc >= 0, new_end[np.maximum(anc, 0)], start[ridx])
        prv = prev_all[rows]
        if (prv >= 0).any():
            # paced by the rank's computation since its previous arrival; not before its anchor
            # ends (a stream runs its collectives in order; less the few µs an anchor may end after
            # the arrival, see ANCHOR_TOLERANCE_NS)
            a = np.maximum(anc, 0)
            floor = base + np.minimum(0.0, tl.row_arrival[rows] - tl.row_end[a])
            arr = np.where(prv >= 0, np.maximum(new_arr[np.maximum(prv, 0)] + g_all[rows], floor), base + g_all[rows])
        else:
            arr = base + g_all[rows]
        ready = tl.row_ready[rows]
        q = np.isfinite(ready)
        if q.any():
            arr = np.where(q, np.maximum(arr, ready + shift[ridx]), arr)
        shift[ridx] = np.where(q, shift[ridx], arr - tl.row_arrival[rows])
        new_arr[rows] = arr
        last = arr.max()
        tr = tl.row_transfer[rows]
        if transfers is not None:
            tr = transfers(pos, tr)
        new_end[rows] = np.maximum(last + tr, arr)
        g = tl.row_gates[rows]
        if g.any():
            shift[ridx[g]] = new_end[rows[g]] - tl.row_end[rows[g]]
    tail = tl.tail if tails is None else tails
    base = np.where(tl.tail_row >= 0, new_end[np.maximum(tl.tail_row, 0)], start)
    finish = base + tail
    return float(finish.max() - start.min())


def lost_fraction_between(base: float, new: float, makespan: float) -> float:
    """Gain of a scenario against the identity replay (which equals the recording), as a share
    of the recorded makespan."""
    if makespan <= 0:
        return 0.0
    return float(min(1.0, max(0.0, (base - new) / makespan)))


# -- scenarios ------------------------------------------------------------------------------


def culprits_like_median_peer(tl: Timeline, culprit_ranks: Iterable[int]) -> float:
    """Lost fraction if ``culprit_ranks`` behaved like their median peer: each of their rows takes
    the anchor their peers have (:func:`_anchors_like_peers`), and its gap
    shrinks to the median gap of non-culprit ranks of the same role at the same step and ordinal
    (for a role all of whose ranks are culprits: of the other ranks at the same step and ordinal
    doing the same op, in a pipeline only those of the stage's other replicas; else to the median
    of the other members of a synchronous collective);
    their tails likewise."""
    plan = _like_peers_plan(tl, {int(r) for r in culprit_ranks})
    if plan is None:
        return 0.0
    anchors, _, new_gaps, tails, _, prevs = plan
    return lost_fraction_between(replay(tl, prevs=prevs), replay(tl, gaps=new_gaps, tails=tails, anchors=anchors, prevs=prevs),
                                 tl.makespan)


def culprits_like_peers_and_transfers_at(tl: Timeline, culprit_ranks: Iterable[int],
                                         new_transfer_ns: dict[int, float]) -> float:
    """Lost fraction if ``culprit_ranks`` behaved like their median peer (as in
    :func:`culprits_like_median_peer`) **and** the instances at positions ``new_transfer_ns``
    moved their bytes in the given time (as in :func:`transfers_at`): one host's problem that
    does both, a NIC across the CPU sockets whose far NUMA node also slows the host's CPU side
    (its ranks arrive late, and the transfers they then start run slow). Late arrival and slow
    transfer are in series on the critical path, so the gain is about the sum of the two
    scenarios, not the larger (seed 24000 #0202: 2.6 % from the transfers alone, 10.4 % from
    both, where the faultless rerun saves 11.5 %; #0013: 28.9 and 40.0 %, rerun 43.5 %). The culprits' rows keep their peers' anchors; every other row
    takes the anchor it waited for, as transfer what-ifs do."""
    plan = _like_peers_plan(tl, {int(r) for r in culprit_ranks})
    if plan is None:
        return transfers_at(tl, new_transfer_ns)
    p_anchors, own_gaps, p_gaps, tails, cul_rows, p_prevs = plan
    w_anchors, w_gaps, w_prevs = tl.waited
    anchors = np.where(cul_rows, p_anchors, w_anchors)
    prevs = np.where(cul_rows, p_prevs, w_prevs)
    return lost_fraction_between(replay(tl, gaps=np.where(cul_rows, own_gaps, w_gaps), anchors=anchors, prevs=prevs),
                                 replay(tl, gaps=np.where(cul_rows, p_gaps, w_gaps), tails=tails, anchors=anchors, prevs=prevs,
                                        transfers=_transfer_rule(new_transfer_ns)), tl.makespan)


def _like_peers_plan(tl: Timeline, cul_set: set[int]) -> tuple[np.ndarray, ...] | None:
    """(anchors, the rows' own gaps from them, their new gaps, tails, culprit rows, pacing rows)
    of :func:`culprits_like_median_peer`'s scenario, or None when no rank of ``cul_set`` is in
    the timeline. Gaps are compared on the anchors of :func:`_peer_view`."""
    cul = np.isin(tl.ranks, list(cul_set))
    if not cul.any():
        return None
    tl = _peer_view(tl, cul_set)
    anchors, own_gap = _anchors_like_peers(tl, cul_set)
    ch = tl.chain.with_columns(pl.col("rank").is_in(list(cul_set)).alias("cul"), pl.Series("gap", own_gap))
    measured = ch.filter(~pl.col("cul") & ~pl.col("absent"))  # estimated rows are no peer's pace
    peer = measured.group_by("role", "step", "ordinal").agg(pl.col("gap").median().alias("peer"))
    # a role whose every rank is a culprit (a whole host's tensor-parallel or shard group): the
    # ranks of other roles at the same point of the step doing the same op (their own groups).
    # Pipeline stages do different work by design: there only the stage's other data-parallel
    # replicas are alike (the ``replica`` group), else the ranks of every role (from at least two
    # other groups: the minimum of a gap and one other group's is biased low, a bias a pipeline
    # stage with two replicas has to accept)
    symmetric = not tl.pipelined
    like = ["step", "ordinal", "op"] if symmetric else ["replica", "step", "ordinal", "op"]
    alike = (measured.group_by(like)
             .agg(pl.col("gap").median().alias("alike"), pl.col("role").n_unique().alias("_roles"))
             .filter(pl.col("_roles") >= (2 if symmetric else 1)).drop("_roles"))
    others = measured.group_by("pos").agg(pl.col("gap").median().alias("mpeer"))
    sync = pl.DataFrame({"pos": np.arange(tl.n_instances, dtype=np.uint32), "sync": tl.synchronous},
                        schema={"pos": ch.schema["pos"], "sync": pl.Boolean})
    x = (ch.join(peer, on=["role", "step", "ordinal"], how="left").join(alike, on=like, how="left")
         .join(others, on="pos", how="left").join(sync, on="pos", how="left"))
    # a rank whose rows are all estimated (no trace) sets no pace: a role whose every measured
    # rank is a culprit takes its pace from the other roles (found on seed 33000 #0007: a whole
    # host's shard group with its fourth rank without a trace had no peer at all)
    role_has_peers = pl.col("rank").filter(~pl.col("cul") & ~pl.col("absent")).n_unique().over("role") > 0
    ref = pl.coalesce(pl.col("peer"), pl.when(~role_has_peers).then(pl.col("alike")),
                      pl.when(pl.col("sync")).then(pl.col("mpeer")))
    x = x.with_columns(pl.when(pl.col("cul") & ref.is_not_null()).then(pl.min_horizontal(pl.col("gap"), ref))
                       .otherwise(pl.col("gap")).alias("new")).sort("row")
    new_gaps = x["new"].to_numpy().astype(np.float64)
    tails = tl.tail.copy()
    for i in np.nonzero(cul)[0]:
        peers = (~cul) & ~tl.rank_cut & (tl.tail_role == tl.tail_role[i])
        if not peers.any():
            peers = (~cul) & ~tl.rank_cut
        if peers.any():
            tails[i] = min(tl.tail[i], float(np.median(tl.tail[peers])))
    return anchors, own_gap, new_gaps, tails, x["cul"].to_numpy(), tl.row_prev


def _peer_view(tl: Timeline, cul_set: set[int]) -> Timeline:
    """The timeline whose gaps a culprit's are compared with: the recorded one, or, where a
    role's every measured rank is a culprit in a job without pipeline stages (a whole host's
    tensor-parallel or shard group, compared with the other groups), the one anchored on what
    each rank waited for (:func:`waited_anchors`, which replays the recording just the same).

    A gap from an anchor that the rank computed through is what was left of its work when that
    anchor ended, not its work: HSDP's backward arrives at a layer's reduce-scatter inside the
    host some time after the previous layer's all-reduce between hosts ended, and that
    all-reduce ends when the latest host arrives. Inside one group the members share their
    anchors, so such residues compare alike; across groups they do not: the groups that waited
    for a late one find the all-reduce ending late, with most of their next layer already
    computed, and their short residues, taken as the late group's pace, replay it as computing
    each layer in a fraction of its time (seed 43000 #0181, jitter over 16 ranks: one host's
    delay of ~9 ms in one step replayed as 10.4 % of the job, where the per-layer compute of
    every host was the same 12 ms). Anchored on what each rank waited for (the previous
    reduce-scatter of its own group), every group's gap is its own work again."""
    if tl.pipelined:
        return tl
    measured = tl.chain.filter(~pl.col("absent")).select("rank", "role").unique()
    roles = measured.group_by("role").agg(pl.col("rank").is_in(list(cul_set)).all().alias("all_cul"))
    if not roles["all_cul"].any():
        return tl
    anchors, gaps, prevs = tl.waited
    if (anchors == tl.row_anchor).all() and (prevs == tl.row_prev).all():
        return tl
    return replace(tl, row_anchor=anchors, row_gap=gaps, row_prev=prevs, chain=tl.chain.with_columns(pl.Series("gap", gaps)))


def _anchors_like_peers(tl: Timeline, cul_set: set[int]) -> tuple[np.ndarray, np.ndarray]:
    """The culprits' anchors as their peers have them, and their gaps from those anchors.

    A row's anchor is the rank's synchronization that ended last before it arrived: a dependency
    read from timing. A late rank's timing is not its peers': a pipeline stage that starts late
    finds its inputs already received, and the input of a later micro-batch, not the one it
    computes on, is what ended last before it sends (seed 23000 #0162: anchored there, the stage's
    forward sends replayed a whole input chain too late, and the what-if recovered half the
    planted loss). Behaving like its peers, the culprit depends on what they depend on: a row
    takes the anchor its peers (same role, step and ``ordinal``) have most often, as its own row
    of that step and ordinal, where that row exists, is replayed before it and ended before it
    arrived; its gap is then measured from that row's end."""
    anchor = tl.row_anchor.copy()
    gap = tl.row_gap.copy()
    ch = tl.chain.select("row", "pos", "rank", "role", "step", "ordinal", "absent")
    key = ch.select(pl.col("row").alias("_anc"), pl.col("step").alias("_astep"), pl.col("ordinal").alias("_aord"))
    x = ch.with_columns(pl.Series("_anc", tl.row_anchor)).join(key, on="_anc", how="left")
    peers = (x.filter(~pl.col("rank").is_in(list(cul_set)) & ~pl.col("absent") & pl.col("_astep").is_not_null())
             .group_by("role", "step", "ordinal", "_astep", "_aord").agg(pl.len().alias("_n"))
             .sort("_n", descending=True).group_by("role", "step", "ordinal", maintain_order=True).first())
    mine = x.filter(pl.col("rank").is_in(list(cul_set))).join(peers.drop("_n"), on=["role", "step", "ordinal"], how="inner",
                                                               suffix="_p")
    if mine.height == 0:
        return anchor, gap
    own = ch.select("rank", pl.col("step").alias("_astep_p"), pl.col("ordinal").alias("_aord_p"),
                    pl.col("row").alias("_new"), pl.col("pos").alias("_npos"))
    mine = mine.join(own, on=["rank", "_astep_p", "_aord_p"], how="inner").filter(
        (pl.col("_new") != pl.col("_anc").fill_null(-1)) & (pl.col("_npos") < pl.col("pos")))
    if mine.height == 0:
        return anchor, gap
    rows = mine["row"].to_numpy()
    new = mine["_new"].to_numpy()
    g = tl.row_arrival[rows] - tl.row_end[new]
    ok = (g >= -ANCHOR_TOLERANCE_NS) & (tl.row_prev[rows] < 0)
    anchor[rows[ok]] = new[ok]
    gap[rows[ok]] = np.maximum(g[ok], 0.0)
    return anchor, gap


def everyone_like_median(tl: Timeline, *, across_groups: bool = False) -> float:
    """Lost fraction to jitter: every rank's gap shrinks to the median gap of its role at the
    same step and ordinal (and its tail to its role's median tail).

    ``across_groups``: in a job without pipeline stages the roles (tensor-parallel or shard groups) do the same
    work, and their medians vary from step to step too: the slowest group's median still sets
    the pace at the collectives that join the groups, so that variation is jitter as well. A
    role's median is then taken down to its own level (its median over steps at that ordinal:
    a group that is always slower keeps its difference, that is imbalance, not jitter) plus the
    median over roles of their deviation from their level in that step.

    The gaps keep their recorded anchors here, although groups are compared (a lead, not taken:
    measured from what each rank waited for, :func:`_peer_view`, the planted jitter of seed 44000's
    #0007, #0103, #0116 and #0128 read closer, yet the lower yardstick let three ranks' largest
    spikes in a noisy healthy TP8 x DP4 job, cross-check ``n5_h3``, read as stragglers at 10 %)."""
    ch = tl.chain
    med = (ch.filter(~pl.col("absent")).group_by("role", "step", "ordinal")  # estimated rows are no rank's pace
           .agg(pl.col("gap").median().alias("m"), pl.col("op").first()))
    symmetric = not tl.pipelined
    if across_groups and symmetric and med["role"].n_unique() >= 2:
        med = med.with_columns(pl.col("m").median().over("role", "ordinal").alias("level"))
        dev = (med.with_columns((pl.col("m") - pl.col("level")).alias("d"))
               .group_by("step", "ordinal", "op").agg(pl.col("d").median().alias("dmed"), pl.col("role").n_unique().alias("nr")))
        med = (med.join(dev, on=["step", "ordinal", "op"], how="left")
               .with_columns(pl.when(pl.col("nr") >= 2).then(pl.min_horizontal(pl.col("m"), pl.col("level") + pl.col("dmed")))
                             .otherwise(pl.col("m")).alias("m")))
    x = ch.join(med.select("role", "step", "ordinal", "m"), on=["role", "step", "ordinal"], how="left").with_columns(
        pl.min_horizontal(pl.col("gap"), pl.col("m")).alias("new")).sort("row")
    new_gaps = x["new"].to_numpy().astype(np.float64)
    tails = tl.tail.copy()
    for r in np.unique(tl.tail_role):
        sel = tl.tail_role == r
        meas = sel & ~tl.rank_cut
        tails[sel] = np.minimum(tl.tail[sel], np.median(tl.tail[meas if meas.any() else sel]))
    return lost_fraction_between(replay(tl), replay(tl, gaps=new_gaps, tails=tails), tl.makespan)


def transfers_at(tl: Timeline, new_transfer_ns: dict[int, float]) -> float:
    """Lost fraction if the instances at positions ``new_transfer_ns`` moved their bytes in the
    given time (only ever faster than recorded), each arrival anchored on what it waited for
    (:func:`waited_anchors`)."""
    anchors, gaps, prevs = tl.waited
    return lost_fraction_between(replay(tl, gaps=gaps, anchors=anchors, prevs=prevs),
                                 replay(tl, gaps=gaps, anchors=anchors, prevs=prevs, transfers=_transfer_rule(new_transfer_ns)),
                                 tl.makespan)


def _transfer_rule(new_transfer_ns: dict[int, float]) -> TransferRule:
    """The instances at positions ``new_transfer_ns`` move their bytes in the given time (their
    members' transfers scaled together; only ever faster than recorded)."""
    def transfers(pos: int, tr: np.ndarray) -> np.ndarray:
        t = new_transfer_ns.get(pos)
        if t is None:
            return tr
        scale = t / max(float(np.median(tr)), 1.0)
        return tr * min(1.0, max(scale, 0.0))

    return transfers


def waited_anchors(tl: Timeline) -> tuple[np.ndarray, np.ndarray]:
    """Anchors for what-ifs that change transfers: each arrival on a synchronization it waited for.

    A row's anchor is the rank's synchronization that ended last before it arrived. When that
    one ran on another communicator, did not hold the rank's computation up (``gates_compute``)
    and the rank computed through its end (``compute_overlaps_end``), the rank did not wait for
    it: HSDP's backward all-reduces a layer's shards between hosts while it computes the next
    layer, whose reduce-scatter inside the host arrives when that computation is done. Anchored
    on the all-reduce, the reduce-scatter moved with every change of the all-reduce's transfer,
    and communication the computation hid was counted as if exposed (seed 24000 #0115: one host's
    NIC at half speed, inter-node transfers twice as long, cost 3.2 % and read 18.5 %). Such a
    row is anchored instead on the latest synchronization before its arrival that the rank did
    wait for: one that held its computation up or that it sat idle through, or the previous one
    on the same communicator (a stream runs its collectives in order); its gap is measured from
    there. The same holds for an anchor that sat queued on the row's own communicator (FSDP's
    all-gather prefetch, queued behind a reduce-scatter): the row's computation began when the
    collective before it ended, the one it waited for, and the queued one only bounds it (its
    stream runs them in order). Of the two candidates the one that held the computation up
    sets the pace; the later one otherwise (seed 32000's job-wide P2P off in HSDP: each
    reduce-scatter anchored on the all-gather queued behind the previous one moved with that
    all-gather's transfer, and the intra-node transfers at NVLink speed replayed 24.1 % saved,
    13.6 % planted; 13.6 % now). Queued and paced rows keep theirs, and so do rows anchored on a point-to-point
    message: a pipeline stage computes on the activations it receives, so a receive is a
    dependency even when the stage was still busy with the previous micro-batch as it ended (the
    independent simulator's `p_f2`, sockets between stages: re-anchored, 30.8 % against 47.3 %
    planted; 36.3 % before). A row whose rank computed through the end of the previous
    collective on its own communicator is paced by that rank's computation since its previous
    arrival (:func:`_own_paced`), also where its peers waited or sat queued, so the gap-to-gap
    rule of :func:`_paced_rows` anchored it on that end: a straggler's slow backward between its
    DDP buckets then shrank with every faster transfer. Replaying with these anchors, gaps and
    pacing rows reproduces the recording as the recorded ones do; gap what-ifs keep the recorded
    anchors, which their peer comparisons inside a group were built on, and take these where they
    compare groups with each other (:func:`_peer_view`). Returns (anchors, gaps, pacing rows)."""
    anchor, gap = tl.row_anchor, tl.row_gap
    a = np.maximum(anchor, 0)
    pos = tl.chain["pos"].to_numpy().astype(np.int64)
    chan = tl.attrs["channel"].cast(pl.String).fill_null("").to_numpy()[pos]
    from stallscope.analysis.collectives import P2P_OPS

    p2p = tl.attrs["op"].is_in(P2P_OPS).to_numpy()[pos]
    queued = np.isfinite(tl.row_ready)
    loose = ((anchor >= 0) & (tl.row_prev < 0) & ~queued & ~tl.row_gates[a] & tl.row_overlaps[a]
             & ((chan[a] != chan) | queued[a]) & ~p2p[a])
    out: tuple[np.ndarray, np.ndarray] = (anchor, gap)
    if loose.any():
        rows = np.arange(len(anchor))
        ends = pl.DataFrame({"rank": tl.chain["rank"], "chan": chan, "_end": tl.row_end, "cand": rows,
                             "waited": tl.row_gates | ~tl.row_overlaps}).sort("_end")
        probe = pl.DataFrame({"row": rows[loose], "rank": tl.chain["rank"].to_numpy()[loose], "chan": chan[loose],
                              "_probe": tl.row_arrival[loose] + ANCHOR_TOLERANCE_NS}).sort("_probe")
        by_wait = probe.join_asof(ends.filter(pl.col("waited")).select("rank", "_end", "cand"), left_on="_probe",
                                  right_on="_end", by="rank", strategy="backward", check_sortedness=False)
        by_chan = probe.join_asof(ends.select("rank", "chan", "_end", pl.col("cand").alias("cand_c")), left_on="_probe",
                                  right_on="_end", by=["rank", "chan"], strategy="backward", check_sortedness=False)
        j = by_wait.select("row", "cand").join(by_chan.select("row", "cand_c"), on="row").sort("row")
        r = j["row"].to_numpy()
        c1 = j["cand"].fill_null(-1).to_numpy()
        c2 = j["cand_c"].fill_null(-1).to_numpy()
        e1 = np.where(c1 >= 0, tl.row_end[np.maximum(c1, 0)], -np.inf)
        e2 = np.where(c2 >= 0, tl.row_end[np.maximum(c2, 0)], -np.inf)
        # the synchronization its computation waited for sets its pace; the previous one on its
        # communicator only bounds it (its stream runs them in order), unless nothing held the
        # computation up: then that one is the latest thing it can be said to have waited for
        gated = (c1 >= 0) & tl.row_gates[np.maximum(c1, 0)]
        new = np.where(gated | (e1 >= e2), c1, c2)
        ok = (new >= 0) & (new != r) & (pos[np.maximum(new, 0)] < pos[r])
        if ok.any():
            anchor, gap = anchor.copy(), gap.copy()
            anchor[r[ok]] = new[ok]
            gap[r[ok]] = tl.row_arrival[r[ok]] - tl.row_end[new[ok]]
            out = (anchor, gap)
    anchor, gap = out
    # the rank computed through the end of the previous collective on its communicator: its own
    # computation paces it, whatever its peers did (no gaps are compared between peers here)
    pace = (tl.row_prev < 0) & (tl.row_own_prev >= 0) & (chan[a] == chan) & ~p2p[a]
    if not pace.any():
        return anchor, gap, tl.row_prev
    gap = gap.copy()
    own = np.maximum(tl.row_own_prev, 0)
    gap[pace] = (tl.row_arrival - tl.row_arrival[own])[pace]
    return anchor, gap, np.where(pace, tl.row_own_prev, tl.row_prev)
