"""Placement and fabric facts per host from the NCCL logs of a job (when the bundle has them).

Rules ask two questions of the logs: *does this host differ from its peers* (locality: SHM
where the others use P2P, P2P disabled by environment, no GPUDirect RDMA, a GPU–NIC path that
crosses sockets, a different CPU affinity), and *what does the fabric look like* (Socket vs
IB/RoCE for inter-node connections, GDR, WARN lines and IB errors per host). Every fact comes
with a SQL query over the NCCL tables so the user can check it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from stallscope.errors import QueryError
from stallscope.rules.base import Evidence
from stallscope.rules.context import Context

@dataclass
class Differences:
    host: str
    items: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    hosts_with_logs: set[str] = field(default_factory=set)

    def logs_cover(self, host: str) -> bool:
        return host in self.hosts_with_logs and len(self.hosts_with_logs) >= 2


def _table(ctx: Context, name: str, cols: str) -> pl.DataFrame | None:
    try:
        return ctx.store.sql(f"SELECT {cols} FROM {name} WHERE job = ?", [ctx.job])
    except QueryError:
        return None


def has_logs(ctx: Context) -> bool:
    hosts = log_hosts(ctx)
    return bool(hosts)


def log_hosts(ctx: Context) -> set[str]:
    t = _table(ctx, "nccl_comms", "DISTINCT host")
    return set(t["host"].drop_nulls().to_list()) if t is not None else set()


def connections(ctx: Context) -> pl.DataFrame | None:
    """Connections with hosts resolved (``nccl_transports`` when it exists, else raw)."""
    t = _table(ctx, "nccl_transports", "*")
    if t is None:
        t = _table(ctx, "nccl_connections", "*")
    return t


def shm_share(ctx: Context) -> dict[str, float]:
    """Per host: the share of its intra-node connections (P2P or SHM) that go through SHM."""
    conns = connections(ctx)
    if conns is None or conns.height == 0 or "transport" not in conns.columns:
        return {}
    intra = conns.filter(pl.col("transport").is_in(["P2P", "SHM"]) & pl.col("host").is_not_null())
    share = intra.group_by("host").agg((pl.col("transport") == "SHM").mean().alias("shm"))
    return dict(zip(share["host"].to_list(), share["shm"].to_list()))


def p2p_disabled_by_env(ctx: Context) -> set[str]:
    """Hosts whose NCCL log echoes ``NCCL_P2P_DISABLE=1`` or ``NCCL_P2P_LEVEL=LOC``/``0``."""
    env = _table(ctx, "nccl_env", "host, name, value")
    if env is None or env.height == 0:
        return set()
    off = env.filter(((pl.col("name") == "NCCL_P2P_DISABLE") & (pl.col("value") == "1"))
                     | ((pl.col("name") == "NCCL_P2P_LEVEL") & pl.col("value").is_in(["LOC", "0"])))
    return set(off["host"].drop_nulls().to_list())


def shm_evidence(ctx: Context, value: float | None) -> Evidence:
    return Evidence("intra-node transports per host (SHM instead of P2P)",
                    f"SELECT host, transport, count(*) AS connections FROM nccl_connections WHERE {ctx.where} "
                    f"AND transport IN ('P2P', 'SHM') GROUP BY ALL ORDER BY host, transport", value)


def p2p_env_evidence(ctx: Context) -> Evidence:
    return Evidence("NCCL P2P settings echoed by each host",
                    f"SELECT DISTINCT host, name, value FROM nccl_env WHERE {ctx.where} AND name IN "
                    f"('NCCL_P2P_DISABLE', 'NCCL_P2P_LEVEL', 'NCCL_SHM_DISABLE') ORDER BY host", None)


def placement_differences(ctx: Context, host: str) -> Differences:
    cache = ctx.__dict__.setdefault("_placement_cache", {})
    if host in cache:
        return cache[host]
    diffs = Differences(host=host, hosts_with_logs=log_hosts(ctx))
    if not diffs.logs_cover(host):
        cache[host] = diffs
        return diffs
    others = diffs.hosts_with_logs - {host}
    w = ctx.where
    s = shm_share(ctx)
    peer = [s[h] for h in others if h in s]
    if host in s and peer and s[host] >= 0.5 and max(peer) < 0.5:
        diffs.items.append(f"its GPUs talk through shared memory (SHM, {s[host]:.0%} of intra-node connections) where the "
                           f"other hosts use P2P/NVLink")
        diffs.evidence.append(shm_evidence(ctx, round(s[host], 3)))
    conns = connections(ctx)
    if conns is not None and conns.height and "transport" in conns.columns:
        net = conns.filter((pl.col("transport") == "NET") & pl.col("host").is_not_null() & pl.col("gdr").is_not_null())
        if net.height:
            g = net.group_by("host").agg(pl.col("gdr").mean().alias("gdr"))
            gd = dict(zip(g["host"].to_list(), g["gdr"].to_list()))
            peer = [gd[h] for h in others if h in gd]
            if host in gd and peer and gd[host] < 0.5 and min(peer) >= 0.5:
                diffs.items.append("its inter-node connections run without GPUDirect RDMA (no /GDRDMA) while the other hosts use it")
                diffs.evidence.append(Evidence("GPUDirect RDMA on NET connections per host",
                                               f"SELECT host, gdr, count(*) AS connections FROM nccl_connections WHERE {w} "
                                               f"AND transport = 'NET' GROUP BY ALL ORDER BY host, gdr", round(gd[host], 3)))
    off_hosts = p2p_disabled_by_env(ctx)
    if host in off_hosts and not (others & off_hosts):
        diffs.items.append("P2P is disabled by environment on it (NCCL_P2P_DISABLE / NCCL_P2P_LEVEL) and not elsewhere")
        diffs.evidence.append(p2p_env_evidence(ctx))
    topo = _table(ctx, "nccl_topology", "host, kind, type_inter, link_type, node, peer")
    if topo is not None and topo.height:
        g = topo.filter((pl.col("kind") == "graph") & pl.col("type_inter").is_not_null())
        if g.height:
            sys_share = g.group_by("host").agg(pl.col("type_inter").is_in(["SYS", "NODE"]).mean().alias("sys"))
            sy = dict(zip(sys_share["host"].to_list(), sys_share["sys"].to_list()))
            peer = [sy[h] for h in others if h in sy]
            if host in sy and peer and sy[host] >= 0.5 and max(peer) < 0.5:
                diffs.items.append("its GPU–NIC path crosses CPU sockets (topology graph type SYS/NODE) while the other hosts' is local")
                diffs.evidence.append(Evidence("worst GPU-NIC path type of each host's graph search",
                                               f"SELECT host, type_inter, count(*) AS graphs FROM nccl_topology WHERE {w} "
                                               f"AND kind = 'graph' GROUP BY ALL ORDER BY host", None))
    aff = _table(ctx, "nccl_affinity", "host, gpu, mask")
    if aff is not None and aff.height:
        centers = _affinity_centers(aff)
        mine = {g: c for (h, g), c in centers.items() if h == host}
        diff = 0
        compared = 0
        for g, c in mine.items():
            peer = [v for (h, gg), v in centers.items() if gg == g and h in others]
            if not peer:
                continue
            compared += 1
            peer.sort()
            if abs(c - peer[len(peer) // 2]) > 0.25:
                diff += 1
        if compared and diff >= max(1, (compared + 1) // 2):
            diffs.items.append(f"its GPUs are bound to CPUs on the other NUMA node than on the other hosts ({diff} of {compared} GPUs)")
            diffs.evidence.append(Evidence("CPU affinity NCCL reports per host and GPU",
                                           f"SELECT DISTINCT host, gpu, mask FROM nccl_affinity WHERE {w} ORDER BY gpu, host", diff))
    cache[host] = diffs
    return diffs


def _affinity_centers(aff: pl.DataFrame) -> dict[tuple[str, int], float]:
    """Where in its host's CPU range each GPU's affinity mask sits (0 = first CPUs, 1 = last).

    Masks are compared by position, not bit for bit: hosts with different core counts print
    different masks for the same NUMA placement.
    """
    bits: dict[tuple[str, int], list[int]] = {}
    top: dict[str, int] = {}
    for host, gpu, mask in aff.select("host", "gpu", "mask").unique().iter_rows():
        if host is None or gpu is None or not mask:
            continue
        try:
            words = [int(w, 16) for w in mask.split(",")]
        except ValueError:
            continue
        set_bits = []
        for i, w in enumerate(reversed(words)):
            for b in range(32):
                if w >> b & 1:
                    set_bits.append(i * 32 + b)
        if set_bits:
            bits[(host, int(gpu))] = set_bits
            top[host] = max(top.get(host, 0), max(set_bits) + 1)
    return {k: (sum(v) / len(v)) / max(top[k[0]], 1) for k, v in bits.items()}
