"""Collective instances: the same collective matched across all of its participants.

Matching key, per collective row of each rank:

* **channel**: what the collective belongs to. ``pg:<name>:<ranks>`` when the trace names the
  process group (and its members); point-to-point ops whose peer is known go to a directed
  ``p2p:<src>-><dst>`` channel (a send on src pairs with the matching recv on dst, in order;
  PyTorch runs each peer pair on its own NCCL communicator). Traces before PyTorch wrote
  ``Src Rank``/``Dst Rank`` leave the peer to infer: the other member of a 2-rank group; the only
  neighbour of the first or last rank of a pipeline group (its ranks listed by stage); for a
  middle stage, a stream carrying both sends and receives talks to one neighbour — the previous
  stage when a step's first op on it is a receive, the next when it is a send — and of two
  send-only streams the one a step uses first carries activations to the next stage (two
  receive-only streams: the first brings them from the previous one). A send or receive whose
  peer stays unknown pairs with nobody; otherwise the
  NCCL stream (``stream:<id>``, stable across ranks of one program) or, on CPU-only traces,
  ``cpu`` (the enqueue order of ``c10d::*`` calls, identical on every rank).
* **position** in the channel: ``Seq`` when every row of the channel carries it (PyTorch's
  per-group sequence number), except on ``p2p:`` channels (a rank's p2p counter counts its
  messages with every peer, so a send and its receive carry unrelated numbers); else the order
  within (channel, step) — steps are numbered the
  same on every rank (``ProfilerStep#N``), so a rank whose profiling window started one
  collective earlier still matches — falling back to the order within the channel outside
  steps. GPU rows are ordered by kernel start (a stream executes in issue order), CPU rows by
  their enqueue call.

An instance is consistent when all members agree on op (a send and its recv agree) and size; member metrics (arrival,
wait, transfer) need aligned clocks and are computed after :mod:`stallscope.analysis.clock`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import duckdb
import polars as pl

from stallscope.store.queries import arrow_of

#: ops whose members all end together (used for clock alignment)
SYNCHRONOUS_OPS = ("allreduce", "allgather", "reducescatter", "barrier", "alltoall", "broadcast")
#: point-to-point ops: a pair, not a group
P2P_OPS = ("send", "recv", "sendrecv")

MATCH_SQL = """
WITH b AS (
  SELECT c.*, list_position(c.pg_ranks, c.rank) AS _pi, len(c.pg_ranks) AS _pn
  FROM collectives c
),
-- point-to-point rows without a peer (traces before PyTorch wrote Src/Dst Rank), in a pipeline
-- group whose ranks are listed by stage. Each peer pair runs on its own NCCL communicator and
-- stream: a stream carrying both sends and receives talks to one neighbour, the previous stage
-- when a step's first op on it is a receive (activations in), the next when it is a send
-- (activations out). Where sends and receives run on streams of their own, a rank's two send
-- streams are told apart by when a step first uses them: activations go to the next stage (the
-- forward pass, first), gradients to the previous one (backward, later); receive streams the
-- other way round.
unk AS (SELECT * FROM b WHERE op IN ('send', 'recv') AND peer IS NULL AND _pi IS NOT NULL),
s AS (SELECT rank, stream, CASE WHEN bool_or(op = 'send') AND bool_or(op = 'recv') THEN 'both' ELSE min(op) END AS kind
      FROM unk GROUP BY rank, stream),
f AS (SELECT u.rank, u.stream, u.step, s.kind, arg_min(u.op, u.start_ns) AS first_op, min(u.start_ns) AS first_ns
      FROM unk u JOIN s ON s.rank = u.rank AND s.stream IS NOT DISTINCT FROM u.stream GROUP BY ALL),
fo AS (SELECT *, row_number() OVER (PARTITION BY rank, step, kind ORDER BY first_ns) AS ord,
              count(*) OVER (PARTITION BY rank, step, kind) AS n_kind,
              count(*) OVER (PARTITION BY rank, step) AS n_streams FROM f),
p AS (
  SELECT b.* REPLACE (
    CASE
      WHEN b.peer IS NOT NULL OR b.op NOT IN ('send', 'recv') OR b._pi IS NULL THEN b.peer
      WHEN b._pn = 2 THEN b.pg_ranks[3 - b._pi]                      -- the only other member
      WHEN b._pi = 1 THEN b.pg_ranks[2]                               -- first stage: its only neighbour
      WHEN b._pi = b._pn THEN b.pg_ranks[b._pn - 1]                   -- last stage: likewise
      -- (a middle stage has two neighbours: two streams, unless one stream carries everything)
      WHEN fo.kind = 'both' AND fo.n_kind = 2 AND fo.n_streams = 2 AND fo.first_op = 'recv' THEN b.pg_ranks[b._pi - 1]
      WHEN fo.kind = 'both' AND fo.n_kind = 2 AND fo.n_streams = 2 AND fo.first_op = 'send' THEN b.pg_ranks[b._pi + 1]
      WHEN fo.kind <> 'both' AND fo.n_kind = 2 AND (fo.kind = 'send') = (fo.ord = 1) THEN b.pg_ranks[b._pi + 1]
      WHEN fo.kind <> 'both' AND fo.n_kind = 2 THEN b.pg_ranks[b._pi - 1]
    END AS peer)
  FROM b LEFT JOIN fo ON fo.rank = b.rank AND fo.stream IS NOT DISTINCT FROM b.stream AND fo.step IS NOT DISTINCT FROM b.step
),
c AS (
  SELECT c.* EXCLUDE (_pi, _pn), coalesce(r.host, 'rank-' || c.rank) AS host,
    CASE
      WHEN c.op = 'send' AND c.peer IS NOT NULL THEN 'p2p:' || c.rank || '->' || c.peer
      WHEN c.op = 'recv' AND c.peer IS NOT NULL THEN 'p2p:' || c.peer || '->' || c.rank
      WHEN c.op = 'sendrecv' AND c.peer IS NOT NULL
        THEN 'p2p:' || least(c.rank, c.peer) || '-' || greatest(c.rank, c.peer)
      -- a send or receive whose peer is still unknown pairs with nobody: matched by order in its
      -- group, it would join other stages' messages into one meaningless instance
      WHEN c.op IN ('send', 'recv') AND c.pg_name IS NOT NULL THEN 'p2p:?' || c.rank || ':' || coalesce(c.stream, 0)
      WHEN c.pg_name IS NOT NULL
        THEN 'pg:' || c.pg_name || coalesce(':' || array_to_string(c.pg_ranks, ','), '')
      WHEN c.stream IS NOT NULL THEN 'stream:' || c.stream
      ELSE 'cpu'
    END AS channel,
    coalesce(c.cpu_start_ns, c.start_ns) AS issue_ns
  FROM p c LEFT JOIN ranks r ON r.rank = c.rank
),
-- Seq numbers collectives per process group, identically on every member; a rank's p2p
-- counter counts its sends and receives with every peer of the group, so the two ends of one
-- message carry unrelated numbers: point-to-point pairs match by order (NCCL keeps each pair FIFO)
ch AS (SELECT channel, bool_and(seq IS NOT NULL) AND NOT starts_with(channel, 'p2p:') AS has_seq FROM c GROUP BY channel),
k AS (
  SELECT c.*, ch.has_seq,
    CASE WHEN c.source = 'cpu' THEN c.issue_ns ELSE c.start_ns END AS order_ns
  FROM c JOIN ch USING (channel)
),
keyed AS (
  SELECT k.*,
    CASE WHEN has_seq THEN seq
         ELSE row_number() OVER (PARTITION BY rank, channel, step ORDER BY order_ns) END AS pos
  FROM k
)
SELECT dense_rank() OVER (ORDER BY channel, CASE WHEN has_seq THEN NULL ELSE step END, pos) AS instance_id,
       CASE WHEN has_seq THEN 'seq' ELSE 'order' END AS match,
       channel, rank, host, step, op, bytes, group_size, pg_name, seq, pg_ranks,
       start_ns, end_ns, cpu_start_ns
FROM keyed
"""


#: members of one instance end within this of each other, position after position (after the
#: clock offset and its slow drift, for members on other hosts); NCCL ends a collective on every
#: member within a few µs
COHERENT_END_NS = 20_000
#: ... and on one host (one clock) within this of each other
SAME_HOST_END_NS = 50_000
#: CPU-side ends (Gloo, or the host call of a collective) carry the thread scheduling of each
#: member: tens to hundreds of µs
CPU_COHERENT_END_NS = 300_000
#: between two consecutive steps, the offset between two members' ends moves by at most the
#: clocks' drift over a step (tens of µs); a move of this many end tolerances (at least 1 ms) is
#: two groups, one of which fell behind in that step (a host's GC pause delays its own
#: tensor- or shard-group collectives, not the other hosts')
STEP_JUMP_TOLERANCES = 50
STEP_JUMP_MIN_NS = 1_000_000
#: ... plus what two free-running clocks may drift apart over the time between the steps: 100 ppm,
#: twice a common crystal's tolerance (steps of tens of seconds drift by milliseconds)
CLOCK_DRIFT_PPM = 100


def match_rows(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Every collective row with its ``instance_id`` (raw, unaligned times).

    Channels without a process-group identity (``stream:*``, ``cpu``) may mix several groups
    that happen to use the same stream id (two data-parallel groups, one per host): they are
    split by end-time coherence — members of one group end together at every position (on one
    host: at the same time; across hosts: at a constant clock offset), members of different
    groups do not.
    """
    rows: pl.DataFrame = pl.from_arrow(arrow_of(con.sql(MATCH_SQL)))  # type: ignore[assignment]
    anon = rows.filter(~pl.col("channel").str.starts_with("pg:") & ~pl.col("channel").str.starts_with("p2p:"))
    if anon.height == 0:
        return rows
    relabel: dict[tuple[str, int], str] = {}
    # ranks of the job without a trace: groups that lost one are short (:func:`_equal_sized`)
    traced, declared, top = con.execute("SELECT count(DISTINCT rank), max(world_size), max(rank) FROM ranks").fetchall()[0]
    missing = max(int(declared or 0), int(top if top is not None else -1) + 1) - int(traced or 0)
    for (channel,), grp in anon.group_by("channel"):
        sizes = grp["group_size"].drop_nulls()
        if sizes.len() == grp.height and sizes.n_unique() == 1 and int(sizes[0]) == grp["rank"].n_unique():
            continue  # every row says its group has exactly the channel's ranks: one group, nothing to split
        tol = CPU_COHERENT_END_NS if channel == "cpu" else COHERENT_END_NS
        groups = _coherent_groups(grp, tol, max(tol, SAME_HOST_END_NS))
        groups = _equal_sized(groups, dict(zip(grp["rank"].to_list(), grp["host"].to_list())), missing=missing)
        if len(groups) > 1:
            for label, ranks in groups.items():
                for r in ranks:
                    relabel[(channel, r)] = f"{channel}#{label}"
    if not relabel:
        return rows
    keys = pl.DataFrame({"channel": [k[0] for k in relabel], "rank": [k[1] for k in relabel], "new": list(relabel.values())},
                        schema_overrides={"rank": rows.schema["rank"]})
    rows = rows.join(keys, on=["channel", "rank"], how="left").with_columns(pl.coalesce("new", "channel").alias("channel")).drop("new")
    # renumber positions inside the split channels, then instance ids
    rows = rows.with_columns(pl.col("instance_id").rank("dense").over(["rank", "channel", "step"]).alias("_pos"))
    rows = rows.with_columns(
        pl.struct(["channel", "step", "_pos"]).rank("dense").alias("instance_id").cast(pl.Int64)).drop("_pos")
    return rows


def _coherent_groups(grp: pl.DataFrame, tol_ns: int, same_host_ns: int) -> dict[int, list[int]]:
    """Split a channel's ranks into groups whose end times move together (within ``tol_ns`` from
    position to position; on one host, also within ``same_host_ns`` of each other; and from step
    to step: :func:`_step_jumps`), linked into groups by :func:`_link_groups`."""
    import numpy as np

    piv = (grp.pivot(on="rank", index="instance_id", values="end_ns", aggregate_function="first")
           .join(grp.group_by("instance_id").agg(pl.col("step").min().alias("_step")), on="instance_id", how="left")
           .sort("instance_id"))
    ranks = sorted(int(c) for c in piv.columns if c not in ("instance_id", "_step"))  # the same groups whatever the rows' order
    if len(ranks) < 2 or piv.height < 3:
        return {min(ranks): ranks} if ranks else {}
    E = piv.select([str(r) for r in ranks]).to_numpy().astype(np.float64)  # positions x ranks, NaN missing
    steps = piv["_step"].fill_null(-1).to_numpy()
    jump_ns = max(STEP_JUMP_MIN_NS, STEP_JUMP_TOLERANCES * tol_ns)
    host = dict(zip(grp["rank"].to_list(), grp["host"].to_list()))
    links: list[tuple[int, int, float]] = []
    apart: set[tuple[int, int]] = set()

    import warnings

    for i in range(len(ranks)):
        d = E - E[:, [i]]  # ends of every rank minus rank i's
        jumps = _step_jumps(d[:, i + 1:], E[:, i], steps, jump_ns)  # the pairs (i, j > i) tested below
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: ranks never seen together
            med = np.nanmedian(d, axis=0)
            # position-to-position change of the difference: ~0 for one group (a clock offset and a
            # slow drift cancel), the spread of two independent groups' timing otherwise
            step = np.nanmedian(np.abs(np.diff(d, axis=0)), axis=0)
        for j in range(i + 1, len(ranks)):
            if not np.isfinite(step[j]) or np.sum(np.isfinite(d[:, j])) < 3:
                continue
            same_host = host.get(ranks[i]) == host.get(ranks[j])
            if same_host and abs(med[j]) > same_host_ns:
                apart.add((i, j))  # one clock, ends apart: two groups, whatever links them
            elif step[j] <= tol_ns and not jumps[j - i - 1]:
                links.append((i, j, float(step[j])))
    found = [sorted(ranks[i] for i in comp) for comp in _link_groups(len(ranks), links, apart)]
    return {v[0]: v for v in sorted(found)}


#: a group holding two ranks of one host that end apart is groups in lockstep: it is rebuilt from
#: the links tighter than this share of the one that first joined such ranks
LOCKSTEP_MARGIN = 0.5


def _link_groups(n: int, links: list[tuple[int, int, float]], apart: set[tuple[int, int]]) -> list[list[int]]:
    """Connected components of ``links`` (i, j, how much their ends' difference moves) over ``n``
    ranks, where no component may hold a pair of ``apart`` (i < j: ranks of one host whose ends,
    on one clock, lie apart; they are in different groups).

    Groups that run in lockstep end at a near-constant difference position after position, like
    the members of one group across hosts (a clock offset), so coherence links them too: the
    tensor-parallel pairs of every host of a TP+DP job, whose data-parallel all-reduces keep them
    in step. Linked, they made one fake world-wide collective whose "clock offsets" were the
    hosts' lateness (seed 43000 #0102: a cross-socket host 15.4 ms late in every step read as a
    clock 15.9 ms off, outvoting the data-parallel all-reduces that pinned it right). Such links
    show where two ranks of one host that end apart fall into one component: the component is
    rebuilt from its links under :data:`LOCKSTEP_MARGIN` of the tightest link at which that
    happened (members of one group end within a µs or two of each other position after position;
    lockstep groups, by their compute noise: 11-13 µs there), never holding such a pair."""
    comps = _components_of(range(n), links)
    if not apart:
        return comps
    where = {x: k for k, comp in enumerate(comps) for x in comp}
    by_comp: dict[int, list[tuple[int, int, float]]] = {}
    for lk in sorted(links, key=lambda lk: lk[2]):
        by_comp.setdefault(where[lk[0]], []).append(lk)
    out: list[list[int]] = []
    for k, comp in enumerate(comps):
        own = by_comp.get(k, [])
        level = _first_conflict(own, apart)
        if level is None:
            out.append(comp)
        else:
            out.extend(_components_of(comp, [lk for lk in own if lk[2] < LOCKSTEP_MARGIN * level]))
    return out


class DisjointSets:
    """Union-find over hashable items, each set's members kept (ranks, hosts: hundreds at most)."""

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self.parent: dict[Any, Any] = {}
        self.members: dict[Any, set[Any]] = {}
        for x in items:
            self.find(x)

    def find(self, x: Any) -> Any:
        if x not in self.parent:
            self.parent[x], self.members[x] = x, {x}
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: Any, b: Any) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra
            self.members[ra] |= self.members.pop(rb)

    def sets(self) -> list[list[Any]]:
        """Every set, sorted, in the order of their smallest members."""
        return sorted(sorted(v) for v in self.members.values())


def _components_of(nodes: Iterable[int], links: list[tuple[int, int, float]]) -> list[list[int]]:
    """Connected components (sorted lists) of ``nodes`` under ``links``."""
    sets = DisjointSets(nodes)
    for i, j, _ in links:
        sets.union(i, j)
    return sets.sets()


def _first_conflict(links: list[tuple[int, int, float]], apart: set[tuple[int, int]]) -> float | None:
    """Adding ``links`` tightest first, the value of the first that joins a pair of ``apart``
    into one component; None when none does."""
    sets = DisjointSets()
    for i, j, v in links:
        a, b = sets.find(i), sets.find(j)
        if a != b and any((min(x, y), max(x, y)) in apart for x in sets.members[a] for y in sets.members[b]):
            return v
        sets.union(a, b)
    return None


def _step_jumps(d, t, steps, jump_ns: float):
    """Whether the difference ``d`` between two ranks' ends (one value per position, NaN where
    either is missing; ``t``: the first rank's ends) moves from one step to the next, step by its
    median, by more than ``jump_ns`` plus :data:`CLOCK_DRIFT_PPM` of the time between the steps.
    ``d`` may hold one column per second rank (positions x ranks): one answer per column.
    Members of one group end together at every position, so the difference is their clocks'
    offset, drifting by µs per step. Two groups that run in lockstep most of the time
    (the shard groups of different hosts in HSDP, tied by the replica all-reduce) end apart only
    in the steps where one of them fell behind: consecutive positions then differ little, yet the
    level shifts by the delay at the step's edge (seed 36000 #0184: rank 9's GC pauses moved its
    host's all-gathers 12-17 ms in three of six steps). Steps where either rank has a position the
    other lacks (a profiling window cut mid-step) are left out: their positions may not pair."""
    import numpy as np

    one = d.ndim == 1
    D = d[:, None] if one else d
    masks = [steps == s for s in np.unique(steps) if s >= 0]
    levels = np.full((len(masks), D.shape[1]), np.nan)
    times = np.full(len(masks), np.nan)
    for k, at in enumerate(masks):
        seg = D[at]
        full = np.isfinite(seg).all(axis=0)
        if full.any():
            levels[k, full] = np.median(seg[:, full], axis=0)
            times[k] = np.median(t[at])
    out = np.zeros(D.shape[1], dtype=bool)
    have = np.isfinite(levels)
    dense = have.all(axis=0)  # the usual case: every step pairs; consecutive steps, all columns at once
    if len(masks) > 1 and dense.any():
        allowed = jump_ns + CLOCK_DRIFT_PPM * 1e-6 * np.abs(np.diff(times))
        out[dense] = (np.abs(np.diff(levels[:, dense], axis=0)) > allowed[:, None]).any(axis=0)
    for j in np.flatnonzero(~dense):  # some steps left out: consecutive among the others
        ok = have[:, j]
        if ok.sum() > 1:
            allowed = jump_ns + CLOCK_DRIFT_PPM * 1e-6 * np.abs(np.diff(times[ok]))
            out[j] = bool((np.abs(np.diff(levels[ok, j])) > allowed).any())
    return bool(out[0]) if one else out


def _equal_sized(groups: dict[int, list[int]], host: dict[int, str], missing: int = 0) -> dict[int, list[int]]:
    """Groups of one stream come from one dimension of the parallelism (``new_group`` or a
    DeviceMesh axis): they have equal sizes. When end-time coherence left unequal groups — the
    smallest of size g, the larger ones each made of whole hosts holding g of their ranks — the
    larger ones are groups of g that ran in lockstep on their hosts (tensor-parallel groups of
    healthy hosts, beside one host that is slower), and are split by host.

    ``missing``: ranks of the job that left no trace. A group that lost one is smaller than its
    size, and is not what the others split to: g is then the smallest size the larger groups
    split to by host, with the groups and host parts under it short by no more ranks than are
    missing (seed 39000 #0054 with rank 9 dropped: the stage groups of hosts 0 and 3 ran in
    lockstep, one group of 8 beside the 4 of host 1 and the 3 of host 2; split to 3 they were no
    hosts of 3 and stayed a group of 8 across two hosts).

    A group of one rank is no collective: it is a rank whose coherence could not be tested (a
    truncated trace with too few positions). It does not set g; it joins the one group that is
    short of a rank and has none on its host (groups of a stream that spans hosts hold one rank
    per host, or the same number on each)."""
    single = sorted(v[0] for v in groups.values() if len(v) == 1)
    multi = {k: v for k, v in groups.items() if len(v) > 1}
    if not multi:
        return groups
    sizes = sorted({len(v) for v in multi.values()})
    if len(sizes) < 2:
        return _place_singles(dict(multi), single, host)
    for g in sizes:
        out: dict[int, list[int]] = {}
        short = 0
        for ranks in multi.values():
            if len(ranks) <= g:
                short += g - len(ranks)
                out[min(ranks)] = ranks
                continue
            parts: dict[str, list[int]] = {}
            for r in ranks:
                parts.setdefault(host.get(r, f"rank-{r}"), []).append(r)
            if any(len(v) > g for v in parts.values()):
                break
            short += sum(g - len(v) for v in parts.values())
            for v in parts.values():
                out[min(v)] = sorted(v)
        else:
            if short <= missing:
                return _place_singles(out, single, host)
    return _place_singles(dict(multi), single, host)  # not whole hosts of g ranks: keep what coherence found


def _place_singles(groups: dict[int, list[int]], single: list[int], host: dict[int, str]) -> dict[int, list[int]]:
    """Attach each untested rank, in rank order (the same groups whatever order the rows came
    in), to the unique group that is smaller than the largest and has no rank on its host; a rank
    with no such group stays alone (and may take a later one)."""
    if not single:
        return groups
    full = max(len(v) for v in groups.values())
    for r in sorted(single):
        h = host.get(r, f"rank-{r}")
        fits = [k for k, v in groups.items() if len(v) < full and all(host.get(x, f"rank-{x}") != h for x in v)]
        if len(fits) == 1:
            k = fits[0]
            groups[k] = sorted(groups[k] + [r])
        else:
            groups[r] = [r]
    return {min(v): v for v in groups.values()}


#: present members' transfer must exceed the reference by this share for an absent member to have
#: come last (transfers of one collective vary by a few per cent from instance to instance)
ABSENT_EXCESS = 0.25


def declared_ranks() -> pl.Expr:
    """The ranks a ``pg:<name>:<r0,r1,...>`` channel names (``Process Group Ranks``), as a list;
    null for channels that name none (older traces, ``stream:``, ``p2p:``)."""
    return (pl.col("channel").str.extract(r"^pg:.*:([0-9]+(?:,[0-9]+)*)$", 1).str.split(",")
            .cast(pl.List(pl.Int64)))


def group_width() -> pl.Expr:
    """How many ranks a collective instance's group holds: the declared group size (a group with a
    rank missing from the bundle moves the bytes of its full size); the members found for
    point-to-point pairs (their declared size is their process group's). Without a declared size
    (traces without collective metadata), the fullest instance of its channel's family: groups
    told apart by their first rank on one NCCL stream (``stream:<id>#<rank>``) are the same
    group of the same program on different hosts, one of them perhaps with a rank missing."""
    family = pl.col("channel").str.replace(r"#[0-9]+$", "")
    return (pl.when(pl.col("op").is_in(P2P_OPS)).then(pl.col("members"))
            .otherwise(pl.coalesce(pl.col("group_size"), pl.col("members").max().over(family))).alias("width"))


def transfer_measured() -> pl.Expr:
    """Instances (``collective_instances`` rows) whose ``transfer_ns`` is the time to move the
    bytes: two or more members, a transfer, and no member ``absent`` (:func:`with_absent`)."""
    n = pl.col("members")
    return (n > 1) & (pl.col("transfer_ns") > 0) & ~pl.col("absent").fill_null(False)


#: what a complete instance must share with one that lacks a member to serve as its reference
REFERENCE_KEY = ("op", "bytes", "group_size")


def complete_reference(frame: pl.DataFrame, transfer: str, complete: pl.Expr) -> pl.DataFrame:
    """``_ref``: the median ``transfer`` of the instances of ``frame`` where ``complete`` holds
    (every member recorded) and something moved, per op, size and group size
    (:data:`REFERENCE_KEY`): what the collective takes when nobody is missing. ``frame`` has one
    row per instance: :func:`with_absent` passes instance columns, the what-if
    (:func:`stallscope.analysis.whatif.absent_members`) what its members' own rows give."""
    return (frame.filter(complete & (pl.col(transfer) > 0))
            .group_by(*REFERENCE_KEY).agg(pl.col(transfer).median().alias("_ref")))


def held_back(transfer: str) -> pl.Expr:
    """``transfer`` exceeds the complete-instance reference ``_ref`` (joined from
    :func:`complete_reference`) by more than :data:`ABSENT_EXCESS`: the present members waited
    for the missing one. False where there is no reference."""
    return (pl.col(transfer) > pl.col("_ref") * (1 + ABSENT_EXCESS)).fill_null(False)


def with_absent(inst: pl.DataFrame, present: pl.Series) -> pl.DataFrame:
    """Add ``absent``: a member the group declares has no row in the instance and may have come
    last, so the present members' "transfer" (from their last arrival to the end) may include
    waiting for it, which is no bandwidth (a straggler's delay reaching the missing rank would
    read as a slow link on the hosts of its group).

    Two ways a member goes missing. Its trace ended before the collective (a killed rank, a trace
    cut mid-write): the instance has fewer members than its declared group size *and* than its
    channel's fullest instance (so a group size the trace misstates does not blank a whole
    communicator). Or the rank left no trace at all (a file lost, a rank that never wrote one):
    every instance of its communicator lacks it, so the channel's fullest instance lacks it too;
    the channel's ``Process Group Ranks`` then name a rank with no collective in the bundle
    (``present``), and its instances are absent where their transfer exceeds the median transfer
    of complete instances of the same op, size and group size (other groups where everyone was
    recorded) by more than :data:`ABSENT_EXCESS`: the missing rank came last there. Without such
    a reference the transfers are kept (every group lacks a member: the best measure there is;
    ING001 says the rank is missing). Traces without collective metadata declare no group size:
    a group is then as wide as its family's fullest instance (:func:`group_width`), and a cut
    member shows the same way (seed 28000 #0050: rank 5 cut in the second step, its replica
    partner's all-reduce alone for 24 ms of waiting read as one member's transfer)."""
    n, g = pl.col("members"), pl.coalesce(pl.col("group_size"), group_width())
    short = (n < g).fill_null(False)
    cut = short & (n < n.max().over("channel"))
    decl = declared_ranks()
    unseen = ((decl.list.len() == g) & (decl.list.set_difference(pl.lit(present.cast(pl.Int64).unique().implode()))
                                         .list.len() > 0)).fill_null(False)
    ref = complete_reference(inst, "transfer_ns", n == g)
    return (inst.join(ref, on=list(REFERENCE_KEY), how="left", nulls_equal=True)
            .with_columns((cut | (short & unseen & held_back("transfer_ns"))).alias("absent")).drop("_ref"))


def bus_factor(op: str, n: int) -> float:
    """nccl-tests bus-bandwidth factor for ``op`` over ``n`` ranks.

    >>> bus_factor("allreduce", 8), bus_factor("allgather", 4), bus_factor("broadcast", 8)
    (1.75, 0.75, 1.0)
    """
    if n <= 1:
        return 1.0
    if op == "allreduce":
        return 2 * (n - 1) / n
    if op in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n
    return 1.0


def traceless_hosts(hosts: dict[int, str], world: int) -> dict[int, str]:
    """Hosts of the ranks below ``world`` that left no trace, where the others tell: launchers
    (torchrun, SLURM's block distribution, MPI by node) give each host a contiguous block of G
    ranks, G = world / hosts. When every rank of ``hosts`` (rank -> host, the ranks with a trace)
    sits in its block and every block on one host of its own, a missing rank is on its block's
    host. {} when the placement is anything else (ranks interleaved across hosts, blocks of
    unequal size, a whole host missing).

    >>> traceless_hosts({0: "a", 1: "a", 3: "b"}, 4)
    {2: 'b'}
    >>> traceless_hosts({0: "a", 1: "b", 3: "b"}, 4)
    {}
    """
    names = sorted(set(hosts.values()))
    missing = [r for r in range(world) if r not in hosts]
    if not missing or not names or world % len(names):
        return {}
    g = world // len(names)
    block_host: dict[int, str] = {}
    for r, h in hosts.items():
        if not 0 <= r < world or block_host.setdefault(r // g, h) != h:
            return {}
    if len(set(block_host.values())) != len(block_host):
        return {}
    return {r: block_host[r // g] for r in missing if r // g in block_host}


#: a point-to-point channel: ``p2p:<src>-><dst>`` (directed) or ``p2p:<a>-<b>`` (an exchange);
#: groups 1 and 3 are the ends, group 2 the direction
P2P_CHANNEL = r"^p2p:(\d+)(->|-)(\d+)$"


def p2p_partner() -> pl.Expr:
    """For an instance of a ``p2p:`` channel (:data:`P2P_CHANNEL`) with one member recorded
    (``last_rank``), the other end of the pair; null for other channels."""
    ends = pl.col("channel").cast(pl.String).str.extract_groups(P2P_CHANNEL)
    a, b = ends.struct.field("1").cast(pl.Int64, strict=False), ends.struct.field("3").cast(pl.Int64, strict=False)
    return pl.when(pl.col("last_rank") == a).then(b).when(pl.col("last_rank") == b).then(a).alias("partner")


def with_partner_scope(inst: pl.DataFrame, host_of: dict[int, str]) -> pl.DataFrame:
    """A point-to-point instance with one member recorded (its partner left no trace, or its trace
    ended first) crosses hosts when the partner's host (``host_of``: recorded, or inferred by
    :func:`traceless_hosts`) differs from the member's: its ``scope`` is then ``inter``, as its
    pair's other instances are (seed 40000 #0050: rank 5's trace lost, rank 1's activations to it
    and gradients from it over a failed-over socket counted as intra-host)."""
    single = (pl.col("members") == 1) & pl.col("op").is_in(P2P_OPS)
    if not host_of or inst.filter(single).height == 0:
        return inst
    hosts = pl.DataFrame({"_r": list(host_of), "_h": list(host_of.values())}, schema={"_r": pl.Int64, "_h": pl.String})
    x = (inst.with_columns(pl.when(single).then(p2p_partner()).alias("_p"), pl.col("last_rank").cast(pl.Int64).alias("_r"))
         .join(hosts, on="_r", how="left")
         .join(hosts.rename({"_r": "_p", "_h": "_ph"}), on="_p", how="left"))
    crosses = single & pl.col("_h").is_not_null() & pl.col("_ph").is_not_null() & (pl.col("_h") != pl.col("_ph"))
    return x.with_columns(pl.when(crosses).then(pl.lit("inter")).otherwise(pl.col("scope")).alias("scope")).drop("_p", "_r", "_h", "_ph")


def instances_and_members(rows: pl.DataFrame, offsets: pl.DataFrame, *, traceless: dict[int, str] | None = None
                          ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Aligned member metrics and per-instance summaries from matched rows and host offsets.
    ``traceless``: the hosts of ranks that left no trace (:func:`traceless_hosts`), for the scope
    of their partners' point-to-point transfers (:func:`with_partner_scope`)."""
    off = offsets.select("host", "offset_ns")
    m = (
        rows.join(off, on="host", how="left")
        .with_columns(pl.col("offset_ns").fill_null(0))
        .with_columns(
            (pl.col("start_ns") + pl.col("offset_ns")).alias("arrival_ns"),
            (pl.col("end_ns") + pl.col("offset_ns")).alias("end_ns"),
            (pl.col("cpu_start_ns") + pl.col("offset_ns")).alias("cpu_start_ns"),
        )
    )
    m = m.with_columns(
        pl.col("arrival_ns").max().over("instance_id").alias("_last"),
        pl.col("arrival_ns").min().over("instance_id").alias("_first"),
    )
    m = m.with_columns(
        (pl.col("_last") - pl.col("arrival_ns")).alias("wait_ns"),
        (pl.col("end_ns") - pl.col("_last")).alias("transfer_ns"),
        (pl.col("arrival_ns") == pl.col("_last")).alias("is_last"),
    )
    inst = (
        m.sort("arrival_ns")
        .group_by("instance_id", maintain_order=True)
        .agg(
            pl.col("channel").first(), pl.col("match").first(), pl.col("pg_name").first(), pl.col("seq").first(),
            pl.col("step").first(), pl.col("op").first(),
            pl.col("bytes").max().alias("bytes"),
            pl.col("group_size").max().alias("group_size"),
            pl.len().cast(pl.Int32).alias("members"),
            pl.col("host").n_unique().cast(pl.Int32).alias("hosts"),
            ((pl.col("op").replace({"send": "p2p", "recv": "p2p"}).n_unique() == 1)
             & (pl.col("bytes").drop_nulls().n_unique() <= 1)).alias("consistent"),
            pl.col("_first").first().alias("first_arrival_ns"),
            pl.col("_last").first().alias("last_arrival_ns"),
            pl.col("rank").last().alias("last_rank"),
            pl.col("end_ns").median().cast(pl.Int64).alias("end_ns"),
        )
        .with_columns(
            pl.when(pl.col("hosts") > 1).then(pl.lit("inter")).otherwise(pl.lit("intra")).alias("scope"),
            (pl.col("last_arrival_ns") - pl.col("first_arrival_ns")).alias("skew_ns"),
            (pl.col("end_ns") - pl.col("last_arrival_ns")).alias("transfer_ns"),
        )
    )
    n = pl.coalesce(pl.col("group_size"), pl.col("members")).cast(pl.Float64)
    factor = (
        pl.when(n <= 1).then(1.0)
        .when(pl.col("op") == "allreduce").then(2 * (n - 1) / n)
        .when(pl.col("op").is_in(["allgather", "reducescatter", "alltoall"])).then((n - 1) / n)
        .otherwise(1.0)
    )
    algbw = pl.when(pl.col("transfer_ns") > 0).then(pl.col("bytes") / pl.col("transfer_ns")).otherwise(None)
    inst = inst.with_columns(factor.alias("bus_factor"), algbw.alias("algbw_gbps")).with_columns(
        (pl.col("algbw_gbps") * pl.col("bus_factor")).alias("busbw_gbps"))
    inst = with_absent(inst, m["rank"])
    # (a rank whose host no input names stands for a host of its own, ``rank-<r>``: no evidence here)
    host_of = {int(r): str(h) for r, h in m.select("rank", "host").unique("rank").iter_rows()
               if h is not None and str(h) != f"rank-{r}"}
    inst = with_partner_scope(inst, host_of | (traceless or {}))
    members = m.select("instance_id", "rank", "host", "step", "arrival_ns", "end_ns", "wait_ns", "transfer_ns", "is_last", "cpu_start_ns")
    return inst, members


COMPUTE_SQL = """
SELECT k.rank, k.ts_ns AS start_ns, k.ts_ns + k.dur_ns AS end_ns, coalesce(r.host, 'rank-' || r.rank) AS host
FROM _kernels k JOIN ranks r ON r.rank = k.rank
WHERE NOT k.is_comm AND k.dur_ns IS NOT NULL
"""

#: a computation starting this soon after a collective ends, on a GPU whose computation had been
#: idle at least this long, was waiting for it
GATE_NS = 30_000
#: ... and may be recorded starting this much before the collective's recorded end
GATE_SLACK_NS = 5_000


def with_gating(members: pl.DataFrame, con: duckdb.DuckDBPyConnection, offsets: pl.DataFrame) -> pl.DataFrame:
    """Add ``gates_compute``: the member's GPU computation was waiting for this collective, and
    ``compute_overlaps_end``: it was computing up to (within ``GATE_NS`` of) the collective's end, so
    its computation did not sit idle waiting for it.

    FSDP's forward waits for its all-gather, the optimizer for the last gradient bucket, a
    tensor-parallel layer for its all-reduce: the next computation starts right when the
    collective ends (within ``GATE_NS``), after the compute stream sat idle (no computation
    running during the last ``GATE_NS`` before the end). DDP's overlapped buckets do not gate
    anything: backward keeps running under them. The what-if replay moves a rank's later
    computation with the end of the collectives that gate it.
    """
    k: pl.DataFrame = pl.from_arrow(arrow_of(con.sql(COMPUTE_SQL)))  # type: ignore[assignment]
    if k.height == 0 or members.height == 0:
        return members.with_columns(pl.lit(False).alias("gates_compute"), pl.lit(False).alias("compute_overlaps_end"))
    off = offsets.select("host", "offset_ns")
    k = (k.join(off, on="host", how="left").with_columns(pl.col("offset_ns").fill_null(0))
         .select("rank", (pl.col("start_ns") + pl.col("offset_ns")).alias("_ks"), (pl.col("end_ns") + pl.col("offset_ns")).alias("_ke"))
         .sort("rank", "_ks")
         # the latest end of any computation that started before this one
         .with_columns(pl.col("_ke").cum_max().shift(1).over("rank").alias("_busy_until"))
         .sort("_ks"))
    # a computation that waited for the collective starts at its end, which the trace may record a
    # few µs late (another stream's clock rounding): look from GATE_SLACK_NS before it
    probe = (members.with_row_index("_i").select("_i", "rank", "end_ns")
             .with_columns((pl.col("end_ns") - GATE_SLACK_NS).alias("_probe")).sort("_probe"))
    j = probe.join_asof(k, left_on="_probe", right_on="_ks", by="rank", strategy="forward", check_sortedness=False)
    j = j.with_columns(((pl.col("_ks") - pl.col("end_ns") <= GATE_NS)
                        & (pl.col("_busy_until").fill_null(0) <= pl.col("end_ns") - GATE_NS)).fill_null(False).alias("gates_compute"))
    # computing up to the end: some computation that started before it ran until GATE_NS before it or later
    # (the compute stream did not sit idle waiting for it)
    reach = k.with_columns(pl.max_horizontal(pl.col("_busy_until").fill_null(0), "_ke").alias("_reach")).select("rank", "_ks", "_reach")
    o = probe.join_asof(reach, left_on="_probe", right_on="_ks", by="rank", strategy="backward", check_sortedness=False)
    o = o.with_columns((pl.col("_reach") >= pl.col("end_ns") - GATE_NS).fill_null(False).alias("compute_overlaps_end"))
    return (members.with_row_index("_i").join(j.select("_i", "gates_compute"), on="_i", how="left")
            .join(o.select("_i", "compute_overlaps_end"), on="_i", how="left").drop("_i")
            .with_columns(pl.col("gates_compute").fill_null(False), pl.col("compute_overlaps_end").fill_null(False)))


READINESS_SQL = """
SELECT k.rank, k.launch_ts_ns AS launch_ns,
       max(k.ts_ns + k.dur_ns) OVER (PARTITION BY k.rank ORDER BY k.launch_ts_ns ROWS UNBOUNDED PRECEDING) AS done_ns,
       coalesce(r.host, 'rank-' || r.rank) AS host
FROM _kernels k JOIN ranks r ON r.rank = k.rank
WHERE NOT k.is_comm AND k.launch_ts_ns IS NOT NULL
"""


def with_readiness(members: pl.DataFrame, con: duckdb.DuckDBPyConnection, offsets: pl.DataFrame) -> pl.DataFrame:
    """Add ``ready_ns``: when a member's inputs were ready on its GPU.

    PyTorch makes the NCCL stream wait for the compute stream as it was when the host called the
    collective, so the kernel cannot start before every computation launched before that call
    has finished: ``ready = max(end of compute kernels launched before cpu_start)``. A member that
    started later than that sat queued (behind another collective on its stream).
    """
    k: pl.DataFrame = pl.from_arrow(arrow_of(con.sql(READINESS_SQL)))  # type: ignore[assignment]
    if k.height == 0 or members.height == 0:
        return members.with_columns(pl.lit(None, dtype=pl.Int64).alias("ready_ns"))
    off = offsets.select("host", "offset_ns")
    k = (k.join(off, on="host", how="left").with_columns(pl.col("offset_ns").fill_null(0))
         .select("rank", (pl.col("launch_ns") + pl.col("offset_ns")).alias("_l"), (pl.col("done_ns") + pl.col("offset_ns")).alias("ready_ns"))
         .sort("_l"))
    probe = members.with_row_index("_i").select("_i", "rank", pl.col("cpu_start_ns").alias("_c")).drop_nulls("_c").sort("_c")
    j = probe.join_asof(k, left_on="_c", right_on="_l", by="rank", strategy="backward", check_sortedness=False)
    out = members.with_row_index("_i").join(j.select("_i", "ready_ns"), on="_i", how="left").drop("_i")
    # readiness after the start would be a clock artefact: never later than the arrival
    return out.with_columns(pl.min_horizontal("ready_ns", "arrival_ns").alias("ready_ns"))
