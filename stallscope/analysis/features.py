"""Per-job features for attribution: who waited, who was waited for, where time went.

Everything is computed from the analysis tables of one job (polars, vectorized):

* **Exclusive blame** of a rank at a synchronous collective: how much later it arrived than
  every other member (``arrival - max(other arrivals)``, only for the last arriver). Summed over
  instances it is the time the rank alone held everybody up — a straggler's signature.
* **Host blame**: the same with a host's members as one unit (``max arrival on host - max
  arrival elsewhere``). When a host's ranks are late *together*, each rank's exclusive blame is
  small (the runner-up is a host-mate) but the host's blame is large — the locality signature.
* Per-rank and per-host stall fractions (``step_breakdown``) and per-step lateness.

Only synchronous collectives count (all-reduce, all-gather, reduce-scatter, broadcast, barrier,
all-to-all): a point-to-point receive waiting for its send is a pipeline dependency, not a
straggler.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from stallscope.analysis.collectives import SYNCHRONOUS_OPS
from stallscope.store.queries import Store


@dataclass
class JobData:
    """The tables attribution works on, for one job."""

    job: str
    ranks: pl.DataFrame
    instances: pl.DataFrame
    members: pl.DataFrame
    breakdown: pl.DataFrame
    clock: pl.DataFrame
    warnings: pl.DataFrame
    files: pl.DataFrame

    @property
    def world_size(self) -> int:
        declared = self.ranks["world_size"].drop_nulls()
        return int(declared.max()) if len(declared) else self.ranks.height

    @property
    def hosts(self) -> list[str]:
        return sorted(self.ranks["host"].unique().to_list())

    def host_of(self) -> dict[int, str]:
        return dict(zip(self.ranks["rank"].to_list(), self.ranks["host"].to_list()))

    def ranks_of(self, host: str) -> list[int]:
        return sorted(self.ranks.filter(pl.col("host") == host)["rank"].to_list())


def load(store: Store, job: str) -> JobData:
    q = lambda sql: store.sql(sql, [job])  # noqa: E731
    ranks = q("""SELECT rank, coalesce(host, 'rank-' || rank) AS host, host IS NOT NULL AS host_known, world_size, platform,
                        truncated, steps, step_source, events, collectives, file FROM ranks WHERE job = ? ORDER BY rank""")
    return JobData(
        job=job, ranks=ranks,
        instances=q("SELECT * EXCLUDE (job) FROM collective_instances WHERE job = ?"),
        members=q("SELECT * EXCLUDE (job) FROM collective_members WHERE job = ?"),
        breakdown=q("SELECT * EXCLUDE (job) FROM step_breakdown WHERE job = ? ORDER BY rank, step"),
        clock=q("SELECT * EXCLUDE (job) FROM clock_offsets WHERE job = ?"),
        warnings=q("SELECT * EXCLUDE (job) FROM ingest_warnings WHERE job = ?"),
        files=q("SELECT * EXCLUDE (job) FROM files WHERE job = ?"),
    )


def sync_members(d: JobData) -> pl.DataFrame:
    """Members of consistent, multi-member synchronous instances, with per-instance context."""
    inst = d.instances.filter(pl.col("op").is_in(SYNCHRONOUS_OPS) & (pl.col("members") > 1)).select(
        "instance_id", "op", "scope", "members", "skew_ns", "transfer_ns", pl.col("step").alias("inst_step"))
    m = d.members.join(inst, on="instance_id")
    # lateness is measured from the lower quartile of arrivals, not the median: when half of the
    # members are late together (one slow host of two) the median would sit among them
    return m.with_columns(
        pl.col("arrival_ns").median().over("instance_id").alias("median_arrival"),
        pl.col("arrival_ns").quantile(0.25, interpolation="lower").over("instance_id").alias("early_arrival"),
        pl.col("arrival_ns").max().over("instance_id").alias("last_arrival"),
    ).with_columns((pl.col("arrival_ns") - pl.col("early_arrival")).alias("lateness_ns"))


def exclusive_blame(m: pl.DataFrame) -> pl.DataFrame:
    """Per (instance, rank): arrival - max arrival of the other members, if positive."""
    # second-latest arrival per instance: the max over the others for the last arriver
    ranked = m.with_columns(pl.col("arrival_ns").rank("ordinal", descending=True).over("instance_id").alias("_ord"))
    second = ranked.filter(pl.col("_ord") == 2).select("instance_id", pl.col("arrival_ns").alias("_second"))
    first = ranked.filter(pl.col("_ord") == 1).join(second, on="instance_id")
    return first.select("instance_id", "rank", "host", "step", (pl.col("arrival_ns") - pl.col("_second")).clip(0).alias("blame_ns"))


def host_blame(m: pl.DataFrame) -> pl.DataFrame:
    """Per (instance, host) for inter-host instances: max arrival on the host - max elsewhere."""
    per = m.group_by("instance_id", "host").agg(pl.col("arrival_ns").max().alias("h_last"), pl.col("step").first())
    multi = per.group_by("instance_id").agg(pl.len().alias("nh")).filter(pl.col("nh") > 1)
    per = per.join(multi.select("instance_id"), on="instance_id")
    ranked = per.with_columns(pl.col("h_last").rank("ordinal", descending=True).over("instance_id").alias("_ord"))
    second = ranked.filter(pl.col("_ord") == 2).select("instance_id", pl.col("h_last").alias("_second"))
    first = ranked.filter(pl.col("_ord") == 1).join(second, on="instance_id")
    return first.select("instance_id", "host", "step", (pl.col("h_last") - pl.col("_second")).clip(0).alias("blame_ns"))


def rank_features(d: JobData) -> pl.DataFrame:
    """One row per rank: stall fractions, lateness, blame, last-arrival share."""
    b = d.breakdown.group_by("rank").agg(
        pl.col("step_ns").sum().alias("step_ns"),
        *[pl.col(c).sum() for c in ("compute_ns", "comm_intra_ns", "comm_inter_ns", "sync_wait_ns", "host_stall_ns", "other_idle_ns")],
        pl.len().alias("steps"),
    )
    frac = [(pl.col(c) / pl.col("step_ns")).alias(c.replace("_ns", "_frac")) for c in
            ("compute_ns", "comm_intra_ns", "comm_inter_ns", "sync_wait_ns", "host_stall_ns", "other_idle_ns")]
    b = b.with_columns(frac)
    m = sync_members(d)
    lat = m.group_by("rank").agg(pl.col("lateness_ns").median().alias("lateness_med_ns"),
                                 pl.col("wait_ns").sum().alias("sync_wait_coll_ns"),
                                 pl.len().alias("sync_instances"))
    bl = exclusive_blame(m).group_by("rank").agg(pl.col("blame_ns").sum().alias("blame_ns"),
                                                 (pl.col("blame_ns") > 0).sum().alias("last_count"))
    out = (d.ranks.select("rank", "host").join(b, on="rank", how="left").join(lat, on="rank", how="left")
           .join(bl, on="rank", how="left")
           .with_columns(pl.col("blame_ns").fill_null(0), pl.col("last_count").fill_null(0), pl.col("sync_instances").fill_null(0)))
    return out.with_columns((pl.col("last_count") / pl.col("sync_instances").clip(1)).alias("last_share"))


def step_lateness(d: JobData) -> pl.DataFrame:
    """Per (rank, step): exclusive blame in that step (how long the rank alone held others up)."""
    bl = exclusive_blame(sync_members(d))
    return bl.group_by("rank", "step").agg(pl.col("blame_ns").sum())
