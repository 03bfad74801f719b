"""Clock alignment: one offset per host, estimated from the data.

Ranks on one host share a clock; hosts do not (offsets of milliseconds to days: Kineto uses a
monotonic clock). A synchronous collective (all-reduce, all-gather, reduce-scatter, barrier,
all-to-all, broadcast) ends at nearly the same instant on every member: the last chunk reaches
everyone within microseconds. So for every matched instance ``i`` and host ``h`` taking part,
with ``e[i,h]`` the median raw end time of h's members,

    e[i,h] = t[i] + c[h] + noise

where ``t[i]`` is the true end and ``c[h]`` the host's clock offset. We fit ``t`` and ``c`` by
alternating medians (robust to stragglers in either direction), reject residuals beyond five
robust spreads (or 50 µs), refit, and report per host ``offset_ns = -c[h]`` relative to the
reference host (the host of the lowest rank) with the spread of its residuals.

Peer tools shift every rank by one global minimum (HTA) or assume clocks are aligned; both
misplace cross-host arrivals by the full offset.

All-to-alls are the exception: a rank's all-to-all ends when its own transfers are done, and
with uneven splits (MoE routing) or one host's slower links (SHM) the members end milliseconds
apart, systematically. They are kept out of the fit. For hosts linked to the reference only by
all-to-alls (expert-parallel groups whose data-parallel all-reduces pair other hosts) they give
**causality brackets** instead: no member can finish before every member has started, so for
hosts a and b of one instance, ``c[b] - c[a]`` lies in ``[start_b - end_a, end_b - start_a]``
(latest raw start, earliest raw end of each host's members); robust quantiles over instances
bracket the offset and its midpoint is taken (method ``a2a``, spread = half the bracket).

Hosts that never share a synchronous collective with the reference component (a pipeline
whose data-parallel groups stay inside hosts) are pinned by **causality of point-to-point
messages**: a message cannot be received before it was sent, so for a send on host a and its
matching receive on host b, ``c[b] - c[a] <= recv_end - send_start`` (raw times); messages in
the other direction bound it from below. The tightest bounds (robust quantiles) bracket the
offset. Within the bracket, NCCL's send and receive kernels of one message end together (the
transfer completes on both sides), so the median difference of their end times estimates the
offset to the same precision as a collective (method ``p2p``, spread = robust spread of those
differences); when it falls outside the bracket or scatters more than the bracket is wide, the
bracket's midpoint is used (spread = half the bracket). Still-unconnected
hosts fall back to wall-clock timestamps when the trace uses them (epoch-based ``ts`` or
``baseTimeNanoseconds``; NTP-level accuracy; methods ``wall_clock`` / ``base_time``), else
offset 0 with method ``none`` (the ING rules say so).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from stallscope.analysis.collectives import SYNCHRONOUS_OPS, DisjointSets
from stallscope.store.schema.trace import inferred_host, known_host_blocks

#: synchronous ops whose members end at nearly the same instant (all-to-all is not one of them)
ENDS_TOGETHER = tuple(op for op in SYNCHRONOUS_OPS if op != "alltoall")
ITERATIONS = 12
REJECT_SPREADS = 5.0
REJECT_FLOOR_NS = 50_000


def estimate_offsets(rows: pl.DataFrame, ranks: pl.DataFrame) -> pl.DataFrame:
    """Per-host offsets from matched collective rows (raw times) and the ranks table.

    ``rows``: instance_id, host, op, start_ns, end_ns (raw), channel. ``ranks``: rank, host,
    base_time_ns, trace_start_ns.
    """
    hosts_of = ranks.with_columns(pl.coalesce(pl.col("host"), pl.lit("rank-") + pl.col("rank").cast(pl.String)).alias("host"))
    all_hosts = hosts_of.sort("rank")["host"].unique(maintain_order=True).to_list()
    if not all_hosts:
        return _empty()
    ref = all_hosts[0]
    e = (
        rows.filter(pl.col("op").is_in(ENDS_TOGETHER))
        .group_by("instance_id", "host")
        .agg(pl.col("end_ns").median().alias("e"))
    )
    multi = e.group_by("instance_id").agg(pl.len().alias("nh")).filter(pl.col("nh") > 1)
    e = e.join(multi.select("instance_id"), on="instance_id")
    comp = _components(e, all_hosts)
    solved: dict[str, tuple[float, float, int, int]] = {}
    ref_comp = comp.get(ref, ref)
    members = [h for h in all_hosts if comp.get(h, h) == ref_comp]
    if len(members) > 1 and e.height:
        solved = _fit(e.filter(pl.col("host").is_in(members)), ref)
    rows_out = []
    known = {h: v[0] for h, v in solved.items()} | {ref: 0.0}
    brackets = _chain(_a2a_deltas(rows), known, all_hosts)
    p2p = _chain(_p2p_deltas(rows), known | {h: v[0] for h, v in brackets.items()}, all_hosts)
    base, base_method = _base_offsets(hosts_of, ref)
    for h in all_hosts:
        if h == ref:
            n = solved.get(h, (0.0, 0.0, 0, 0))
            rows_out.append((h, 0, int(round(n[1])), n[2], n[3], True, "reference"))
        elif h in solved:
            c, spread, n_used, n_rej = solved[h]
            rows_out.append((h, int(round(-c)), int(round(spread)), n_used, n_rej, False, "collective_end"))
        elif h in brackets:
            c, spread, n_used = brackets[h]
            rows_out.append((h, int(round(-c)), int(round(spread)), n_used, 0, False, "a2a"))
        elif h in p2p:
            c, spread, n_used = p2p[h]
            rows_out.append((h, int(round(-c)), int(round(spread)), n_used, 0, False, "p2p"))
        elif h in base:
            rows_out.append((h, base[h], None, 0, 0, False, base_method))
        else:
            rows_out.append((h, 0, None, 0, 0, False, "none"))
    return pl.DataFrame(rows_out, schema={"host": pl.String, "offset_ns": pl.Int64, "spread_ns": pl.Int64, "instances": pl.Int64,
                                          "rejected": pl.Int64, "reference": pl.Boolean, "method": pl.String}, orient="row")


def _fit(e: pl.DataFrame, ref: str) -> dict[str, tuple[float, float, int, int]]:
    """Alternating medians with one round of outlier rejection."""
    c = _initial(e, ref)
    keep = e.with_columns(pl.lit(True).alias("keep"))
    for round_ in range(2):
        cur = keep.filter(pl.col("keep"))
        for _ in range(ITERATIONS):
            t = cur.join(c, on="host").group_by("instance_id").agg((pl.col("e") - pl.col("c")).median().alias("t"))
            c = cur.join(t, on="instance_id").group_by("host").agg((pl.col("e") - pl.col("t")).median().alias("c"))
            c_ref = c.filter(pl.col("host") == ref)["c"]
            shift = float(c_ref[0]) if len(c_ref) else 0.0
            c = c.with_columns(pl.col("c") - shift)
        t = cur.join(c, on="host").group_by("instance_id").agg((pl.col("e") - pl.col("c")).median().alias("t"))
        res = keep.join(c, on="host").join(t, on="instance_id", how="left").with_columns(
            (pl.col("e") - pl.col("t") - pl.col("c")).alias("r"))
        spread = res.filter(pl.col("keep")).group_by("host").agg(
            (1.4826 * (pl.col("r") - pl.col("r").median()).abs().median()).alias("s"))
        if round_ == 0:
            res = res.join(spread, on="host").with_columns(
                (pl.col("r").abs() <= pl.max_horizontal(pl.col("s") * REJECT_SPREADS, pl.lit(float(REJECT_FLOOR_NS)))).alias("keep"))
            keep = res.select("instance_id", "host", "e", "keep")
    counts = keep.group_by("host").agg(pl.col("keep").sum().alias("used"), (~pl.col("keep")).sum().alias("rej"))
    out = c.join(spread, on="host", how="left").join(counts, on="host", how="left")
    return {r["host"]: (float(r["c"]), float(r["s"] or 0.0), int(r["used"] or 0), int(r["rej"] or 0)) for r in out.iter_rows(named=True)}


def _initial(e: pl.DataFrame, ref: str) -> pl.DataFrame:
    """Starting offsets: weighted least squares over pairwise median end differences.

    Alternating medians alone cannot move a block of hosts whose instances are mostly among
    themselves: with data-parallel pairs (host 1 with 3, host 2 with 4) and a few world-wide
    collectives, the pair instances fit any common shift of {2, 4} and outvote the world ones.
    Each instance's hosts are compared with its first host (a star, not all pairs: linear in
    the data), each host pair's median difference is weighted by its instance count, and the
    pairs are solved jointly with the reference pinned at 0.
    """
    hosts = sorted(e["host"].unique().to_list())
    first = e.group_by("instance_id").agg(pl.col("host").min().alias("a"))
    pairs = (e.join(first, on="instance_id").join(e.rename({"host": "a", "e": "ea"}), on=["instance_id", "a"])
             .filter(pl.col("host") != pl.col("a"))
             .group_by("a", "host").agg((pl.col("e") - pl.col("ea")).median().alias("d"), pl.len().alias("n")))
    idx = {h: i for i, h in enumerate(hosts)}
    rows = []
    rhs = []
    for a, b, d, n in pairs.iter_rows():
        w = float(np.sqrt(n))
        row = np.zeros(len(hosts))
        row[idx[b]], row[idx[a]] = w, -w
        rows.append(row)
        rhs.append(w * float(d))
    pin = np.zeros(len(hosts))
    pin[idx[ref]] = 1e3
    a_mat = np.vstack(rows + [pin]) if rows else pin[None, :]
    sol = np.linalg.lstsq(a_mat, np.asarray(rhs + [0.0]), rcond=None)[0]
    return pl.DataFrame({"host": hosts, "c": [float(x - sol[idx[ref]]) for x in sol]})


def _components(e: pl.DataFrame, hosts: list[str]) -> dict[str, str]:
    """Hosts linked by a shared instance -> the set they belong to (named by its smallest host)."""
    sets = DisjointSets(hosts)
    for hs in e.group_by("instance_id").agg(pl.col("host").unique())["host"].to_list():
        hs = [h for h in hs if h in sets.parent]
        for h in hs[1:]:
            sets.union(hs[0], h)
    return {h: min(v) for v in sets.sets() for h in v}


#: timestamps above this (ns) are Unix-epoch wall-clock times (after 2001), not monotonic clocks
_EPOCH_NS = 1_000_000_000 * 1_000_000_000


def _base_offsets(hosts_of: pl.DataFrame, ref: str) -> tuple[dict[str, int], str]:
    """Wall-clock fallback: ``baseTimeNanoseconds`` when every rank has it, or 0 for traces whose
    ``ts`` already is epoch time (older Kineto)."""
    if hosts_of["base_time_ns"].null_count() == 0 and hosts_of.height:
        per_host = hosts_of.group_by("host").agg(pl.col("base_time_ns").median())
        b = dict(zip(per_host["host"].to_list(), per_host["base_time_ns"].to_list()))
        return {h: int(b[h] - b[ref]) for h in b}, "base_time"
    if "trace_start_ns" in hosts_of.columns and hosts_of["trace_start_ns"].null_count() == 0 and hosts_of.height \
            and int(hosts_of["trace_start_ns"].min()) > _EPOCH_NS:
        return {h: 0 for h in hosts_of["host"].unique().to_list()}, "wall_clock"
    return {}, "none"


Delta = dict[tuple[str, str], tuple[float, float, int]]


def _a2a_deltas(rows: pl.DataFrame) -> Delta:
    """Causality brackets of all-to-alls: (a, b) -> (c[b] - c[a], half the bracket, instances).

    Per instance, host a's earliest raw end cannot precede host b's latest raw start in true
    time, and vice versa; a low quantile of each bound over instances (not the extreme: one
    mismatched instance must not close the bracket) gives the bracket, its midpoint the estimate.
    """
    a2a = rows.filter(pl.col("op") == "alltoall")
    if a2a.height == 0:
        return {}
    per = a2a.group_by("instance_id", "host").agg(pl.col("start_ns").max().alias("s"), pl.col("end_ns").min().alias("e"))
    pairs = per.join(per, on="instance_id", suffix="_b").filter(pl.col("host") < pl.col("host_b"))
    if pairs.height == 0:
        return {}
    b = pairs.group_by("host", "host_b").agg(
        (pl.col("s_b") - pl.col("e")).quantile(0.95, interpolation="higher").alias("lo"),
        (pl.col("e_b") - pl.col("s")).quantile(0.05, interpolation="lower").alias("hi"),
        pl.len().alias("n"))
    out: Delta = {}
    for a, bh, lo, hi, n in b.iter_rows():
        if lo <= hi:
            out[(a, bh)] = ((lo + hi) / 2, (hi - lo) / 2, int(n))
            out[(bh, a)] = (-(lo + hi) / 2, (hi - lo) / 2, int(n))
    return out


def _p2p_deltas(rows: pl.DataFrame) -> Delta:
    """Send/recv causality: (a, b) -> (c[b] - c[a], spread, messages) for host pairs with
    messages both ways."""
    if "channel" not in rows.columns:
        return {}
    p = rows.filter(pl.col("channel").str.starts_with("p2p:") & pl.col("op").is_in(["send", "recv"]))
    if p.height == 0:
        return {}
    snd = p.filter(pl.col("op") == "send").select("instance_id", pl.col("host").alias("a"), pl.col("start_ns").alias("s"),
                                                  pl.col("end_ns").alias("se"))
    rcv = p.filter(pl.col("op") == "recv").select("instance_id", pl.col("host").alias("b"), pl.col("end_ns").alias("e"))
    pairs = snd.join(rcv, on="instance_id").filter(pl.col("a") != pl.col("b"))
    if pairs.height == 0:
        return {}
    # each message a -> b bounds c[b] - c[a] from above (robust: a low quantile, not the minimum);
    # the end-time difference estimates it
    ub = pairs.group_by("a", "b").agg((pl.col("e") - pl.col("s")).quantile(0.05, interpolation="lower").alias("u"), pl.len().alias("n"),
                                      (pl.col("e") - pl.col("se")).alias("d"))
    upper = {(a, b): (float(u), int(n), np.asarray(d, dtype=np.float64)) for a, b, u, n, d in ub.iter_rows()}
    delta: Delta = {}
    for (a, b), (u1, n1, d1) in upper.items():
        back = upper.get((b, a))
        if back is None:
            continue  # one direction only: a bound, not an estimate
        u2, n2, d2 = back
        lo, hi = -u2, u1  # c[b] - c[a] in [lo, hi]
        ends = np.concatenate([d1, -d2])
        est = float(np.median(ends))
        mad = float(1.4826 * np.median(np.abs(ends - est)))
        if lo <= est <= hi and mad < abs(hi - lo) / 2:
            delta[(a, b)] = (est, mad, n1 + n2)
        else:
            delta[(a, b)] = ((lo + hi) / 2, abs(hi - lo) / 2, n1 + n2)
    return delta


def _chain(delta: Delta, solved: dict[str, float], hosts: list[str]) -> dict[str, tuple[float, float, int]]:
    """Offsets (c relative to the reference, like ``_fit``) of the hosts not in ``solved``,
    reached from solved hosts through pairwise deltas (narrowest first)."""
    known = dict(solved)
    out: dict[str, tuple[float, float, int]] = {}
    if not delta or all(h in known for h in hosts):
        return out
    changed = True
    while changed:
        changed = False
        for (a, b), (d, spread, n) in sorted(delta.items(), key=lambda kv: kv[1][1]):
            if a in known and b not in known:
                known[b] = known[a] + d
                out[b] = (known[b], spread, n)
                changed = True
    return out


def _empty() -> pl.DataFrame:
    return pl.DataFrame(schema={"host": pl.String, "offset_ns": pl.Int64, "spread_ns": pl.Int64, "instances": pl.Int64,
                                "rejected": pl.Int64, "reference": pl.Boolean, "method": pl.String})


def infer_hosts(offsets: pl.DataFrame, ranks: pl.DataFrame) -> dict[int, str]:
    """Group ranks with unknown hosts by clock. Ranks on one host share one clock, and launchers
    (torchrun, SLURM, MPI) give a host a contiguous block of G ranks. For each candidate g (a
    divisor of the world size, 2-64) the blocks' offset ranges are measured: blocks inside hosts
    (g divides G) range over the offset estimates' noise, blocks that straddle hosts (any other g)
    over the hosts' clock difference (µs for PTP-synchronized clocks, ms to days otherwise). G is
    the largest g whose worst block range stays within 4 × the smallest worst range of any
    candidate (at least 200 ns) and within 1 ms. (Not the first g to fail: with G = 8, blocks of
    3 straddle hosts while blocks of 4 and 8 do not.) A few ranks may be missing (no trace: at
    most a quarter of the world, the largest rank + 1 or the declared ``world_size``): the blocks
    are then judged on the ranks they hold.

    Hosts known for some ranks (an NCCL log from some hosts only) take part with their own
    clock: a candidate g must keep each known host's ranks in one block and no two known hosts
    in one, and an unknown rank in a known host's block gets that host's name (its clock
    matched the host's). Returns unknown rank -> inferred host, or {} when no block size fits."""
    o = offsets.filter(pl.col("method").is_in(["reference", "collective_end", "a2a", "p2p"])).select("host", "offset_ns")
    by_host = {str(h): float(v) for h, v in o.iter_rows()}
    unknown = [int(r) for r in ranks.filter(pl.col("host").is_null())["rank"].to_list()]
    known = {int(r): str(h) for r, h in ranks.filter(pl.col("host").is_not_null()).select("rank", "host").iter_rows()}
    if not unknown or any(f"rank-{r}" not in by_host for r in unknown) or any(h not in by_host for h in known.values()):
        return {}
    off = {r: by_host[f"rank-{r}"] for r in unknown} | {r: by_host[h] for r, h in known.items()}
    if len(off) < 4:
        return {}
    declared = ranks["world_size"].max() if "world_size" in ranks.columns else None
    n = max(max(off) + 1, int(declared) if declared is not None else 0)  # type: ignore[arg-type]
    if len(off) < 0.75 * n:
        return {}
    worst: dict[int, float] = {}
    for g in [g for g in range(2, min(64, n // 2) + 1) if n % g == 0]:
        if known_host_blocks(known, g) is None:
            continue  # a known host across blocks, or two in one block: g is not the hosts' size
        blocks = [[off[r] for r in range(b, b + g) if r in off] for b in range(0, n, g)]
        worst[g] = max(max(v) - min(v) for v in blocks if v)
    if not worst:
        return {}
    tolerance = min(1_000_000.0, 4 * max(min(worst.values()), 200.0))
    fits = [g for g, w in worst.items() if w <= tolerance]
    best = max(fits) if fits else None
    if best is None or best == n:
        return {}
    host_of_block = known_host_blocks(known, best) or {}
    return {r: host_of_block.get(r // best, inferred_host(r, best)) for r in sorted(unknown)}
