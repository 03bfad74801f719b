"""Rank and host clustering: find the outlier groups (one rank, one host, a rack-like subset).

Each rank is a feature vector built from its stall breakdown and collective stats — compute,
host-stall, sync-wait and exposed-communication fractions, median lateness at synchronous
collectives (as a share of the step), and how often it arrived last. Features are scaled with
scikit-learn's ``RobustScaler`` (median / IQR: the outliers we are looking for must not set the
scale), then clustered with **HDBSCAN**:

* the number of clusters is unknown (a healthy job is one blob; a straggler job is a blob plus
  one point; a slow host is a blob plus a tight group of 4-8 points);
* there are few samples (2 to a few hundred ranks), so methods that need many points per
  cluster or a fixed k (k-means, GMM) would split the healthy blob or absorb the outliers;
* HDBSCAN labels points that belong to no dense region as noise, which is exactly a lone
  straggler, and finds small dense groups (a host's ranks) of any size ≥ 2.

The largest cluster is taken as "normal"; every other cluster and the noise points (split by
host) are candidate groups, described by how far their centroid sits from the normal one in
robust units. Rules verify every candidate with blame and the what-if replay; clustering only
proposes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

FEATURES = ("compute_frac", "host_stall_frac", "sync_wait_frac", "comm_frac", "lateness_frac", "last_share")


@dataclass
class Candidate:
    ranks: list[int]
    hosts: list[str]
    distance: float       #: robust distance of the group's centroid from the normal cluster
    whole_hosts: list[str]  #: hosts all of whose ranks are in the group
    label: int


def rank_vectors(rank_features: pl.DataFrame, step_ms: float) -> pl.DataFrame:
    f = rank_features.with_columns(
        (pl.col("comm_intra_frac") + pl.col("comm_inter_frac")).alias("comm_frac"),
        (pl.col("lateness_med_ns") / max(step_ms * 1e6, 1.0)).alias("lateness_frac"),
    )
    return f.select("rank", "host", *[pl.col(c).fill_null(0.0).fill_nan(0.0).cast(pl.Float64) for c in FEATURES])


def candidates(vectors: pl.DataFrame, ranks_per_host: dict[str, int]) -> list[Candidate]:
    """Outlier groups among ranks (empty when every rank looks alike or there are < 3 ranks)."""
    n = vectors.height
    if n < 3:
        return []
    from sklearn.cluster import HDBSCAN
    from sklearn.preprocessing import RobustScaler

    X = vectors.select(FEATURES).to_numpy()
    scaler = RobustScaler(quantile_range=(10.0, 90.0))
    Xs = scaler.fit_transform(X)
    # features constant over ranks get scale 1 from sklearn: keep them from dominating distances
    spread = np.percentile(X, 90, axis=0) - np.percentile(X, 10, axis=0)
    Xs[:, spread < 1e-9] = 0.0
    Xs = np.clip(Xs, -50, 50)
    if np.allclose(Xs, Xs[0]):
        return []
    labels = HDBSCAN(min_cluster_size=2, min_samples=1, allow_single_cluster=True, copy=True).fit_predict(Xs)
    clusters = [lab for lab in set(labels.tolist()) if lab >= 0]
    if not clusters:
        return []
    normal = max(clusters, key=lambda lab: int((labels == lab).sum()))
    center = np.median(Xs[labels == normal], axis=0)
    ranks = vectors["rank"].to_numpy()
    hosts = vectors["host"].to_list()
    out: list[Candidate] = []
    groups: dict[tuple[int, str], list[int]] = {}
    for i, lab in enumerate(labels.tolist()):
        if lab == normal:
            continue
        key = (lab, hosts[i] if lab < 0 else "")
        groups.setdefault(key, []).append(i)
    for (lab, _), idx in groups.items():
        pts = Xs[idx]
        dist = float(np.linalg.norm(np.median(pts, axis=0) - center))
        g_hosts = sorted({hosts[i] for i in idx})
        whole = [h for h in g_hosts if sum(1 for i in idx if hosts[i] == h) == ranks_per_host.get(h, -1) and ranks_per_host.get(h, 0) > 1]
        out.append(Candidate(ranks=sorted(int(ranks[i]) for i in idx), hosts=g_hosts, distance=dist, whole_hosts=whole, label=int(lab)))
    return sorted(out, key=lambda c: -c.distance)
