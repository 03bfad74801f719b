"""What-if replay: how much shorter would the job have been without a given cause?

Each rank's profiled time is a chain of **synchronization points** (the multi-member collective
instances it took part in, in order) separated by **gaps** — its own work between one
synchronization and the next (compute, host stalls, launches), plus a head gap from its first
step start and a tail gap to its last step end. A synchronization completes when its last member
arrives plus the time to move the bytes:

    arrival[r, i] = own_end[r, previous] + gap[r, i]
    end[i]        = max_r arrival[r, i] + transfer[i]      (each member keeps its own offset)

A collective that a rank started before its previous one ended (two buckets in flight on
different streams or threads) depends on the previous *arrival* instead: its gap is measured
from there, so concurrency is preserved by the replay.

Replaying the recorded gaps and transfers reproduces the recorded timeline exactly (a tested
identity). A *scenario* changes gaps or transfers — the culprit ranks behave like their median
peer at every synchronization, every rank behaves like the median member (no jitter), the
inter-node transfers of some instances run at a reference bandwidth — and the replay propagates
the change through every later synchronization of every rank. The lost fraction is
``(T - T') / T`` with ``T`` the recorded makespan (first step start to last step end).

This is a model, not a simulator: it ignores how a change would move work between streams inside
a rank. It is exact for the quantity it reports — how much of the recorded synchronization
waiting and transfer time a cause is responsible for — and it never guesses a fixed percentage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import polars as pl


@dataclass
class Timeline:
    """The recorded chains, ready to replay (built once per job)."""

    ranks: np.ndarray            #: rank ids
    start: np.ndarray            #: per rank: first step start (aligned ns)
    end: np.ndarray              #: per rank: last step end (aligned ns)
    inst_ids: np.ndarray         #: instance ids in processing order
    inst_members: list[np.ndarray]   #: per instance: member rank indexes
    inst_gaps: list[np.ndarray]      #: per instance: each member's gap (ns) before it
    inst_dep_arrival: list[np.ndarray]  #: per instance: member's gap is from its previous arrival (concurrent), not end
    inst_transfer: list[np.ndarray]  #: per instance: each member's own end - last arrival (ns)
    tail: np.ndarray             #: per rank: last step end - own end of its last instance
    makespan: float              #: recorded T (ns)
    attrs: pl.DataFrame          #: per instance: instance_id, op, scope, hosts list, bytes, bus_factor, transfer_ns

    @property
    def n_instances(self) -> int:
        return len(self.inst_ids)


def build_timeline(members: pl.DataFrame, instances: pl.DataFrame, windows: pl.DataFrame,
                   hosts: pl.DataFrame) -> Timeline | None:
    """Chains from ``collective_members`` (aligned), ``collective_instances``, ``step_breakdown``
    windows (rank, start_ns, end_ns) and the rank→host map. None when there is nothing to replay."""
    if windows.height == 0:
        return None
    span = windows.group_by("rank").agg(pl.col("start_ns").min().alias("s"), pl.col("end_ns").max().alias("e")).sort("rank")
    ranks = span["rank"].to_numpy()
    idx_of = {int(r): i for i, r in enumerate(ranks)}
    start = span["s"].to_numpy().astype(np.float64)
    end = span["e"].to_numpy().astype(np.float64)
    multi = instances.filter(pl.col("members") > 1).select("instance_id", "last_arrival_ns")
    m = members.join(multi, on="instance_id").filter(pl.col("rank").is_in(list(idx_of)))
    # members whose instance falls outside the rank's profiled span are not part of its chain
    m = m.join(span.rename({"s": "_s", "e": "_e"}), on="rank").filter(
        (pl.col("arrival_ns") >= pl.col("_s")) & (pl.col("arrival_ns") <= pl.col("_e")))
    full = m.group_by("instance_id").agg(pl.len().alias("_n")).filter(pl.col("_n") > 1)
    m = m.join(full.select("instance_id"), on="instance_id")
    m = m.with_columns(pl.col("arrival_ns").max().over("instance_id").alias("_last"))
    m = m.sort(["_last", "instance_id", "rank"])
    # each rank's chain in processing order: gap = arrival - own end of its previous instance
    m = m.with_columns(pl.col("end_ns").shift(1).over("rank", order_by=["_last", "instance_id"]).alias("_prev_end"),
                       pl.col("arrival_ns").shift(1).over("rank", order_by=["_last", "instance_id"]).alias("_prev_arr"))
    m = m.join(span.select("rank", pl.col("s").alias("_rs")), on="rank")
    m = m.with_columns((pl.col("_prev_end").is_not_null() & (pl.col("arrival_ns") < pl.col("_prev_end"))).alias("dep_arr"))
    m = m.with_columns(
        (pl.col("arrival_ns") - pl.when(pl.col("dep_arr")).then(pl.col("_prev_arr"))
         .otherwise(pl.coalesce(pl.col("_prev_end"), pl.col("_rs")))).cast(pl.Float64).alias("gap"),
        (pl.col("end_ns") - pl.col("_last")).cast(pl.Float64).alias("own_transfer"),
    )
    last_end = m.group_by("rank").agg(pl.col("end_ns").sort_by(["_last", "instance_id"]).last().alias("le"))
    tail = end.copy() - start  # ranks with no instance: the whole span is tail
    for r, le in zip(last_end["rank"].to_list(), last_end["le"].to_list()):
        tail[idx_of[r]] = end[idx_of[r]] - le
    grouped = m.group_by("instance_id", maintain_order=True).agg(
        pl.col("rank"), pl.col("gap"), pl.col("own_transfer"), pl.col("dep_arr"))
    inst_ids = grouped["instance_id"].to_numpy()
    inst_members = [np.array([idx_of[r] for r in rs], dtype=np.int64) for rs in grouped["rank"].to_list()]
    inst_gaps = [np.asarray(g, dtype=np.float64) for g in grouped["gap"].to_list()]
    inst_transfer = [np.asarray(t, dtype=np.float64) for t in grouped["own_transfer"].to_list()]
    inst_dep = [np.asarray(d, dtype=bool) for d in grouped["dep_arr"].to_list()]
    host_of = dict(zip(hosts["rank"].to_list(), hosts["host"].to_list()))
    mh = m.with_columns(pl.col("rank").replace_strict(host_of, default=None).alias("h")).group_by("instance_id").agg(
        pl.col("h").unique().alias("member_hosts"))
    attrs = (pl.DataFrame({"instance_id": inst_ids}).with_row_index("pos")
             .join(instances.select("instance_id", "op", "scope", "bytes", "bus_factor", "transfer_ns", "step"), on="instance_id", how="left")
             .join(mh, on="instance_id", how="left").sort("pos"))
    makespan = float(end.max() - start.min())
    return Timeline(ranks=ranks, start=start, end=end, inst_ids=inst_ids, inst_members=inst_members, inst_gaps=inst_gaps,
                    inst_dep_arrival=inst_dep, inst_transfer=inst_transfer, tail=tail, makespan=makespan, attrs=attrs)


GapRule = Callable[[int, np.ndarray, np.ndarray], np.ndarray]
TransferRule = Callable[[int, np.ndarray], np.ndarray]


def replay(tl: Timeline, *, gaps: GapRule | None = None, transfers: TransferRule | None = None,
           tails: Callable[[np.ndarray], np.ndarray] | None = None) -> float:
    """Replayed makespan T' (ns). ``gaps(pos, members, gaps) -> gaps``,
    ``transfers(pos, own_transfers) -> own_transfers``, ``tails(tail) -> tail`` change the chain."""
    cur_end = tl.start.copy()
    cur_arr = tl.start.copy()
    for pos in range(tl.n_instances):
        mem = tl.inst_members[pos]
        g = tl.inst_gaps[pos]
        if gaps is not None:
            g = gaps(pos, mem, g)
        arr = np.where(tl.inst_dep_arrival[pos], cur_arr[mem], cur_end[mem]) + g
        last = arr.max()
        tr = tl.inst_transfer[pos]
        if transfers is not None:
            tr = transfers(pos, tr)
        cur_arr[mem] = arr
        cur_end[mem] = np.maximum(last + tr, arr)
    tail = tl.tail if tails is None else tails(tl.tail)
    finish = cur_end + tail
    return float(finish.max() - tl.start.min())


def lost_fraction(tl: Timeline, t_new: float) -> float:
    if tl.makespan <= 0:
        return 0.0
    return float(min(1.0, max(0.0, (tl.makespan - t_new) / tl.makespan)))


# -- scenarios ------------------------------------------------------------------------------


def culprits_like_median_peer(tl: Timeline, culprit_ranks: Iterable[int]) -> float:
    """Lost fraction if ``culprit_ranks`` behaved like the median non-culprit member at every
    synchronization (gaps) and in their tails."""
    idx = {int(r): i for i, r in enumerate(tl.ranks)}
    cul = np.zeros(len(tl.ranks), dtype=bool)
    for r in culprit_ranks:
        if int(r) in idx:
            cul[idx[int(r)]] = True
    if not cul.any():
        return 0.0

    def gaps(pos: int, mem: np.ndarray, g: np.ndarray) -> np.ndarray:
        c = cul[mem]
        if not c.any() or c.all():
            return g
        out = g.copy()
        out[c] = np.minimum(g[c], np.median(g[~c]))
        return out

    def tails(t: np.ndarray) -> np.ndarray:
        out = t.copy()
        if (~cul).any():
            out[cul] = np.minimum(t[cul], np.median(t[~cul]))
        return out

    base = replay(tl)
    return lost_fraction_between(base, replay(tl, gaps=gaps, tails=tails), tl.makespan)


def everyone_like_median(tl: Timeline) -> float:
    """Lost fraction to jitter: every member behaves like the median member at every synchronization."""
    def gaps(pos: int, mem: np.ndarray, g: np.ndarray) -> np.ndarray:
        return np.minimum(g, np.median(g))

    def tails(t: np.ndarray) -> np.ndarray:
        return np.minimum(t, np.median(t))

    base = replay(tl)
    return lost_fraction_between(base, replay(tl, gaps=gaps, tails=tails), tl.makespan)


def transfers_at(tl: Timeline, new_transfer_ns: dict[int, float]) -> float:
    """Lost fraction if the instances at positions ``new_transfer_ns`` moved their bytes in the
    given time (only ever faster than recorded)."""
    def transfers(pos: int, tr: np.ndarray) -> np.ndarray:
        t = new_transfer_ns.get(pos)
        if t is None:
            return tr
        scale = t / max(float(np.median(tr)), 1.0)
        return tr * min(1.0, max(scale, 0.0))

    base = replay(tl)
    return lost_fraction_between(base, replay(tl, transfers=transfers), tl.makespan)


def lost_fraction_between(base: float, new: float, makespan: float) -> float:
    """Relative gain of a scenario against the identity replay (which equals the recording up to
    rounding), as a share of the recorded makespan."""
    if makespan <= 0:
        return 0.0
    return float(min(1.0, max(0.0, (base - new) / makespan)))
