"""Shared by the fabric rules: inter-node transfers, reference bandwidth, log facts."""

from __future__ import annotations

import json
import re

import polars as pl

from stallscope.analysis.collectives import transfer_measured
from stallscope.rules.context import Context
from stallscope.rules.placement import connections, log_hosts

#: bus bandwidth any RDMA fabric delivers between nodes (a single 100 Gb/s NIC: ~10-12 GB/s
#: busbw in nccl-tests); healthy clusters exceed it, TCP sockets rarely reach it
REF_RDMA_GBPS = 10.0
#: "far below what any RDMA transport gives": under 70 % of the single-NIC reference (one 100 Gb/s
#: NIC at the 85 % nccl-tests efficiency gives 10.6 GB/s; TCP sockets and a link trained down fall below)
COLLAPSE_SHARE = 0.7
COLLAPSE_GBPS = COLLAPSE_SHARE * REF_RDMA_GBPS
#: "far below" what the fabric should give: under this share of it (nccl-tests reach ~85 % of NCCL's
#: graph bandwidth in isolation; collectives overlapped with compute keep well above 60 % of that)
FAR_BELOW = 0.6
#: GPUs whose multi-node systems usually ship with 200 Gb/s or faster RDMA NICs (Hopper, Blackwell:
#: ConnectX-7, BlueField-3, ConnectX-8 at 200/400/800 Gb/s). Only the cost of a *proven* socket
#: fallback (FAB002) counts their NICs at 200 Gb/s: deciding from the GPU model alone that a
#: healthy-looking 12 GB/s per host is a fault would flag H100 hosts with one 100 Gb/s NIC
FAST_NIC_GPUS = re.compile(r"\b(?:GH200|GB200|GB300|H100|H200|H800|H20|B100|B200|B300)\b", re.IGNORECASE)
#: how many times the 100 Gb/s floors those systems' slowest NIC carries
FAST_NIC_FACTOR = 2.0
#: expectations that are floors, not measured capacities (see :func:`expected_busbw`)
FLOOR_BASES = ("nic_count", "reference")
#: messages smaller than this are latency-bound: their bandwidth says little about the fabric
MIN_BW_BYTES = 1 << 20
#: an inter-node transfer this long is bandwidth-bound even when its size is unknown
UNSIZED_BW_NS = 500_000
#: smallest message whose time can still show a collapsed link: when a job moves nothing of
#: ``MIN_BW_BYTES`` or more between nodes (pipeline stages sending activations of a few hundred KiB)
SMALL_BW_BYTES = 64 << 10
#: latency no inter-node message pays on a working fabric (NCCL: 5-30 µs a hop, ~100 µs for a ring
#: over 16 nodes): a small message is only called slow on the time it takes beyond this
LATENCY_ALLOWANCE_NS = 1_000_000
BW_OPS = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce")
#: point-to-point transfers (pipeline stages, MoE dispatch): bus bandwidth = bytes / time of the pair
P2P_OPS = ("send", "recv")


def inter_transfers(ctx: Context, *, min_bytes: int = MIN_BW_BYTES, p2p: bool = False) -> pl.DataFrame:
    """Multi-member inter-node instances of bandwidth-bound collectives with a transfer time
    (with ``p2p``, matched inter-node send/recv pairs too)."""
    ops = BW_OPS + P2P_OPS if p2p else BW_OPS
    return ctx.d.instances.filter(
        (pl.col("scope") == "inter") & transfer_measured() & pl.col("op").is_in(ops)
        & (pl.col("bytes") >= min_bytes) & pl.col("busbw_gbps").is_not_null())


def arrive_together(df: pl.DataFrame) -> bool:
    """Ranks arrive on time relative to the transfer (skew is small next to moving the bytes).

    Judged on the collectives; a job whose only inter-node transfers are point-to-point passes:
    a pair's transfer is timed from the later side's arrival, and a receiver posted early (as
    pipeline stages do) waits before it, not in it."""
    if df.height == 0:
        return False
    skew = collective_skew(df)
    return skew is None or skew < 0.5


def collective_skew(df: pl.DataFrame) -> float | None:
    """Median arrival skew / transfer time of the collectives among ``df`` (None when all are point-to-point)."""
    coll = df.filter(~pl.col("op").is_in(P2P_OPS))
    return float((coll["skew_ns"] / coll["transfer_ns"]).median()) if coll.height else None


def transfers_at_bandwidth(ctx: Context, gbps: float | None = None, *, without: str | None = None) -> dict[int, float]:
    """Replay positions of inter-node instances -> transfer time at their expected bus bandwidth
    (or at ``gbps`` × their share of the host's NICs)."""
    tl = ctx.timeline
    if tl is None:
        return {}
    inst = inter_expectations(ctx, without=without, min_bytes=64 << 10, estimated=True)
    pos_of = {int(i): p for p, i in enumerate(tl.inst_ids.tolist())}
    out = {}
    for iid, b, f, exp, share in inst.select("instance_id", "bytes", "bus_factor", "expected_gbps", "share").iter_rows():
        bw = exp if gbps is None else gbps * (share or 1.0)
        if int(iid) in pos_of and b and bw:
            out[pos_of[int(iid)]] = float(b) * float(f or 1.0) / bw  # bytes / (GB/s) = ns
    return out


def socket_facts(ctx: Context) -> dict[str, object]:
    """What the logs say about the data network: selected nets, Socket inter-node connections."""
    hosts = log_hosts(ctx)
    if not hosts:
        return {"logs": False}
    conns = connections(ctx)
    socket_hosts: set[str] = set()
    rdma_hosts: set[str] = set()
    n_socket = 0
    if conns is not None and conns.height and "net" in conns.columns:
        net = conns.filter((pl.col("transport") == "NET") & pl.col("host").is_not_null())
        inter = net.filter(pl.col("inter_node").fill_null(True))
        sock = inter.filter(pl.col("net") == "Socket")
        n_socket = sock.height
        socket_hosts = set(sock["host"].to_list())
        rdma_hosts = set(inter.filter(pl.col("net") != "Socket")["host"].to_list())
    try:
        sel = ctx.store.sql("SELECT DISTINCT host, net FROM nccl_net WHERE job = ? AND kind = 'selected'", [ctx.job])
        for h, n in sel.iter_rows():
            if n == "Socket" and h:
                socket_hosts.add(h)
            elif n and h:
                rdma_hosts.add(h)
    except Exception:  # noqa: BLE001 - older stores without the table
        pass
    return {"logs": True, "hosts": hosts, "socket_hosts": socket_hosts - rdma_hosts, "rdma_hosts": rdma_hosts,
            "socket_connections": n_socket}


#: share of NCCL's graph bandwidth a large collective achieves as bus bandwidth (nccl-tests: 80-90 %)
GRAPH_EFFICIENCY = 0.85
#: bus bandwidth per RDMA NIC when the logs name the NICs but not their speed (100 Gb/s at ~80 %)
PER_NIC_GBPS = 10.0


#: share of the ports' line rate a large collective achieves as bus bandwidth (nccl-tests: ~80-90 %)
NIC_EFFICIENCY = 0.8


def manifest_nic_rates(ctx: Context) -> dict[str, list[float]]:
    """Per host: line rates (Gbit/s) of its RDMA ports that are up (state ACTIVE), from the
    collector's ``/sys/class/infiniband`` probe (``manifest_topology``); a host whose probe ran
    with every port down maps to an empty list. Hosts without the probe are absent."""
    try:
        t = ctx.store.sql("SELECT host, parsed FROM manifest_topology WHERE job = ? AND probe = 'infiniband' "
                          "AND status = 'ok' AND host IS NOT NULL AND parsed IS NOT NULL", [ctx.job])
    except Exception:  # noqa: BLE001 - no manifest tables in this store
        return {}
    out: dict[str, list[float]] = {}
    for host, parsed in t.iter_rows():
        try:
            ports = json.loads(parsed).get("ports") or []
        except (ValueError, AttributeError):
            continue
        out[host] = sorted((float(p["rate_gbps"]) for p in ports if isinstance(p, dict) and p.get("rate_gbps")
                            and "ACTIVE" in str(p.get("state") or "").upper()), reverse=True)
    return out


def fabric_facts(ctx: Context) -> dict[str, dict[str, float]]:
    """Per-host facts: RDMA devices the NCCL logs listed, inter-node graph bandwidth (``bw_inter``
    × channels of NCCL's topology search, i.e. what NCCL computed the host's NICs can carry), GDR
    share of NET connections, and ``nic_gbs``: the line rate of the host's active RDMA ports from
    the collector's manifest (GB/s): NCCL spreads a collective evenly over its channels, one NIC
    each, so k ports (the fastest min(ports, GPUs of the host)) carry k × the slowest of them."""
    out: dict[str, dict[str, float]] = {"nics": {}, "graph_bw": {}, "gdr": {}, "nic_gbs": {}}
    for h, rates in manifest_nic_rates(ctx).items():
        k = min(len(rates), ctx.ranks_per_host.get(h) or len(rates))
        out["nic_gbs"][h] = k * rates[k - 1] / 8.0 if k else 0.0
    try:
        n = ctx.store.sql("SELECT host, count(DISTINCT dev_name) AS n FROM nccl_net WHERE job = ? AND kind = 'ib_device' "
                          "AND host IS NOT NULL GROUP BY host", [ctx.job])
        out["nics"] = {h: float(v) for h, v in n.iter_rows()}
        out["graph_bw"] = _inter_graph_bandwidth(ctx)
    except Exception:  # noqa: BLE001 - no NCCL tables in this store
        pass
    conns = connections(ctx)
    if conns is not None and conns.height and "gdr" in conns.columns:
        net = conns.filter((pl.col("transport") == "NET") & (pl.col("net") != "Socket") & pl.col("gdr").is_not_null()
                           & pl.col("host").is_not_null())
        g2 = net.group_by("host").agg(pl.col("gdr").mean())
        out["gdr"] = dict(zip(g2["host"].to_list(), g2["gdr"].to_list()))
    return out


def _graph_searches(ctx: Context) -> pl.DataFrame:
    """NCCL's graph searches for communicators that span nodes: host, the communicator's
    ``nranks`` and ``nnodes`` (null when unknown) and ``bw`` = ``bw_inter × nChannels``. A
    single-node communicator's search prints an inter-node bandwidth too (the intra-node one,
    meaningless for NICs), so each search is tied to its communicator: the
    nearest communicator line (``nRanks ... nNodes``, ``Init START``/``COMPLETE``) printed by the
    same thread of the same process; it spans nodes when ``nNodes > 1``, or (older NCCL) when it
    has more ranks than the host has GPUs. A search with no communicator line counts only when
    its inter-node bandwidth is below its intra-node one. A host's GPUs are the fullest host's
    ranks (hosts of one job are built alike; one whose rank left no trace still has that GPU).
    ``bw_inter_gbs`` (per channel) is kept too: :func:`nic_speed_capacity`."""
    g = ctx.store.sql("SELECT file, pid, tid, line_no, host, bw_inter_gbs * coalesce(n_channels, 1) AS bw, bw_intra_gbs, bw_inter_gbs "
                      "FROM nccl_topology WHERE job = ? AND kind = 'graph' AND bw_inter_gbs > 0 AND host IS NOT NULL "
                      "AND pid IS NOT NULL AND tid IS NOT NULL", [ctx.job])
    if g.height == 0:
        return pl.DataFrame(schema={"host": pl.String, "nranks": pl.Int32, "nnodes": pl.Int32, "bw": pl.Float64,
                                    "bw_inter_gbs": pl.Float64})
    c = ctx.store.sql("SELECT file, pid, tid, line_no, nnodes, nranks FROM nccl_comms WHERE job = ? AND nranks IS NOT NULL "
                      "AND pid IS NOT NULL AND tid IS NOT NULL", [ctx.job])
    g = g.sort("line_no")
    if c.height:
        g = g.join_asof(c.sort("line_no").rename({"line_no": "_cl"}), left_on="line_no", right_on="_cl",
                        by=["file", "pid", "tid"], strategy="nearest", check_sortedness=False)
    else:
        g = g.with_columns(pl.lit(None, dtype=pl.Int32).alias("nnodes"), pl.lit(None, dtype=pl.Int32).alias("nranks"))
    # the fullest host's ranks: a host whose trace of one rank is missing has as many GPUs
    gpus = pl.when(pl.col("host").is_in(list(ctx.ranks_per_host))).then(pl.lit(ctx.gpus_per_host))
    multi = (pl.when(pl.col("nnodes").is_not_null()).then(pl.col("nnodes") > 1)
             .when(pl.col("nranks").is_not_null() & gpus.is_not_null()).then(pl.col("nranks") > gpus)
             .otherwise(pl.col("bw_inter_gbs") < pl.col("bw_intra_gbs").fill_null(float("inf"))))
    return g.filter(multi.fill_null(False)).select("host", "nranks", "nnodes", "bw", "bw_inter_gbs")


def _inter_graph_bandwidth(ctx: Context) -> dict[str, float]:
    """Per host: the largest ``bw_inter × nChannels`` of NCCL's graph searches for communicators
    that span nodes (:func:`_graph_searches`)."""
    per = _graph_searches(ctx).group_by("host").agg(pl.col("bw").max())
    return {h: float(v) for h, v in per.iter_rows() if v}


def graph_bandwidth_same_comm(ctx: Context) -> dict[str, float]:
    """Per host: the largest graph bandwidth over the communicator shapes (ranks, nodes) that
    every host with a multi-node graph search searched; empty when fewer than two hosts share
    one. NCCL's search is deterministic for identical hardware, so one host's lower bandwidth
    for the *same* communicator is a fact about its NICs or their paths, not about which
    communicators its log happened to show."""
    try:
        g = _graph_searches(ctx)
    except Exception:  # noqa: BLE001 - no NCCL tables in this store
        return {}
    g = g.filter(pl.col("nranks").is_not_null() & (pl.col("bw") > 0))
    hosts = g["host"].n_unique()
    if hosts < 2:
        return {}
    shared = g.group_by("nranks", "nnodes").agg(pl.col("host").n_unique().alias("h")).filter(pl.col("h") == hosts)
    per = g.join(shared.select("nranks", "nnodes"), on=["nranks", "nnodes"], nulls_equal=True).group_by("host").agg(pl.col("bw").max())
    return {h: float(v) for h, v in per.iter_rows() if v}


#: bus bandwidth of the fastest common NIC (400 Gb/s line rate = 50 GB/s): caps graph-derived capacities
MAX_PER_NIC_GBPS = 50.0


def nic_speed_capacity(ctx: Context, *, without: str | None = None) -> float | None:
    """What a host's NICs carry at most, from its NCCL log: the per-channel inter-node bandwidth
    of its multi-node graph searches (a channel runs over one NIC at the NIC's speed, so the
    largest is the speed of its NICs) × the RDMA NICs the log lists (at most one per GPU); the
    lowest over the hosts that have both, ``without`` left out. None when no host has both.

    The channel count of a search is no capacity (NCCL duplicates its searched channels, and a
    rail-optimized host with eight NICs searched four channels of 24 GB/s, 96 GB/s, while its
    collectives moved 160: seed 28000 #0166); the NICs' speed times their number is."""
    try:
        g = _graph_searches(ctx)
    except Exception:  # noqa: BLE001 - no NCCL tables in this store
        return None
    nics = fabric_facts(ctx)["nics"]
    per = g.group_by("host").agg(pl.col("bw_inter_gbs").max())
    caps = [float(v) * min(nics[h], ctx.gpus_per_host) for h, v in per.iter_rows()
            if h != without and v and nics.get(h)]
    return min(caps) if caps else None


def nic_floor_factor(ctx: Context) -> float:
    """How much faster than 100 Gb/s this job's slowest likely RDMA NIC is: :data:`FAST_NIC_FACTOR`
    when every rank's GPU is of a generation whose systems usually ship with 200 Gb/s or faster NICs
    (:data:`FAST_NIC_GPUS`, from the traces' ``deviceProperties``), else 1. A prior, not a
    measurement: it sizes what RDMA would have given where the logs prove NCCL never used it
    (FAB002), never the floor below which healthy-looking transfers count as a fault."""
    names = ctx.device_names
    if names and all(n and FAST_NIC_GPUS.search(n) for n in names):
        return FAST_NIC_FACTOR
    return 1.0


def expected_busbw(ctx: Context, *, without: str | None = None) -> tuple[float, str]:
    """Inter-node bus bandwidth one host's NICs should give (the bottleneck host), and the basis.

    NCCL's own graph bandwidth (channels × per-channel inter-node bandwidth of the topology
    search, × GRAPH_EFFICIENCY) when the logs have it (the lowest over the hosts whose logs do; one
    host's is enough, as a job's hosts are built alike), capped by the NICs listed; else the line
    rate of the active RDMA ports the collector's manifest recorded (× NIC_EFFICIENCY, slowest
    host); else the RDMA NICs NCCL listed on the host with the fewest (× PER_NIC_GBPS, i.e. as if
    100 Gb/s: the speed is not in the log); else the single-NIC reference. The last two are
    floors, whatever the GPUs: an H100 host with one 100 Gb/s NIC is slow, not faulty.
    ``without``: as if that host were like its peers. A collective only gets its share of this
    when several run at once from one host (see :func:`inter_expectations`).
    """
    f = fabric_facts(ctx)
    nics = {h: v for h, v in f["nics"].items() if h != without}
    gpus = ctx.gpus_per_host
    gb = {h: v for h, v in f["graph_bw"].items() if h != without}
    if gb:
        cap = min(gb.values()) * GRAPH_EFFICIENCY
        if nics:
            cap = min(cap, min(min(nics.values()), gpus) * MAX_PER_NIC_GBPS)
        return cap, "nccl_graph"
    rates = {h: v for h, v in f["nic_gbs"].items() if h != without and v > 0}
    if rates:
        return min(rates.values()) * NIC_EFFICIENCY, "nic_rate"
    if nics:
        return min(min(nics.values()), gpus) * PER_NIC_GBPS, "nic_count"
    return REF_RDMA_GBPS, "reference"


def inter_expectations(ctx: Context, *, without: str | None = None, min_bytes: int = MIN_BW_BYTES,
                       estimated: bool = False) -> pl.DataFrame:
    """Bandwidth-bound inter-node instances with the bus bandwidth each should get.

    Concurrent communicators share a host's NICs: a group with k of a host's G ranks gets k/G of
    its capacity (one member per host, as in hybrid-sharded replicas, gets 1/G; a world group
    gets all of it). ``expected_gbps`` = capacity × min over the group's hosts of k/G.
    ``estimated``: with the instances whose transfer the replay estimates (:func:`estimated_inter`):
    what-ifs replay them at that bandwidth too, but they measure nothing.
    """
    inst = inter_transfers(ctx, min_bytes=min_bytes, p2p=True)
    if estimated:
        est = estimated_inter(ctx).filter(pl.col("bytes") >= min_bytes)
        if est.height:
            inst = pl.concat([inst, est.select(inst.columns)])
    if inst.height == 0:
        return inst.with_columns(pl.lit(None, dtype=pl.Float64).alias("expected_gbps"), pl.lit(None, dtype=pl.Float64).alias("share"))
    cap, _ = expected_busbw(ctx, without=without)
    per_host = ctx.d.members.join(inst.select("instance_id"), on="instance_id").group_by("instance_id", "host").agg(pl.len().alias("k"))
    g = pl.DataFrame({"host": list(ctx.ranks_per_host), "G": list(ctx.ranks_per_host.values())}, schema={"host": pl.String, "G": pl.Int64})
    share = per_host.join(g, on="host", how="left").group_by("instance_id").agg((pl.col("k") / pl.col("G")).min().clip(0.0, 1.0).alias("share"))
    return inst.join(share, on="instance_id", how="left").with_columns(pl.col("share").fill_null(1.0)).with_columns(
        (pl.col("share") * cap).alias("expected_gbps"))


def host_bandwidth_handicap(ctx: Context, host: str) -> float | None:
    """How much faster inter-node transfers would be if ``host`` were like its peers, from NCCL's
    graph bandwidth, else from the port rates in the manifest (bottleneck without the host /
    bottleneck with it); None when unknown."""
    f = fabric_facts(ctx)
    for g in (f["graph_bw"], f["nic_gbs"]):
        if host in g and len(g) >= 2:
            others = [v for h, v in g.items() if h != host]
            with_all = min(g.values())
            return min(others) / with_all if with_all > 0 else None  # no port up: how it moved bytes is unknown
    return None


#: exposed inter-node collective time (median rank's share of the job) at which a job is
#: network-bound: it spends more time moving bytes between nodes, with everyone there, than computing
NETWORK_BOUND_SHARE = 0.5
#: the same bar for a pipeline whose stages exchange activations across nodes (:func:`p2p_exposed`):
#: a stage's activations are small beside its layers' compute, so a pipeline on a working fabric
#: moves them in a small share of its time (2-13 % on the 74 pipelines of our generator's seeds
#: 31000-34000 without a fabric fault, stragglers and imbalance included; 2-8 % on the independent
#: pipeline simulator's, benchmarks/crosscheck), over TCP sockets in 25-84 % (40-82 %). A pipeline
#: that waits on its inter-node pairs for a quarter of its time, twice what any healthy one did, is
#: network-bound (seed 34000 #0036, 39 %: no finding under the collectives' bar of a half)
P2P_BOUND_SHARE = 0.25


def network_bound(ctx: Context) -> tuple[bool, pl.DataFrame, float, bool]:
    """Whether the job is network-bound although no bandwidth test could call its fabric faulty:
    its bandwidth-bound inter-node collectives, members arriving together, are exposed for at
    least :data:`NETWORK_BOUND_SHARE` of the median rank's time (:data:`P2P_BOUND_SHARE` for a
    pipeline's pairs, :func:`bound_share`).

    Two cases reach this test. Traces without message sizes (PyTorch < 2.1 without
    ``record_shapes``) give no bandwidth at all: collectives whose transfer takes ``UNSIZED_BW_NS``
    or more count as bandwidth-bound. Traces with sizes whose bandwidth stays above the floor of
    the slowest RDMA NIC, when nothing says what this fabric's NICs carry (no NCCL graph search,
    no port rates: the expectation is a floor, :data:`FLOOR_BASES`): a degraded link on a fast
    host and a healthy thin fabric then look alike, but either way the job waits on the network
    for most of its time. When NCCL's graph or the port rates say the fabric delivers what it
    should, a network-bound job is a design matter (a model too communication-heavy for its
    fabric), not a fabric fault, and this test is not asked; nor when the transfers reach what a
    400 Gb/s NIC per GPU carries (:data:`MAX_PER_NIC_GBPS` × :data:`NIC_EFFICIENCY` per GPU of the
    host: no fabric is faster). A job with inter-node point-to-point transfers (pipeline stages
    on different hosts) spends its bubbles inside its receives, so its exposure is not the time
    in inter-node communication but :func:`p2p_exposed`: the time its transfers take once both
    sides are there. Returns (network-bound, the instances, the median rank's exposed share, sized)."""
    inst = ctx.d.instances
    if inst.height == 0:
        return False, inst, 0.0, False
    inter = inst.filter((pl.col("scope") == "inter") & transfer_measured())
    if inter.height == 0:
        return False, inter, 0.0, False
    p2p = inter.filter(pl.col("op").is_in(P2P_OPS))
    sized = inter["bytes"].drop_nulls().len() > 0
    if sized:
        if expected_busbw(ctx)[1] not in FLOOR_BASES:
            return False, inter, 0.0, True
        # at what a 400 Gb/s NIC per GPU carries, no fabric is faster: the model is the matter
        gpus = ctx.gpus_per_host
        if inter_far_below(ctx)[2] >= gpus * MAX_PER_NIC_GBPS * NIC_EFFICIENCY:
            return False, inter, 0.0, True
        bound = inter_transfers(ctx, p2p=p2p.height > 0)
    else:
        bound = inter.filter(pl.col("op").is_in(BW_OPS + P2P_OPS) & (pl.col("transfer_ns") >= UNSIZED_BW_NS))
    if p2p.height:
        exposed = p2p_exposed(ctx, p2p)
    else:
        f = ctx.features
        exposed = float(f["comm_inter_frac"].median() or 0.0) if "comm_inter_frac" in f.columns and f.height else 0.0
    ok = bound.height >= 3 and arrive_together(bound) and exposed >= bound_share(p2p.height > 0)
    return ok, bound, exposed, sized


def bound_share(p2p: bool) -> float:
    """The exposed share at which a job is network-bound: :data:`P2P_BOUND_SHARE` for a pipeline
    whose stages exchange point-to-point transfers across nodes, else :data:`NETWORK_BOUND_SHARE`."""
    return P2P_BOUND_SHARE if p2p else NETWORK_BOUND_SHARE


def p2p_exposed(ctx: Context, p2p: pl.DataFrame) -> float:
    """The median rank's share of its steps spent in inter-node point-to-point transfers once both
    sides are there (each pair timed from the later side's arrival, so a receive posted early, a
    pipeline bubble, does not count; a send and a receive in flight at once count twice, an upper
    bound). On a healthy fabric a pipeline's activations cross nodes
    in a few percent of its time (2-9 % on the 42 pipelines of our generator's seeds 20000 and
    21000 without a fabric fault, stragglers included); over TCP sockets they took 32-85 %."""
    per = ctx.d.members.join(p2p.select("instance_id", "transfer_ns"), on="instance_id").group_by("rank").agg(
        pl.col("transfer_ns").sum())
    span = ctx.d.breakdown.group_by("rank").agg(pl.col("step_ns").sum())
    share = span.join(per, on="rank", how="left").select(
        (pl.col("transfer_ns").fill_null(0) / pl.col("step_ns")).clip(0.0, 1.0)).to_series()
    return float(share.median() or 0.0)


#: where the cost is not measured (no message sizes, no reference speed), the replay with inter-node
#: transfers this many times as fast is reported, and orders the finding among measured ones of its severity
UNMEASURED_SPEEDUP = 2.0


def lost_if_faster(ctx: Context) -> float | None:
    """What-if: inter-node transfers :data:`UNMEASURED_SPEEDUP` times as fast (None when none can be scaled)."""
    t = transfers_scaled(ctx, UNMEASURED_SPEEDUP)
    return ctx.lost_if_transfers("fab:transfers-faster", t) if t else None


def transfers_scaled(ctx: Context, factor: float) -> dict[int, float]:
    """Replay positions of inter-node instances -> their transfer time divided by ``factor``."""
    tl = ctx.timeline
    if tl is None or factor <= 1.0:
        return {}
    # without message sizes (older traces), a transfer of 0.5 ms or more is bandwidth-bound:
    # inter-node collective latency is tens of microseconds
    sized = (pl.col("bytes") >= 64 << 10) | (pl.col("bytes").is_null() & (pl.col("transfer_ns") >= UNSIZED_BW_NS))
    inst = ctx.d.instances.filter(
        (pl.col("scope") == "inter") & transfer_measured() & pl.col("op").is_in(BW_OPS + P2P_OPS) & sized)
    pos_of = {int(i): p for p, i in enumerate(tl.inst_ids.tolist())}
    out = {pos_of[int(i)]: float(t) / factor for i, t in inst.select("instance_id", "transfer_ns").iter_rows() if int(i) in pos_of}
    for i, t in estimated_inter(ctx).filter(sized).select("instance_id", "transfer_ns").iter_rows():
        out[pos_of[int(i)]] = float(t) / factor
    return out


def estimated_inter(ctx: Context) -> pl.DataFrame:
    """Inter-node instances of bandwidth-bound ops that lack a member the replay estimates
    (:attr:`~stallscope.analysis.whatif.Timeline.estimated`: a rank without a trace, or whose
    trace ended), with ``transfer_ns`` as replayed: no measure of the fabric (the recorded
    members may have waited for the absent one), but their bytes cross it all the same, and a
    what-if that speeds the fabric speeds them too. (Instances that measure their transfer, an
    absent member that came early, are :func:`inter_transfers`' own.)"""
    tl = ctx.timeline
    inst = ctx.d.instances
    if tl is None or not tl.estimated:
        return inst.clear()
    ids = tl.inst_ids
    est = pl.DataFrame({"instance_id": [int(ids[p]) for p in tl.estimated], "_t": list(tl.estimated.values())},
                       schema={"instance_id": inst.schema["instance_id"], "_t": pl.Float64})
    return (inst.join(est, on="instance_id")
            .filter((pl.col("scope") == "inter") & pl.col("op").is_in(BW_OPS + P2P_OPS) & ~transfer_measured())
            .with_columns(pl.col("_t").cast(inst.schema["transfer_ns"]).alias("transfer_ns")).drop("_t")
            .with_columns(pl.when(pl.col("transfer_ns") > 0).then(pl.col("bytes") / pl.col("transfer_ns") * pl.col("bus_factor"))
                          .alias("busbw_gbps")))


def transfers_without_handicap(ctx: Context, host: str, handicap: float) -> dict[int, float]:
    """Replay positions of inter-node instances -> their transfer time were ``host``'s NICs like
    its peers': divided by the ``handicap`` (:func:`host_bandwidth_handicap`), but never faster
    than the bandwidth the fabric gives without the host, when message sizes and a measured
    capacity (NCCL's graph, port rates; not a floor) tell it. NCCL's
    graph bandwidth comes in coarse steps: a port at 65 % of its peers' speed read as half their
    graph bandwidth (seed 24000 #0036), and the transfers, already faster than the halved graph
    promised, replayed at twice their speed (33.7 % where the rerun at full speed saves 23.7 %).
    Where the transfers already reach that bandwidth, no saving is left; where they beat the
    healthy hosts' capacity itself (the expectation / efficiency), it was no capacity, and the
    bound is what the healthy hosts' NICs carry (:func:`nic_speed_capacity`, × the efficiency):
    their speed from the graph times their number. Without it the handicap stands alone. (Seed
    28000 #0166: a NIC at 93 % of its peers' speed, whose graph read half theirs, replayed at
    twice the speed of transfers that already moved 160 GB/s per host through it, more than its
    halved NICs could carry: 23.8 % where the rerun at full speed saves 0.6 %.)"""
    scaled = transfers_scaled(ctx, handicap)
    _, basis = expected_busbw(ctx, without=host)
    if basis in FLOOR_BASES:
        return scaled
    e = inter_expectations(ctx, without=host, min_bytes=64 << 10)
    eff = GRAPH_EFFICIENCY if basis == "nccl_graph" else NIC_EFFICIENCY
    if e.height == 0 or float((e["busbw_gbps"] / e["expected_gbps"]).median()) * eff >= 1.0:
        # the transfers beat the healthy hosts' capacity itself (not only its expected share): no
        # NIC carries more than its rate, so that number is no capacity (the graph is coarse both ways);
        # the NICs' speed times their number is, where the logs give both
        cap = nic_speed_capacity(ctx, without=host) if e.height else None
        if cap is None:
            return scaled
        floor = transfers_at_bandwidth(ctx, cap * eff, without=host)
        return {p: max(t, floor.get(p, 0.0)) for p, t in scaled.items()}
    # between the expectation and the capacity, the capacity stands: a handicap the transfers do
    # not show costs nothing measurable (seed 27000 #0058: a port at 94 % of its peers' speed read
    # as half their graph bandwidth, transfers at 103 % of the expectation, replayed at twice their
    # speed: 26 % against 3.7 % true)
    floor = transfers_at_bandwidth(ctx, without=host)
    return {p: max(t, floor.get(p, 0.0)) for p, t in scaled.items()}


def inter_far_below(ctx: Context, *, without: str | None = None) -> tuple[bool, pl.DataFrame, float, float, str]:
    """Whether bandwidth-bound inter-node collectives, whose members arrive together, move bytes
    far below what the fabric should give (``without``: as if that host were like its peers).

    Returns (far below, the instances, per-host bus bandwidth achieved (median, GB/s), expected
    per host, basis of the expectation). "Far below" is under FAR_BELOW of a measured capacity
    (NCCL's graph, port rates), and under COLLAPSE_SHARE of a floor (NICs counted at the slowest
    RDMA speed, or the single-NIC reference): a healthy fabric is at or above its floor, so
    falling 30 % under it is as telling as falling 40 % under what the NICs are known to carry."""
    # asked by FAB001, LOC003 (once per host) and LOC004: computed once per job and ``without``
    cache = ctx.__dict__.setdefault("_far_below_cache", {})
    if without not in cache:
        inter = inter_expectations(ctx, without=without)
        bw = pl.col("busbw_gbps")
        if inter.height < 3:
            # nothing bandwidth-bound crosses nodes: messages of SMALL_BW_BYTES and more still show a
            # collapsed link by the time they take beyond any latency (a pipeline's activations of
            # 0.8 MiB taking 7 ms over TCP); those within the allowance count as fast
            inter = inter_expectations(ctx, without=without, min_bytes=SMALL_BW_BYTES)
            t = pl.col("transfer_ns")
            bw = pl.when(t > LATENCY_ALLOWANCE_NS).then(bw * t / (t - LATENCY_ALLOWANCE_NS)).otherwise(float("inf"))
        if inter.height < 3 or not arrive_together(inter):
            cache[without] = (False, inter, 0.0, 0.0, "reference")
        else:
            expected, basis = expected_busbw(ctx, without=without)
            # per-host equivalent: what the host's NICs carried, given the group's share of them
            host_bw = float(inter.select(bw / pl.col("share")).to_series().median())
            far = host_bw < (COLLAPSE_SHARE if basis in FLOOR_BASES else FAR_BELOW) * expected
            cache[without] = (far, inter, host_bw, expected, basis)
    return cache[without]
