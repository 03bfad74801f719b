"""Everything a rule reads about one job, computed once and shared.

The core synchronization statistic is the **lateness share** of a rank in a step: the sum over
the step's synchronous collectives of how much later than the early members (lower quartile of
arrivals) it arrived, divided by the median step time. Within each step the baseline and noise
are taken from the *lower half* of the ranks' shares (so that up to half of the ranks — one slow
host of two — can be late without hiding themselves); ranks whose share exceeds the baseline by
more than five robust deviations and by at least ``MIN_LATE_SHARE`` of a step (smaller lateness
cannot cost a meaningful share of the job) are that step's *late* ranks. From the late sets over all steps:

* ranks late in at least 70 % of the steps are **persistent** (stragglers, or a slow host when
  they are exactly one host's ranks);
* ranks late in fewer steps are **intermittent**;
* when the late ranks change from step to step and none dominates, the waiting is **jitter**.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import polars as pl

from stallscope.analysis import whatif
from stallscope.analysis.clustering import Candidate, candidates, rank_vectors
from stallscope.analysis.features import JobData, exclusive_blame, host_blame, load, rank_features, sync_members
from stallscope.store.queries import Store

#: lateness below this share of a step is never called late
MIN_LATE_SHARE = 0.01
#: robust deviations above the step median that make a rank late in that step
LATE_SIGMAS = 5.0
#: a rank late in at least this share of steps is a persistent straggler
PERSISTENT_SHARE = 0.7
#: persistent late ranks covering at least this share of one host's ranks (and no other rank) are that host's
HOST_SHARE = 0.75
#: a host is the culprit only when its ranks together recover at least this many times what the
#: best set of ranks does (it also removes its other ranks' noise)
HOST_OVER_RANKS = 1.25
#: a rank's own work (compute, host stall, other idle: everything but waiting and communicating)
#: grown by at least this share of the median step in a step is an origin of lateness there
OWN_EXCESS_SHARE = 0.02
#: a rank's own work in a step (breakdown columns): everything but waiting and communicating
OWN_WORK = pl.sum_horizontal(pl.col("compute_ns").fill_null(0), pl.col("host_stall_ns").fill_null(0),
                             pl.col("other_idle_ns").fill_null(0))
#: profiles of this many steps or more: a rank late in only one of them is a one-off, not a straggler
ONE_OFF_STEPS = 6
#: the origins of lateness are the culprits, not jitter, when they recover this share of the jitter what-if
ORIGINS_EXPLAIN = 0.8
#: this many origins of lateness besides the chosen stragglers make the lateness spread (jitter),
#: unless the chosen ranks recover ``ORIGINS_EXPLAIN`` of the jitter what-if
SPREAD_ORIGINS = 3
#: ... unless a chosen rank is the last to arrive at this share of its collectives or more: under
#: noise spread over N >= 4 ranks each is last about 1/N of the time (measured on jitter jobs:
#: at most 0.42); a rank last at most of them is where the waiting comes from
DOMINANT_LAST = 0.5
#: a culprit rank whose absence from the set's what-if loses less than this share of its gain is
#: noise riding along (see :meth:`Context._essential`); two real stragglers late in turn each hold ~half
ESSENTIAL_SHARE = 0.1
#: an origin whose stall hid behind a chosen rank's in the same step adds at least this share of
#: the set's gain (noise exposed once the chosen rank is replayed adds up to 15 %, true hidden
#: stalls from 28 %: see :meth:`Context._hidden_behind`) ...
HIDDEN_SHARE = 0.2
#: ... and recovers alone at most this share of what it adds to the set
HIDDEN_ALONE = 0.5
#: ... or adds at least this share of the set's gain, whatever it recovers alone: it holds the job
#: up in its own right (noise riding along adds a sliver: at most 17 % measured, see
#: :meth:`Context._hidden_behind`)
CO_CULPRIT_SHARE = 0.5
#: a rank of a straggler set whose own extra work is under this share of what replaying it alone
#: saves is held up, not a culprit (see :meth:`Context._held_up`)
HELD_UP_SHARE = 0.1
#: chosen ranks whose own what-ifs are each at least this many times any other rank's are the
#: culprits even when other ranks take turns at being late (see :func:`_dominates`)
DOMINANT_SINGLE = 4.0
#: ranks that receive at least this many times their peers' all-to-all elements (median over
#: steps) have more work: in a MoE job the router sends them more tokens (hot experts)
MORE_WORK = 1.25
#: a rank that is not an origin of lateness goes before one that is only when its what-if recovers
#: more than 1/0.9 of the origin's (see :attr:`Context.sync_verdict`)
ORIGIN_NEAR = 0.9


#: per-rank step-time noise every healthy cluster has (kernel-time variation, clocks, OS):
#: waiting it causes is not a finding
NOISE_SIGMA = 0.016


def noise_floor(n: int) -> float:
    """Share of the job that synchronizing n ranks with ``NOISE_SIGMA`` noise costs anyway:
    the expected maximum of n such ranks sits about sigma·sqrt(2 ln n) above their median.

    >>> round(noise_floor(16), 3), round(noise_floor(1024), 3)
    (0.038, 0.06)
    """
    return NOISE_SIGMA * math.sqrt(2 * math.log(max(n, 2)))


#: host-side variation at least this share of the compute variation: the waiting is not only the
#: GPUs' own kernel-time noise. Per-step sums understate compute variation that changes sign
#: from one synchronization to the next (a MoE router's per-layer noise averages out over a
#: step but is paid at every all-to-all), so host-driven means the host side varies more
#: (healthy MoE jobs of an independent simulator: 0.77-1.0; jitter faults: >= 1.29)
HOST_DRIVEN = 1.0
#: when the ranks differ mostly in compute time (the same kernels running a little faster or
#: slower on identical GPUs), the what-if gain must exceed this many noise floors: kernel-time
#: noise is paid at every synchronization of a step, it is the hardware's, and no placement or
#: pipeline change removes it. (It was 3 before SYN003 asked the typical rank to vary: a healthy
#: 16-rank DDP job with 5 % kernel-time noise loses ~6-8 % to it, but per-kernel noise averages
#: out over a step and leaves the typical rank's compute within 1 % (30 such jobs: 0.2-1.0 %),
#: so the gate silences it; what passes the gate and stays compute-driven is load that moves
#: between ranks, a MoE router's hot experts: 8.7-9.7 % lost, truth synchronization, under 3
#: floors at 24-32 ranks)
COMPUTE_NOISE_FLOORS = 2.0


def variation_sources(b: pl.DataFrame) -> tuple[float, float]:
    """(compute, host stall): the spread across ranks of each in a step (standard deviation, as
    a share of the step's median length), median over steps. Which one varies says where the
    jitter comes from: hosts (data loading, OS noise, Python) or the GPUs' own kernel times."""
    if b.height == 0:
        return 0.0, 0.0
    g = b.group_by("step").agg(
        (pl.col("compute_ns").std() / pl.col("step_ns").median()).alias("c"),
        (pl.col("host_stall_ns").std() / pl.col("step_ns").median()).alias("h")).drop_nulls()
    if g.height == 0:
        return 0.0, 0.0
    return float(g["c"].median()), float(g["h"].median())


#: jitter needs the typical rank to vary: its host-side time (the GPU idle, waiting on its CPU)
#: changing from step to step by at least this share of a step (robust spread across ranks, see
#: :func:`typical_spread`), or its compute time by ``TYPICAL_COMPUTE_JITTER``. A well-fed GPU's
#: host-side time barely moves in a healthy job (our generator's 110 healthy and imbalanced jobs
#: of seeds 31000-34000: at most 0.34 %; an independent simulator's with garbage-collection
#: pauses, DataLoader hiccups and 35 collectives per step: at most 0.29 %); jitter faults of every
#: simulator move it by 0.54-12 % (our generator's 37 of those seeds: from 0.54 %; noisy_sim's 1.2-1.5 %).
TYPICAL_HOST_JITTER = NOISE_SIGMA / 4
#: the most a healthy host's typical step-to-step variation reaches in absolute time (see
#: :attr:`Context.jitter_bar`): a millisecond
TYPICAL_HOST_JITTER_NS = 1_000_000
#: ... or the compute time by this much (kernel-time noise of healthy jobs: at most 1.7 %)
TYPICAL_COMPUTE_JITTER = 1.5 * NOISE_SIGMA


def typical_spread(b: pl.DataFrame, col: str) -> float:
    """How much the *typical* rank's ``col`` (compute_ns or host_stall_ns) changes from step to
    step: each rank's change from one step to the next, spread across the ranks as 1.4826 x the
    median absolute deviation over sqrt(2) (a robust standard deviation of the per-step noise),
    as a share of the steps' median length; median over the pairs of consecutive steps. A rank's
    steady level (imbalance, a straggler) cancels in the change, and rare pauses that hit a few
    ranks in some steps (a garbage collection here, a slow batch there) move only those ranks'
    changes, which the median absolute deviation across ranks ignores. Jitter that every rank
    pays at random, every step, moves it.

    The same noise reads the same whatever the number of steps: Gaussian noise of sigma 1 reads
    0.92-0.95 from 2 to 50 steps. (A deviation from the rank's own median, used before, is zero
    in one of every n steps: it read the same noise at 0.48 over 3 steps, 0.74 over 6, 0.83 over
    10 and 0.91 over 50, so that jitter in the 3-step profiles that torch.profiler's schedules
    commonly record looked steady: seed 34000 #0095.)

    >>> pause = pl.DataFrame({"rank": [0, 1, 2, 3] * 3, "step": [1] * 4 + [2] * 4 + [3] * 4, "step_ns": [100] * 12,
    ...                       "host_stall_ns": [0, 20, 0, 0,  0, 0, 0, 0,  30, 0, 0, 0]})
    >>> typical_spread(pause, "host_stall_ns")
    0.0
    >>> jitter = pause.with_columns(pl.Series("host_stall_ns", [2, 5, 1, 4,  6, 1, 3, 2,  1, 4, 6, 3]))
    >>> round(typical_spread(jitter, "host_stall_ns"), 3)
    0.021
    """
    if b.height == 0 or b["step"].n_unique() < 2:
        return 0.0
    prev = pl.col(col).shift(1).over("rank")
    d = b.sort("rank", "step").with_columns(
        (pl.col(col) - prev).alias("d"),
        ((pl.col("step_ns") + pl.col("step_ns").shift(1).over("rank")) / 2).alias("pair_ns")).drop_nulls("d")
    g = d.group_by("step").agg(((pl.col("d") - pl.col("d").median()).abs().median() * (1.4826 / math.sqrt(2))
                                / pl.col("pair_ns").median()).alias("s")).drop_nulls()
    return float(g["s"].median()) if g.height else 0.0


@dataclass
class LateSets:
    persistent: list[int]
    intermittent: dict[int, list[int]]  #: rank -> steps where it was late
    per_step: dict[int, list[int]]      #: step -> late ranks
    events: int                         #: total (rank, step) late events
    distinct: int                       #: distinct ranks ever late
    excess: dict[tuple[int, int], float] = field(default_factory=dict)  #: (step, rank) -> lateness beyond the step's baseline (share of a step)


@dataclass
class SyncVerdict:
    """Who the waiting at synchronous collectives is due to, decided by what-if replays.

    ``kind``: straggler (a few ranks), host (the ranks of one host together), jitter (many ranks
    taking turns), or none. ``lost`` is the what-if gain of the culprits behaving like their
    median peers (for jitter: of every rank behaving like the median).
    """

    kind: str
    culprits: list[int]
    host: str | None
    lost: float
    jitter_lost: float
    late_steps: list[int]
    persistent: bool
    #: the competing explanations' what-if gains: chosen ranks, their gain, best host, its gain
    alternatives: dict[str, Any] = field(default_factory=dict)


def origin_first(ranked: list[int], single: dict[int, float], origins: set[int], limit: int) -> list[int]:
    """``ranked`` (by their own what-ifs, best first) with an origin of lateness moved to the front
    when the first rank is not one and the origin's what-if is within :data:`ORIGIN_NEAR` of it.

    A rank held up by an origin replays about as well as the origin itself: its gaps hold the
    wait for it, and the replay gives it its peers' (a pipeline stage's replica behind its slow
    upstream partner, seed 22000 #0086: 12.8 % against the slow rank's own 12.6 %). Of two
    what-ifs this close, the one whose own work grew is the cause."""
    if not origins or not ranked or ranked[0] in origins:
        return ranked
    first = next((r for r in ranked[1:limit] if r in origins and single[r] >= ORIGIN_NEAR * single[ranked[0]]), None)
    return ranked if first is None else [first] + [r for r in ranked if r != first]


def _dominates(chosen: list[int], single: dict[int, float]) -> bool:
    """The chosen ranks' lateness costs time and the others' does not: each chosen rank's own
    what-if is at least ``DOMINANT_SINGLE`` times the largest of any other candidate. Other ranks
    may take their turns at being late (a GC pause here, a slow batch there) without holding the
    job up for long; a rank that stalls for a long time in a few steps is still the culprit."""
    mine = [single.get(r, 0.0) for r in chosen]
    rest = [v for r, v in single.items() if r not in chosen]
    return bool(mine) and min(mine) > 0 and min(mine) >= DOMINANT_SINGLE * max(rest, default=0.0)


@dataclass
class Context:
    store: Store
    job: str
    d: JobData
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(cls, store: Store, job: str, **options: Any) -> "Context":
        return cls(store=store, job=job, d=load(store, job), options=options)

    # -- basics -----------------------------------------------------------------------------
    @property
    def where(self) -> str:
        """SQL predicate for evidence queries (they must run as-is in `stallscope sql`)."""
        return "job = '" + self.job.replace("'", "''") + "'"

    @cached_property
    def step_ms(self) -> float:
        b = self.d.breakdown
        if b.height == 0:
            return 0.0
        per_step = b.group_by("step").agg(pl.col("step_ns").max())
        return float(per_step["step_ns"].median()) / 1e6

    @cached_property
    def n_steps(self) -> int:
        return int(self.d.breakdown["step"].n_unique()) if self.d.breakdown.height else 0

    @cached_property
    def ranks_per_host(self) -> dict[str, int]:
        g = self.d.ranks.group_by("host").agg(pl.len())
        return dict(zip(g["host"].to_list(), g["len"].to_list()))

    @cached_property
    def device_names(self) -> list[str | None]:
        """The GPU models the job's traces declare (``ranks.device_name``, from ``deviceProperties``)."""
        try:
            return self.store.sql("SELECT DISTINCT device_name FROM ranks WHERE job = ?", [self.job])["device_name"].to_list()
        except Exception:  # noqa: BLE001 - a store without the column
            return []

    @property
    def gpus_per_host(self) -> int:
        """Ranks of the fullest host (1 when hosts are unknown): the GPUs that share a host's NICs."""
        return max(self.ranks_per_host.values()) if self.ranks_per_host else 1

    @cached_property
    def received(self) -> pl.DataFrame:
        """Per rank and step: elements received by all-to-alls with recorded sizes. In a MoE job
        a rank's expert work is proportional to the tokens the router sent it, which is what its
        dispatch all-to-all receives."""
        return self.store.sql(
            "SELECT rank, step, sum(out_nelems) AS recv FROM collectives WHERE job = ? AND op = 'alltoall' "
            "AND out_nelems > 0 AND step IS NOT NULL GROUP BY rank, step", [self.job])

    def work_ratio(self, ranks: list[int]) -> float | None:
        """How many times the other ranks' all-to-all elements ``ranks`` receive (mean of theirs over
        the median of the others' per step, median over steps); None without recorded sizes."""
        r = self.received
        if r.height == 0:
            return None
        per = (r.with_columns(pl.col("rank").is_in(ranks).alias("mine"))
               .group_by("step").agg(pl.col("recv").filter(pl.col("mine")).mean().alias("m"),
                                     pl.col("recv").filter(~pl.col("mine")).median().alias("o"))
               .drop_nulls().filter(pl.col("o") > 0))
        return float((per["m"] / per["o"]).median()) if per.height else None

    @cached_property
    def hosts_known(self) -> bool:
        return bool(self.d.ranks["host_known"].all()) if self.d.ranks.height else False

    @cached_property
    def features(self) -> pl.DataFrame:
        return rank_features(self.d)

    @cached_property
    def sync(self) -> pl.DataFrame:
        return sync_members(self.d)

    @cached_property
    def blame(self) -> pl.DataFrame:
        return exclusive_blame(self.sync)

    @cached_property
    def host_blame(self) -> pl.DataFrame:
        return host_blame(self.sync)

    @cached_property
    def timeline(self) -> whatif.Timeline | None:
        w = self.d.breakdown.select("rank", "start_ns", "end_ns")
        return whatif.build_timeline(self.d.members, self.d.instances, w, self.d.ranks.select("rank", "host"),
                                     world=self.d.world_size)

    @cached_property
    def clusters(self) -> list[Candidate]:
        if self.features.height < 3 or self.step_ms <= 0:
            return []
        return candidates(rank_vectors(self.features, self.step_ms), self.ranks_per_host)

    # -- lateness ---------------------------------------------------------------------------
    @cached_property
    def late_share(self) -> pl.DataFrame:
        """Per (rank, step): summed positive lateness at synchronous collectives / median step."""
        if self.sync.height == 0 or self.step_ms <= 0:
            return pl.DataFrame(schema={"rank": pl.Int32, "step": pl.Int64, "share": pl.Float64})
        m = self.sync.filter(pl.col("step").is_not_null())
        return (m.group_by("rank", "step").agg(pl.col("lateness_ns").clip(0).sum().alias("late_ns"))
                .with_columns((pl.col("late_ns") / (self.step_ms * 1e6)).alias("share")).drop("late_ns"))

    @cached_property
    def late_sets(self) -> LateSets:
        ls = self.late_share
        if ls.height == 0:
            return LateSets([], {}, {}, 0, 0)
        lower = ls.filter(pl.col("share") <= pl.col("share").median().over("step"))
        stats = lower.group_by("step").agg(pl.col("share").median().alias("med"),
                                           (1.4826 * (pl.col("share") - pl.col("share").median()).abs().median()).alias("mad"))
        flagged = ls.join(stats, on="step").with_columns(
            (pl.col("share") - pl.col("med")).alias("excess"),
            pl.max_horizontal(pl.col("mad") * LATE_SIGMAS, pl.lit(MIN_LATE_SHARE)).alias("thr"),
        ).filter(pl.col("excess") > pl.col("thr"))
        per_step: dict[int, list[int]] = {}
        excess: dict[tuple[int, int], float] = {}
        for s, r, x in flagged.select("step", "rank", "excess").iter_rows():
            per_step.setdefault(int(s), []).append(int(r))
            excess[(int(s), int(r))] = float(x)
        steps = ls["step"].n_unique()
        counts = flagged.group_by("rank").agg(pl.col("step").sort())
        persistent, intermittent = [], {}
        for r, st in counts.iter_rows():
            if len(st) >= max(1, PERSISTENT_SHARE * steps) and steps >= 2:
                persistent.append(int(r))
            else:
                intermittent[int(r)] = [int(x) for x in st]
        return LateSets(sorted(persistent), intermittent, per_step, flagged.height, flagged["rank"].n_unique(), excess)

    def whole_host_of(self, ranks: list[int]) -> str | None:
        """The host whose ranks are (almost) exactly ``ranks``: ≥ 75 % of its ranks and nothing else."""
        if not ranks or not self.hosts_known:
            return None
        host_of = self.d.host_of()
        hs = {host_of.get(r) for r in ranks}
        if len(hs) != 1:
            return None
        h = hs.pop()
        n = self.ranks_per_host.get(h, 0)  # type: ignore[arg-type]
        if n < 2 or len(self.ranks_per_host) < 2:
            return None
        return h if len(ranks) >= max(2, int(np.ceil(0.75 * n))) else None

    @cached_property
    def jitter_floor(self) -> float:
        """Jitter what-if gain that noise alone explains in this job: :func:`noise_floor` of its
        rank count, :data:`COMPUTE_NOISE_FLOORS` times that when the ranks differ mostly in compute
        time (the GPUs' own kernel-time noise, which synchronous training always pays)."""
        c_var, h_var = variation_sources(self.d.breakdown)
        host_driven = h_var >= HOST_DRIVEN * c_var
        return noise_floor(self.d.ranks.height) * (1.0 if host_driven else COMPUTE_NOISE_FLOORS)

    @cached_property
    def jitter_bar(self) -> float:
        """The jitter what-if gain a jitter finding needs: :attr:`jitter_floor`, divided by how many
        times the typical rank's step-to-step variation exceeds the most a healthy job's does (at
        most the floor itself). For the host-side time (:func:`typical_spread`) that is the lesser
        of its share of the step over ``TYPICAL_HOST_JITTER`` and its length over
        ``TYPICAL_HOST_JITTER_NS``; for the compute, its share over ``TYPICAL_COMPUTE_JITTER``;
        whichever of the two is more.

        The floor is what synchronizing this many ranks costs when their noise is a healthy
        cluster's. A typical rank that varies k times more than any healthy one has noise of which
        at most 1/k is the healthy kind, so at most 1/k of the floor is noise every job pays; the
        rest of the waiting is the jitter's. Small jitter on a big job otherwise read as healthy:
        seed 35000's #0139 (64 ranks, typical host-side time 2.2x the bar, 1.5 ms: replay gains
        3.8 % against a floor of 4.6 %, planted 4.9 %), #0175, #0184 and #0007. Host-side noise
        (Python, the input queue, OS ticks) comes in absolute time, so a job of short steps
        varies by a larger share of them: an independent simulator's healthy 23 ms steps with a
        1-2.5 ms DataLoader read 2.2 % (0.5 ms) and keep the whole floor; healthy and imbalanced
        jobs of seeds 34000 and 35000 vary by at most 0.57 ms, jitter faults from 0.71 ms."""
        host, compute = self.typical_spreads
        host_beyond = min(host / TYPICAL_HOST_JITTER, host * self.step_ms * 1e6 / TYPICAL_HOST_JITTER_NS)
        beyond = max(host_beyond, compute / TYPICAL_COMPUTE_JITTER, 1.0)
        return self.jitter_floor / beyond

    @cached_property
    def sync_verdict(self) -> SyncVerdict:
        """Decide between stragglers, a slow host and jitter by how much each explanation's
        what-if recovers (see the module doc of :mod:`stallscope.rules.synchronization`)."""
        n = self.d.ranks.height
        jit = self.lost_to_jitter() or 0.0
        ls = self.late_sets
        none = SyncVerdict("none", [], None, 0.0, jit, [], False)
        if self.timeline is None or n < 2:
            return none
        # candidates: ranks late in some step, and the ranks holding others up the most
        cand: list[int] = list(dict.fromkeys(ls.persistent + sorted(ls.intermittent, key=lambda r: -len(ls.intermittent[r]))))
        top_blame = self.blame.group_by("rank").agg(pl.col("blame_ns").sum()).sort("blame_ns", descending=True)["rank"].to_list()
        for r in top_blame[:8]:
            if r not in cand:
                cand.append(int(r))
        cand = cand[:32]
        single = {r: self.lost_if_like_peers([r]) or 0.0 for r in cand}
        ranked = sorted(single, key=lambda r: -single[r])
        limit = max(2, int(0.1 * n))
        origins = self.origins
        ranked = origin_first(ranked, single, origins, limit)
        chosen, set_lost = self._rank_set(ranked, single, top_blame, jit, limit, origins)
        # how well ranks (origins or not) explain the waiting: the yardstick a host must beat
        free, free_lost = self._rank_set(ranked, single, top_blame, jit, limit, set()) if origins else (chosen, set_lost)
        rank_best, rank_lost = (free, free_lost) if free_lost > set_lost else (chosen, set_lost)
        # the ranks of one host together
        host_best, host_lost = None, 0.0
        if self.hosts_known and len(self.ranks_per_host) >= 2:
            host_of = self.d.host_of()
            for h in {host_of[r] for r in cand if r in host_of}:
                ranks = self.d.ranks_of(h)
                if len(ranks) < 2:
                    continue
                lh = self.lost_if_like_peers(ranks) or 0.0
                if lh > host_lost:
                    host_best, host_lost = h, lh
        alt = {"chosen": sorted(chosen), "chosen_lost": set_lost, "host": host_best, "host_lost": host_lost}
        none.alternatives = alt
        late_steps, persistent = self._late_steps(chosen)
        # a host-level fault slows its ranks alike: no minority of them explains half of it (a
        # straggler inside a host-synchronized group holds the others up: it alone explains most)
        host_ranks = set(self.d.ranks_of(host_best)) if host_best is not None else set()
        minority = bool(chosen) and host_best is not None and len(chosen) <= 0.5 * len(host_ranks)
        inside = self._straggler_inside(host_best) if host_best is not None else []
        # ... unless most of the host's ranks are origins of lateness (their own work grew): then
        # every rank of the host is slow (a placement fault) and that rank is only the last of a
        # slow group (seed 20000 #0134: all four ranks of a cross-socket host stall on the CPU)
        if inside and len(origins & host_ranks) > 0.5 * len(host_ranks):
            alt["inside_rejected"] = inside
            inside = []
        if inside and not (set(inside) <= set(chosen)):
            inside_lost = self.lost_if_like_peers(inside) or 0.0
            if inside_lost >= 0.01:
                chosen, set_lost = inside, inside_lost
                rank_best, rank_lost = chosen, set_lost
                alt.update(chosen=sorted(chosen), chosen_lost=set_lost)
                late_steps, persistent = self._late_steps(chosen)
        alt["inside"] = inside
        # the ranks late in most steps are (nearly) exactly one host's: the jitter what-if, which
        # removes every rank's variation, also removes that host's systematic delay, so it is not
        # the yardstick for the host (jitter is lateness spread over many ranks, no culprit)
        persist = set(ls.persistent)
        host_persistent = bool(persist) and persist <= host_ranks and len(persist) >= HOST_SHARE * len(host_ranks)
        # ... but when the host's ranks are the ones late in most steps and no minority of them is
        # where the lateness starts (a straggler's own work grows; its held-up peers' does not),
        # the minority that explains part of it is just the share of the host's ranks the replay
        # took: a placement fault slows every rank of the host a little, none of them stands out
        host_origins = origins & host_ranks
        if host_persistent and not (host_origins and len(host_origins) <= 0.5 * len(host_ranks)):
            minority = False
        # the lateness of the host starts on a minority of its ranks (their own work grew, the
        # others' did not): those ranks, replayed together, compete with the host. Two
        # intermittent stragglers of one host, late in turns, each explain only their own steps
        # (seed 33000 #0135: GC pauses on ranks 9 and 10 of a tensor-parallel host; the host's
        # replay, 5.8 %, beat either alone, 2.7 %, while both together recover as much)
        # (less those that add only a sliver of noise to the others' gain: seed 33000 #0056, a
        # compute straggler under heavy noise, and two of its host-mates that were late once).
        # Only when the host would otherwise win: a straggler the host does not beat keeps its set
        # (crosscheck n5_s1: rank 15's two DataLoader hiccups would join straggler 13), and so
        # does a straggler found inside the host, holding its host-mates up (seed 34000 #0122: a
        # compute straggler, rank 6, 2.35 % alone, 2.4 % planted; rank 7's noise joined it)
        # Not when as many ranks elsewhere are origins too (``SPREAD_ORIGINS``): lateness that
        # starts on ranks of every host is jitter, and the host's share of it is just the share
        # of the ranks it holds (seed 38000 #0076: 16 ranks of two hosts all jittering, origins
        # 3, 5, 6, 7 on one host and 11, 12, 15 on the other; the first host's four read as
        # intermittent stragglers)
        if (host_origins and len(host_origins) <= 0.5 * len(host_ranks) and not host_origins <= set(chosen)
                and len(origins - host_ranks) < SPREAD_ORIGINS
                and host_lost >= HOST_OVER_RANKS * rank_lost and not inside):
            o, o_lost = self._essential(sorted(host_origins))
            alt.update(host_origins=o, host_origins_lost=o_lost)
            if o_lost > rank_lost and not set(o) <= set(chosen):
                chosen, set_lost, rank_lost, minority = o, o_lost, o_lost, True
                rank_best = chosen
                alt.update(chosen=chosen, chosen_lost=set_lost)
                late_steps, _ = self._late_steps(chosen)
                # persistent only if each of them is: two ranks late in turns are intermittent
                persistent = self._each_persistent(chosen)
        jit_bar = 0.0 if host_persistent else 0.6 * jit
        # the host's ranks are the ones late in most steps and its own work grew on most of them
        # (a placement fault: its CPUs, its NIC path slow every rank a little): the best set of
        # ranks wholly inside it is only its latest ranks, so the host need not beat that set by
        # the margin it needs over ranks elsewhere (seed 42000 #0207: a cross-socket host of 8
        # ranks, 6 of them origins, late in 3 of 3 steps; its three latest ranks recovered
        # 3.13 %, the host 3.16 %, and two of them were named stragglers at 2.2 %)
        host_grew = host_persistent and len(host_origins) > 0.5 * len(host_ranks) and set(rank_best) <= host_ranks
        over = 1.0 if host_grew else HOST_OVER_RANKS
        alt["host_grew"] = host_grew
        alt["host_persistent"] = host_persistent
        leads = self._host_leads(host_best) and self._host_late_together(host_best) if host_best is not None else False
        alt["host_leads"] = leads
        if leads and self._host_jitter_tail(host_best):
            alt["host_jitter_tail"] = True
            leads = False
        if (host_best is not None and host_lost >= over * rank_lost and host_lost >= 0.01 and host_lost >= jit_bar and leads
                and not (minority and rank_lost >= 0.5 * host_lost) and not (inside and set(inside) <= set(chosen))):
            hranks = self.d.ranks_of(host_best)
            hsteps = self._late_steps(hranks)[0]
            # a host whose ranks are given more work (the router's hot experts) is late for that,
            # not for where it sits: its ranks are stragglers
            work = self.work_ratio(hranks)
            alt["host_work_ratio"] = work
            kind = "straggler" if work is not None and work >= MORE_WORK else "host"
            return SyncVerdict(kind, hranks, host_best if kind == "host" else None, host_lost, jit, hsteps,
                               len(hsteps) >= PERSISTENT_SHARE * self.n_steps, alt)
        if chosen and self._takes_turns(chosen):
            # the "turns" may be a second straggler's: the same ranks late in every step free of the first
            more = self._recurring_elsewhere(chosen, single)
            if more and len(chosen) + len(more) <= limit:
                both = sorted(chosen + more)
                both_lost = self.lost_if_like_peers(both) or 0.0
                if both_lost >= set_lost and not self._takes_turns(both):
                    chosen, set_lost = both, both_lost
                    alt.update(chosen=chosen, chosen_lost=set_lost)
                    late_steps, persistent = self._late_steps(chosen)
        # a rank late in one step of a long profile is a one-off (a DataLoader hiccup the job
        # pays now and then), not a straggler: it does not join one
        one_off = [r for r in chosen if self._one_off(r)]
        if one_off:
            chosen = [r for r in chosen if r not in one_off]
            set_lost = (self.lost_if_like_peers(chosen) or 0.0) if chosen else 0.0
            alt.update(chosen=sorted(chosen), chosen_lost=set_lost, one_off=one_off)
            late_steps, persistent = self._late_steps(chosen)
        # the chosen ranks explain at least half of what the jitter what-if recovers; or that
        # what-if is under the noise floor and the typical rank does not vary (all the variation
        # is of the size and kind healthy noise has), the chosen ranks recur beyond chance
        # (:meth:`_chance_repeats`) and no others take turns: then the rest is the job's noise,
        # and their share need not be half (seed 37000 #0153: DataLoader stalls of ranks 17 and
        # 20 in 7 of 10 steps of a noisy 64-rank job, 2.9 % against a what-if of 5.9 % and a floor
        # of 9.2 %; 2.7 % planted). A typical rank that varies is jitter, whose largest spikes
        # explain less than half (seed 35000 #0159: 1.6 % for two ranks of a 5.5 % jitter)
        if (chosen and set_lost >= 0.01 and (set_lost >= 0.5 * jit or (jit < self.jitter_floor and not self.typical_varies))
                and (not self._takes_turns(chosen) or _dominates(chosen, single))
                and not self._chance_repeats(chosen, single, jit)
                and not self._origins_spread(chosen, set_lost)
                and not self._jitter_tail(chosen)):
            host = self.whole_host_of(chosen)
            if host is not None:
                return SyncVerdict("host", self.d.ranks_of(host), host, max(set_lost, host_lost), jit, late_steps, persistent, alt)
            hidden, joined = self._hidden_behind(chosen, set_lost, limit)
            if hidden or joined:
                chosen = sorted(chosen + hidden + joined)
                set_lost = self.lost_if_like_peers(chosen) or set_lost
                alt.update(chosen=chosen, chosen_lost=set_lost)
                alt.update({k: v for k, v in (("hidden_behind", hidden), ("joined", joined)) if v})
                late_steps, persistent = self._late_steps(chosen)
            # persistent only if each of them is: ranks late in turns are intermittent stragglers
            # (#0153: ranks 17 and 20 together late in 7 of 10 steps, rank 17 in 6; they stalled in 4 and 3)
            persistent = persistent and self._each_persistent(chosen)
            return SyncVerdict("straggler", sorted(self._without_held_up(chosen, alt)), None, self._bounded(chosen, set_lost), jit,
                               late_steps, persistent, alt)
        if jit >= 0.01:
            full = max(jit, self.lost_to_jitter(across_groups=True) or 0.0)
            # many ranks late in turn, yet the own work of only a few grew: the others were held
            # up by them (late ranks of a big job under noise look like turns); when those few,
            # replayed together, recover (nearly) all the jitter what-if does, they are the culprits
            if origins and len(origins) <= limit:
                o = sorted(origins)
                o_lost = self.lost_if_like_peers(o) or 0.0
                alt.update(origins=o, origins_lost=o_lost)
                # ... or when the jitter is no more than noise (no finding), what stands above it
                # is the origins' own excess. So too when the typical rank does not vary (no jitter
                # finding either): the what-if's gain up to the noise floor is the noise every
                # synchronization pays, and the origins need explain only what stands above it
                # (seed 34000 #0014: GC pauses on ranks 28 and 30 in turns, 3.3 % of a 32-rank
                # job whose replay with every rank at the median gains 6.8 %, floor 4.2 %)
                above = full if self.typical_varies else full - self.jitter_floor
                if (o_lost >= 0.01 and (o_lost >= ORIGINS_EXPLAIN * above or full < self.jitter_floor)
                        and not self._jitter_tail(o)):
                    host = self.whole_host_of(o)
                    if host is None:
                        o, o_lost = self._essential(o)
                        host = self.whole_host_of(o)
                    o_steps = sorted(st for st, rs in ls.per_step.items() if set(rs) & set(o))
                    if host is not None:
                        return SyncVerdict("host", self.d.ranks_of(host), host, o_lost, jit, o_steps,
                                           len(o_steps) >= PERSISTENT_SHARE * self.n_steps, alt)
                    return SyncVerdict("straggler", self._without_held_up(o, alt), None, self._bounded(o, o_lost), jit, o_steps,
                                       len(o_steps) >= max(2, PERSISTENT_SHARE * self.n_steps), alt)
            # the typical rank does not vary (no jitter finding): the few ranks whose own work
            # exceeds their peers' in most steps are the stragglers. In a pipeline too: its
            # bubbles can absorb most of a stage's stall, so that the stage is late in one step
            # or none, while the replay on its peers' dependencies still measures what the stall
            # costs (seed 24000 #0127: a 40-53 ms host stall in every step of rank 29, late in
            # one of 6 steps, replays for 1.59 %, 1.55 % planted)
            steady = self.steady_excess
            if not self.typical_varies and steady and len(steady) <= limit:
                s_lost = self.lost_if_like_peers(steady) or 0.0
                alt.update(steady=steady, steady_lost=s_lost)
                if s_lost >= 0.01:
                    s_steps = self._late_steps(steady)[0]
                    host = self.whole_host_of(steady)
                    if host is not None:
                        return SyncVerdict("host", self.d.ranks_of(host), host, s_lost, jit, s_steps, True, alt)
                    return SyncVerdict("straggler", steady, None, self._bounded(steady, s_lost), jit, s_steps, True, alt)
            return SyncVerdict("jitter", self.d.ranks["rank"].to_list(), None, full, jit, sorted(ls.per_step), True, alt)
        return none

    def _late_steps(self, ranks: list[int]) -> tuple[list[int], bool]:
        """The steps in which any of ``ranks`` was late, and whether that is persistent (at least
        ``PERSISTENT_SHARE`` of the steps, and two or more)."""
        wanted = set(ranks)
        steps = sorted(s for s, rs in self.late_sets.per_step.items() if wanted & set(rs)) if wanted else []
        return steps, len(steps) >= max(2, PERSISTENT_SHARE * self.n_steps)

    def _each_persistent(self, ranks: list[int]) -> bool:
        """Whether every one of ``ranks`` is late in most steps on its own (:meth:`_late_steps`):
        a set late in turns covers most steps together, yet each of its ranks is intermittent."""
        return all(self._late_steps([r])[1] for r in ranks)

    def _without_held_up(self, chosen: list[int], alt: dict[str, Any]) -> list[int]:
        """``chosen`` less its held-up ranks (:meth:`_held_up`), which ``alt`` records."""
        held = self._held_up(chosen)
        if held:
            alt["held_up"] = held
        return [r for r in chosen if r not in held]

    def _held_up(self, chosen: list[int]) -> list[int]:
        """The ranks of a straggler set that did no extra work of their own: under
        ``HELD_UP_SHARE`` of what replaying each alone saves (:meth:`own_excess_share`, against
        the peers of its role). They are late because they waited for the others of the set: not
        culprits, although the set's replay (the cost reported, bounded by the set's own excess)
        may need them. Seed 23000 #0162: in a 6-stage pipeline, the last stage of the slow rank's
        replica arrives late at its stage's all-reduce every step; alone it replays for 0.5 % of
        the job (1.1 % before the replay took a culprit's peers' dependencies, which made it part
        of the chosen set) but did 0.01 % more work than its stage's other replicas: replaying a
        rank's gaps as its peers' median, slot by slot, gains from their noise. Empty unless at
        least one rank remains."""
        if len(chosen) < 2:
            return []
        held = []
        for r in chosen:
            own, alone = self.own_excess_share([r]), self.lost_if_like_peers([r]) or 0.0
            if own is not None and alone > 0 and own < HELD_UP_SHARE * alone:
                held.append(r)
        return held if len(held) < len(chosen) else []

    def _one_off(self, rank: int) -> bool:
        """Late in exactly one step of a profile of ``ONE_OFF_STEPS`` or more steps, and not a
        persistent straggler. A straggler recurs: an intermittent one stalls in several steps of a
        long profile (a quarter to a half of them on our generator; twice in eight on
        ``noisy_sim``), while one stall in eight steps on one of 16 ranks is the base rate of
        DataLoader hiccups (0.8 % per rank and step) that a healthy job pays now and then. Short
        profiles keep a single late step: with three or four steps it is all there is."""
        if self.n_steps < ONE_OFF_STEPS or rank in self.late_sets.persistent:
            return False
        return len(self.late_sets.intermittent.get(rank, [])) == 1

    def _jitter_tail(self, ranks: list[int]) -> bool:
        """Jitter, not stragglers: a short profile (3 to ``ONE_OFF_STEPS`` - 1 steps) in which the
        typical rank varies (:attr:`typical_varies`: every rank's host-side time moves from step
        to step), and each of ``ranks`` did more work than its role peers, by ``OWN_EXCESS_SHARE``
        of the median step, in one step at most. When every rank jitters, each step waits for
        its largest delay, and a heavy-tailed delay (data loading, OS noise) makes that one or two
        ranks in a few steps, each once: they are the tail of the jitter, not culprits (seed
        39000 #0048: 16 jittering ranks of two hosts over 3 steps, ranks 0 and 1 the latest once
        each, 5.1 % of an 11.5 % jitter). A straggler recurs, or its peers are quiet: a persistent
        one is above its peers in every step, and a rank above them in two of three steps stays
        a straggler (seed 38000 #0120, rank 7 by 15 % and 73 % of a step, though planted as the
        jitter's largest draws). Long profiles have the one-off test instead
        (:meth:`_one_off`); in two steps, one is half the profile, as often as an intermittent
        straggler stalls (seed 38000 #0201: GC pauses of 5 ms on rank 0 in one step and rank 9 in
        the other, under noise that moves the typical rank 0.6 % of a step)."""
        if not ranks or not 3 <= self.n_steps < ONE_OFF_STEPS or not self.typical_varies or self.step_ms <= 0:
            return False
        above = self._above_peers(ranks).group_by("rank").agg(pl.col("above").sum().alias("n"))
        return above.height == len(set(ranks)) and int(above["n"].max()) <= 1

    def _above_peers(self, ranks: list[int]) -> pl.DataFrame:
        """Per rank of ``ranks`` and step (:meth:`_own_and_peers`), ``above``: it did more work than
        its role peers' median by ``OWN_EXCESS_SHARE`` of the median step."""
        thr = OWN_EXCESS_SHARE * self.step_ms * 1e6
        return (self._own_and_peers().filter(pl.col("rank").is_in(ranks))
                .with_columns(((pl.col("own") - pl.col("peer")) >= thr).alias("above")))

    def _host_jitter_tail(self, host: str) -> bool:
        """Jitter, not a slow host: in a short profile where the typical rank varies
        (:meth:`_jitter_tail` of the host's ranks: none of them did more work than its role peers
        in more than one step), every step in which the host's ranks were late is a step in which
        one of them did (by ``OWN_EXCESS_SHARE`` of the median step). Ranks that sync inside their
        host first (a tensor-parallel group) are late together whenever one of them is, so the
        largest delays of a jittering job make whole hosts late, in turns or twice on one host:
        their lateness starts on one rank per step, a different one each time (seed 40000 #0198:
        12 ranks of three 4-GPU tensor-parallel hosts jittering over 3 steps; rank 11's 6.5 ms
        and rank 9's 8.1 ms DataLoader delays made their host the latest in two steps, 6.7 % for
        the host against 2.4 % planted jitter). A placement fault slows its host's ranks in
        every step: their own work grows in most steps (a CPU or memory placement), or none of
        it does and the host's collectives are what is slow (P2P off, a NIC across the sockets):
        either way some late step has no single rank's spike behind it."""
        ranks = self.d.ranks_of(host)
        if len(ranks) < 2 or not self._jitter_tail(ranks):
            return False
        steps = self._late_steps(ranks)[0]
        if not steps:
            return False
        return set(steps) <= set(self._above_peers(ranks).filter(pl.col("above"))["step"].to_list())

    def _host_leads(self, host: str) -> bool:
        """Whether ``host``'s ranks are the latest of all hosts' in most steps (≥ PERSISTENT_SHARE)
        and no other host is ever later than it by as much as it usually leads.

        A host whose placement slows it is late every step, by about the same; when the hosts'
        ranks sync among themselves first (tensor-parallel or shard groups inside a host),
        jitter makes whole hosts late in turn, and one of them can hold the most lost time over
        a few steps while another host leads in the rest by as much. Jobs of fewer than 3 steps
        or one host are not judged (True)."""
        ls = self.late_share
        if ls.height == 0 or len(self.ranks_per_host) < 2:
            return True
        hs = (ls.join(self.d.ranks.select("rank", "host"), on="rank").filter(pl.col("host").is_not_null())
              .group_by("host", "step").agg(pl.col("share").mean()))
        alike = self._replica_hosts(host)
        if alike is not None:
            hs = hs.filter(pl.col("host").is_in(sorted(alike | {host})))
        mine = hs.filter(pl.col("host") == host).select("step", pl.col("share").alias("mine"))
        other = hs.filter(pl.col("host") != host).group_by("step").agg(pl.col("share").max().alias("other"))
        lead = mine.join(other, on="step").select((pl.col("mine") - pl.col("other")).alias("lead"))["lead"].to_list()
        if len(lead) < 3:
            return True
        ahead = sorted(x for x in lead if x > 0)
        if len(ahead) < PERSISTENT_SHARE * len(lead):
            return False
        typical = ahead[len(ahead) // 2]
        return all(-x < typical for x in lead)

    def _replica_hosts(self, host: str) -> set[str] | None:
        """In a pipeline, the other hosts running replicas of ``host``'s stage (see
        :func:`whatif._replica_groups`): a slow host makes the hosts upstream and downstream of it
        in its pipeline late too (they wait for its activations and gradients, then arrive late
        at their own stage's all-reduce), so it leads only its own stage's hosts. None in a job
        without point-to-point traffic, or when the host's stage has no other host."""
        tl = self.timeline
        if tl is None or not tl.pipelined:
            return None
        rep = tl.chain.select("rank", "replica").unique().join(self.d.ranks.select("rank", "host"), on="rank")
        mine = set(rep.filter(pl.col("host") == host)["replica"].to_list())
        others = set(rep.filter(pl.col("replica").is_in(sorted(mine)) & (pl.col("host") != host))["host"].to_list())
        return others or None

    def _host_late_together(self, host: str) -> bool:
        """Whether nearly all of ``host``'s ranks (all but 1 - HOST_SHARE of them) are late in some
        step. A placement fault (P2P off, a NIC across the sockets, the wrong NUMA node) slows
        every rank of its host, so under noise each of them is late now and then; a straggler
        inside a group that spans part of a host (a tensor-parallel group of 4 on an 8-GPU host)
        makes that group late every step while the rest of the host is never late."""
        ranks = set(self.d.ranks_of(host))
        late = set().union(*self.late_sets.per_step.values()) if self.late_sets.per_step else set()
        if len(ranks) < 2 or not (late & ranks):
            return True
        never = ranks - late
        return len(never) <= (1 - HOST_SHARE) * len(ranks)

    def _rank_set(self, ranked: list[int], single: dict[int, float], top_blame: list[int], jit: float, limit: int,
                  origins: set[int]) -> tuple[list[int], float]:
        """The smallest set of ranks (≤ ``limit``) whose what-if recovers most of the waiting, and
        its gain: ranks added one by one by their own what-if (``ranked``), then, when they leave
        the waiting unexplained, the most-blamed ranks replayed together (see
        :meth:`_joint_culprits`). With ``origins``, a rank that is not one is never added to a
        first one (it was held up by the others)."""
        chosen: list[int] = []
        set_lost = 0.0
        best_single = single[ranked[0]] if ranked else 0.0
        for r in ranked[:limit]:
            if single[r] < 0.2 * best_single or single[r] <= 0:
                break
            if chosen and origins and r not in origins:
                continue
            chosen.append(r)
            set_lost = self.lost_if_like_peers(chosen) or 0.0
            if set_lost >= 0.8 * max(jit, best_single):
                break
        if set_lost < 0.8 * max(jit, best_single):  # the ranks one by one leave the waiting unexplained
            blamed = [r for r in top_blame if r in origins] if origins else top_blame
            joint, joint_lost = self._joint_culprits(blamed[:limit])
            if joint_lost >= 1.5 * set_lost and joint_lost >= 0.01:
                chosen, set_lost = joint, joint_lost
        return chosen, set_lost

    @cached_property
    def typical_spreads(self) -> tuple[float, float]:
        """(host stall, compute): :func:`typical_spread` of each over this job's steps."""
        b = self.d.breakdown
        return typical_spread(b, "host_stall_ns"), typical_spread(b, "compute_ns")

    @cached_property
    def typical_varies(self) -> bool:
        """Whether the typical rank varies from step to step enough for jitter: its host-side time
        by ``TYPICAL_HOST_JITTER`` or its compute by ``TYPICAL_COMPUTE_JITTER`` (:func:`typical_spread`).
        When it does not, what the jitter what-if recovers is the noise every synchronization of
        this job pays (kernel-time noise at dozens of collectives a step, rare pauses), not jitter.

        Only the relative bar decides: asking more of a typical rank that moves by under a
        millisecond a step (twice the bar, since host noise comes in absolute time) silenced a
        healthy job's 4.4 % (seed 35000 #0000, 0.56 ms = 0.54 %) but also ``moe_sim``'s shifting
        hot experts (``mo_i2``, ``mo_i3``: 0.19-0.25 ms = 0.70 % at 26-36 ms steps, 8.8-12.8 %
        planted), so it was not kept."""
        host, compute = self.typical_spreads
        return host >= TYPICAL_HOST_JITTER or compute >= TYPICAL_COMPUTE_JITTER

    @cached_property
    def steady_excess(self) -> list[int]:
        """Ranks whose own work (compute, host stall, other idle) exceeds their role peers' median
        in at least ``PERSISTENT_SHARE`` of the steps (three or more) by more than three robust
        standard deviations of the peers (1.4826 x MAD) and ``OWN_EXCESS_SHARE`` of the step: the
        persistent stragglers, found from their own work, not from who arrived last (in a job that
        synchronizes dozens of times a step, noise makes everybody late somewhere)."""
        b = self.d.breakdown
        tl = self.timeline
        if b.height == 0 or tl is None or self.n_steps < 3 or self.step_ms <= 0:
            return []
        o = self._own_and_peers()
        o = o.with_columns(((pl.col("own") - pl.col("peer")).abs().median().over("role", "step") * 1.4826).alias("sigma"))
        thr = pl.max_horizontal(3.0 * pl.col("sigma"), pl.lit(OWN_EXCESS_SHARE * self.step_ms * 1e6))
        per = (o.with_columns((pl.col("own") - pl.col("peer") > thr).alias("above"))
               .group_by("rank").agg(pl.col("above").sum().alias("n"), pl.len().alias("steps")))
        need = max(3, math.ceil(PERSISTENT_SHARE * self.n_steps))
        return sorted(int(r) for r in per.filter(pl.col("n") >= need)["rank"].to_list())

    @cached_property
    def origins(self) -> set[int]:
        """Ranks whose own work grew in a step where they were late: the origins of lateness.

        A rank arrives late either because its own work (compute, host stall, other idle time:
        everything but waiting and communicating) took longer, or because it waited for a late
        rank earlier in the step (in a pipeline, a stage receiving late activations sends its
        gradients back late; it is as late as the stage that held it up, and blamed as much).
        A rank is an origin when, in one of its late steps, its own work exceeds its own median
        step by ``OWN_EXCESS_SHARE`` of the median step (an intermittent stall), or, late in most
        steps, exceeds the step's median rank by as much in most of them (a persistent straggler).
        Empty when the breakdown cannot tell (then nobody is excluded)."""
        b = self.d.breakdown
        ls = self.late_sets
        if b.height == 0 or not ls.per_step or self.step_ms <= 0:
            return set()
        o = b.select("rank", "step", OWN_WORK.alias("own")).with_columns(
            pl.col("own").median().over("rank").alias("rank_med"), pl.col("own").median().over("step").alias("step_med"))
        thr = OWN_EXCESS_SHARE * self.step_ms * 1e6
        late = pl.DataFrame([(int(st), int(r)) for st, rs in ls.per_step.items() for r in rs], orient="row",
                            schema={"step": pl.Int64, "rank": pl.Int32})
        if late.height == 0:
            return set()
        o = o.with_columns(pl.col("step").cast(pl.Int64), pl.col("rank").cast(pl.Int32)).join(late, on=["step", "rank"])
        spikes = set(o.filter(pl.col("own") - pl.col("rank_med") >= thr)["rank"].to_list())
        persist = set(ls.persistent)
        above = (o.filter(pl.col("rank").is_in(list(persist))).group_by("rank")
                 .agg(((pl.col("own") - pl.col("step_med")) >= thr).mean().alias("share")))
        steady = {int(r) for r, sh in above.iter_rows() if sh >= 0.5}
        return {int(r) for r in spikes} | steady

    def _joint_culprits(self, by_blame: list[int]) -> tuple[list[int], float]:
        """Ranks that are late *together* (in the same steps, at collectives that wait for all of
        them) each explain nothing alone: fixing one leaves the step waiting for the other. The
        single-rank what-ifs miss them, so prefixes of the ranks by exclusive blame are replayed
        together; the smallest prefix that recovers ≥ 80 % of the best prefix's gain is the set."""
        gains: list[tuple[list[int], float]] = []
        for k in range(2, len(by_blame) + 1):
            ranks = [int(r) for r in by_blame[:k]]
            gains.append((ranks, self.lost_if_like_peers(ranks) or 0.0))
        if not gains:
            return [], 0.0
        best = max(g for _, g in gains)
        for ranks, g in gains:
            if g >= 0.8 * best:
                return ranks, g
        return [], 0.0  # pragma: no cover - the best prefix reaches its own gain

    def _straggler_inside(self, host: str) -> list[int]:
        """A straggler inside a host-synchronized group (tensor-parallel, shard group): at the
        host's own intra-node synchronous collectives one rank is the last arriver, holding the
        others up (≥ 60 % of the exclusive blame there, in every step or only some), and that
        waiting stands out against the other hosts' intra-node groups (≥ 3× what the most-blamed
        rank of another host accumulates, median over hosts) and is material (≥ 1 % of the rank's
        time). Then the host's ranks are late at inter-node collectives because they waited for
        it: it, not the host, is the culprit. A host-level fault slows its ranks alike and leaves
        no such rank."""
        if self.blame.height == 0 or self.step_ms <= 0:
            return []
        intra = self.d.instances.filter(pl.col("scope") == "intra").select("instance_id")
        bl = self.blame.join(intra, on="instance_id")
        mine = bl.filter(pl.col("host") == host)
        if mine.height < 3:
            return []
        per = mine.group_by("rank").agg(pl.col("blame_ns").sum().alias("b"), pl.len().alias("n")).sort("b", descending=True)
        total = float(per["b"].sum())
        top, top_b = int(per["rank"][0]), float(per["b"][0])
        if total <= 0 or top_b < 0.6 * total:
            return []
        # what the most-blamed rank of another host accumulates (noise makes someone last every time)
        others = (bl.filter(pl.col("host") != host).group_by("host", "rank").agg(pl.col("blame_ns").sum())
                  .group_by("host").agg(pl.col("blame_ns").max())["blame_ns"])
        if others.len() and top_b < 3.0 * float(others.median() or 0.0):
            return []
        rank_time = self.step_ms * 1e6 * max(1, self.n_steps)
        return [top] if top_b >= 0.01 * rank_time else []

    def _recurring_elsewhere(self, chosen: list[int], single: dict[int, float]) -> list[int]:
        """In the steps where no chosen rank was late (at least two of them), the ranks late in
        nearly all (≥ 70 %) of those steps: jitter makes different ranks late from step to step,
        a second intermittent straggler (with the ranks it holds up) makes the same ones late each
        time. Of those, the one whose own what-if recovers the most is the straggler (the others
        were held up by it). Its gain alone may be small (its stalls can fall where a pipeline
        bubble hides part of them); the caller keeps it only if, with it, no turns remain and the
        set still recovers at least half of the jitter what-if."""
        ls = self.late_sets
        mine = {s for s, rs in ls.per_step.items() if set(rs) & set(chosen)}
        free = [s for s in ls.per_step if s not in mine]
        if len(free) < 2:
            return []
        count: dict[int, int] = {}
        for s in free:
            for r in ls.per_step[s]:
                count[r] = count.get(r, 0) + 1
        recurring = [r for r, c in count.items() if c >= max(2, PERSISTENT_SHARE * len(free))]
        gains = {r: single.get(r) if r in single else (self.lost_if_like_peers([r]) or 0.0) for r in recurring}
        if not gains:
            return []
        top = max(gains, key=lambda r: gains[r] or 0.0)
        return [int(top)] if (gains[top] or 0.0) > 0 else []

    def _chance_repeats(self, chosen: list[int], single: dict[int, float], jit: float) -> bool:
        """Noise, not stragglers: all the variation costs no more than noise does in a job of this
        size (the jitter what-if under the noise floor), and the chosen ranks are several, none
        late in most steps, none dominant. Random pauses on random ranks (a GC pause, a slow
        batch) land twice on the same rank by chance; a real intermittent straggler is one rank
        whose stalls cost far more than anyone else's (:func:`_dominates`), or late in most steps."""
        if jit >= self.jitter_floor or len(chosen) < 2:
            return False
        persistent = set(self.late_sets.persistent)
        return not any(r in persistent for r in chosen) and not _dominates(chosen, single)

    def _origins_spread(self, chosen: list[int], set_lost: float) -> bool:
        """Jitter, not stragglers: besides the chosen ranks, at least ``SPREAD_ORIGINS`` others
        are origins of lateness (their own work grew in a step where they were late), and the
        chosen ranks recover less than ``ORIGINS_EXPLAIN`` of what removing every rank's
        variation does. A straggler's own work grows while its peers' does not; when the
        variation that makes ranks late is spread over many of them, the few that were latest in
        a short profile (three steps: each step has its latest rank) only look like culprits. A
        chosen rank that is the last arriver at ``DOMINANT_LAST`` of its collectives is a culprit
        whatever else is noisy (a 64-rank MoE job's routing noise makes many ranks origins)."""
        others = self.origins - set(chosen)
        if len(others) < SPREAD_ORIGINS:
            return False
        last = self.features.filter(pl.col("rank").is_in(chosen))["last_share"].max()
        if last is not None and float(last) >= DOMINANT_LAST:
            return False
        # what noise alone costs is not the chosen ranks' to explain: the jitter what-if also
        # removes the noise every healthy job pays (a MoE job's routing noise)
        full = max(self.lost_to_jitter() or 0.0, self.lost_to_jitter(across_groups=True) or 0.0)
        return set_lost < ORIGINS_EXPLAIN * (full - self.jitter_floor)

    def _takes_turns(self, chosen: list[int]) -> bool:
        """Jitter, not stragglers: in the steps where no chosen rank was late, other ranks (at
        least two) were late by at least half as much per step as the chosen ones in theirs, and
        no chosen rank's worst lateness dwarfs theirs (3x). A straggler's peers are late only at
        noise level on their own (ranks late *with* it, held up inside its group, do not count);
        under jitter every rank takes its turn, and the biggest spikes only look like culprits."""
        ls = self.late_sets
        ex = ls.excess
        chosen_set = set(chosen)
        mine_steps = {s for s, rs in ls.per_step.items() if chosen_set & set(rs)}
        mine = [x for (_, r), x in ex.items() if r in chosen_set]
        free = [(r, x) for (s, r), x in ex.items() if s not in mine_steps]
        if not mine or len({r for r, _ in free}) < 2:
            return False
        n_free = max(1, self.n_steps - len(mine_steps))
        mine_rate = sum(mine) / max(1, len(mine_steps))
        free_rate = sum(x for _, x in free) / n_free
        return free_rate >= 0.5 * mine_rate and max(mine) < 3.0 * max(x for _, x in free)

    def _hidden_behind(self, chosen: list[int], set_lost: float, limit: int) -> tuple[list[int], list[int]]:
        """Origins of lateness (:attr:`origins`) whose stall fell in a step where a chosen rank
        was late and hid behind it: alone they recover little (the chosen rank's stall was
        longer; everyone waited for it anyway), yet replayed with the chosen ranks they add at
        least ``HIDDEN_SHARE`` of the set's gain: fixing the chosen ranks alone would expose their
        stall. Twice the share :meth:`_essential` asks of a rank to stay: replaying a straggler
        exposes whoever was next in its steps, and in a noisy job that next rank's noise adds up to
        15 % of its gain (seed 42000 #0156: compute straggler 25 of 48 ranks, 1.8 %, 8.9 % noise
        floor; rank 28, late in two of its steps with 1.1 % own excess against its 6.1 %, added
        0.27 % and was named with it). Seed 38000 #0118:
        DataLoader stalls of 167 and 124 ms on ranks 31 and 34 of a 64-rank pipeline in the same
        step; rank 31 alone replays for 6.0 %, rank 34 alone for nothing, both for 7.7 % (as
        planted). Hidden, not merely another rank's noise: alone it recovers at most
        ``HIDDEN_ALONE`` of what it adds to the set (a noisy rank's own hiccups add about what
        they cost alone: ``noisy_sim`` ``n5_i2``, rank 14 alone 2.1 %, adding 2.2 % to straggler 7's
        13.8 %, stays out). Or, whatever it recovers alone, it adds at least ``CO_CULPRIT_SHARE`` of
        the set's gain: a rank late partly in the chosen ranks' steps and partly in its own holds
        the job up in its own right, while noise riding along adds a sliver of the set's gain (at
        most 17 % over the straggler jobs of seeds 35000-41000, their variants and the independent
        simulators: ``n5_s1``, rank 15's two DataLoader hiccups, 1.4 % alone, 2.4 % added to
        straggler 13's 13.9 %). Seed 39000 #0014 with rank 4's trace cut short: intermittent
        stragglers 1 and 5 of a tensor-parallel job, late together in two steps and apart in five;
        rank 5 alone 14.7 %, rank 1 alone 5.9 %, both 25.3 % (rank 1 adds 72 % of rank 5's gain,
        and more than half of its addition shows alone, so the hidden test alone missed it).
        Added one at a time, the largest own excess first, up to ``limit`` ranks. Returns (the
        hidden ranks, the ranks that joined by their share)."""
        steps = set(self._late_steps(chosen)[0])
        cand = [r for r in self.origins - set(chosen) if steps & set(self._late_steps([r])[0])]
        if not cand or set_lost <= 0:
            return [], []
        own = {r: self.own_excess_share([r]) or 0.0 for r in cand}
        added: list[int] = []
        joined: list[int] = []
        lost = set_lost
        for r in sorted(cand, key=lambda x: (-own[x], x)):
            if len(chosen) + len(added) + len(joined) >= limit:
                break
            with_r = self.lost_if_like_peers(sorted(chosen + added + joined + [r])) or 0.0
            gain = with_r - lost
            hidden = gain >= HIDDEN_SHARE * lost and (self.lost_if_like_peers([r]) or 0.0) <= HIDDEN_ALONE * gain
            if hidden or gain >= CO_CULPRIT_SHARE * lost:
                (added if hidden else joined).append(int(r))
                lost = with_r
        return added, joined

    def _essential(self, ranks: list[int]) -> tuple[list[int], float]:
        """``ranks`` less those that add little to their joint what-if, and the gain of the rest.

        Under noise a few ranks of a big job have a step whose own work grew (origins of
        lateness) without holding anyone up for long; replayed with the real culprit they add a
        sliver to its gain. A rank stays when leaving it out loses at least ``ESSENTIAL_SHARE``
        of the set's gain; the one whose absence costs least goes first, one at a time."""
        kept = list(ranks)
        lost = self.lost_if_like_peers(kept) or 0.0
        while len(kept) > 1 and lost > 0:
            trials = [(self.lost_if_like_peers([x for x in kept if x != r]) or 0.0, r) for r in kept]
            best, r = max(trials)
            if best < (1.0 - ESSENTIAL_SHARE) * lost:
                break
            kept.remove(r)
            lost = best
        return kept, lost

    def _bounded(self, ranks: list[int], lost: float) -> float:
        """A straggler's what-if gain, never above the extra work it did (:meth:`own_excess_share`).
        Not for a slow host: a placement fault slows its communication, not its own work."""
        bound = self.own_excess_share(ranks)
        return lost if bound is None else min(lost, bound)

    def roles(self) -> pl.DataFrame:
        """rank, role (the rank's most frequent synchronous group, as the replay's peers), with
        ranks typed as in the breakdown; empty without a timeline."""
        tl = self.timeline
        if tl is None:
            return pl.DataFrame(schema={"rank": self.d.breakdown.schema.get("rank", pl.Int32), "role": pl.Int64})
        return pl.DataFrame({"rank": tl.ranks.astype(np.int64), "role": tl.tail_role}).with_columns(
            pl.col("rank").cast(self.d.breakdown.schema["rank"]))

    def _own_work_by_role(self) -> pl.DataFrame:
        """rank, step, own (:data:`OWN_WORK`), role (the rank's most frequent synchronous group)."""
        return self.d.breakdown.select("rank", "step", OWN_WORK.alias("own")).join(self.roles(), on="rank", how="left")

    def _own_and_peers(self) -> pl.DataFrame:
        """:meth:`_own_work_by_role` with ``peer``: the median own work of the rank's role in that step."""
        return self._own_work_by_role().with_columns(pl.col("own").median().over("role", "step").alias("peer"))

    def own_excess_share(self, ranks: list[int]) -> float | None:
        """Upper bound on what ``ranks`` behaving like their peers can save, as a share of the
        profiled time: the work they did beyond their peers' (compute, host stalls, idle with work
        launched: everything but waiting and communicating), summed over ranks and steps. Shortening
        some tasks of a dependency graph by a total of X shortens its longest path by at most X,
        however the waiting propagates; the replay can exceed it when the peers' recorded gaps are
        shorter than their work (they computed while they waited for the culprit, and were ready
        the moment the collective ended). Peers: the other members of the rank's role (its most
        frequent synchronous group), else every other rank. None when the breakdown cannot tell."""
        b = self.d.breakdown
        tl = self.timeline
        if b.height == 0 or tl is None or tl.makespan <= 0:
            return None
        o = self._own_work_by_role()
        cul = o.filter(pl.col("rank").is_in(ranks))
        rest = o.filter(~pl.col("rank").is_in(ranks))
        if cul.height == 0 or rest.height == 0:
            return None
        by_role = rest.group_by("role", "step").agg(pl.col("own").median().alias("peer"))
        by_step = rest.group_by("step").agg(pl.col("own").median().alias("any"))
        x = (cul.join(by_role, on=["role", "step"], how="left").join(by_step, on="step", how="left")
             .with_columns((pl.col("own") - pl.coalesce("peer", "any")).clip(0).alias("excess")))
        return float(x["excess"].sum()) / tl.makespan

    # -- what-if ----------------------------------------------------------------------------
    @cached_property
    def _lost_cache(self) -> dict[Any, float]:
        return {}

    def lost_if_like_peers(self, ranks: list[int]) -> float | None:
        """What-if: ``ranks`` behave like their median peer at every synchronization."""
        if self.timeline is None:
            return None
        key = ("peers", tuple(sorted(ranks)))
        if key not in self._lost_cache:
            self._lost_cache[key] = whatif.culprits_like_median_peer(self.timeline, ranks)
        return self._lost_cache[key]

    def lost_to_jitter(self, *, across_groups: bool = False) -> float | None:
        """What-if: every rank like the median of its group (``across_groups``: and every group
        like the median group, step by step; see :func:`whatif.everyone_like_median`). The
        verdict weighs stragglers against the within-group figure, which a straggler's own
        group does not inflate; a jitter finding reports the full one."""
        if self.timeline is None:
            return None
        key = ("jitter", across_groups)
        if key not in self._lost_cache:
            self._lost_cache[key] = whatif.everyone_like_median(self.timeline, across_groups=across_groups)
        return self._lost_cache[key]

    def lost_if_transfers(self, key: str, new_transfer_ns: dict[int, float], *,
                          like_peers: list[int] | None = None) -> float | None:
        """What-if: the instances in ``new_transfer_ns`` move their bytes in that time (``key``
        names the scenario for the cache); with ``like_peers``, those ranks also behave like their
        median peer (:func:`whatif.culprits_like_peers_and_transfers_at`)."""
        if self.timeline is None:
            return None
        if like_peers:
            key = (key, "peers", tuple(sorted(like_peers)))
        if key not in self._lost_cache:
            self._lost_cache[key] = (whatif.culprits_like_peers_and_transfers_at(self.timeline, like_peers, new_transfer_ns)
                                     if like_peers else whatif.transfers_at(self.timeline, new_transfer_ns))
        return self._lost_cache[key]

    # -- input quality ----------------------------------------------------------------------
    @cached_property
    def quality(self) -> float:
        """Multiplier (0.5-1) applied to every finding's confidence for doubtful input."""
        q = 1.0
        d = self.d
        if d.ranks.height and d.world_size > d.ranks.height:
            q *= max(0.6, d.ranks.height / d.world_size)
        if d.ranks.height and bool(d.ranks["truncated"].any()):
            q *= 0.9
        if d.clock.height and (d.clock["method"].is_in(["none", "base_time"])).any():
            q *= 0.75
        if 0 < self.n_steps < 3:
            q *= 0.7
        return max(0.5, q)
