"""Tables materialized by the analysis stage for every job (see ``stallscope/analysis``).

All ``*_ns`` times here are **aligned**: on the clock of the reference host (the host of the
lowest rank), i.e. raw trace time + ``clock_offsets.offset_ns`` of the rank's host.
"""

from __future__ import annotations

import pyarrow as pa

from stallscope.store.schema import C, TableSpec, register

I32, I64, F64, STR, BOOL = pa.int32(), pa.int64(), pa.float64(), pa.string(), pa.bool_()

CLOCK_OFFSETS = TableSpec(
    "clock_offsets",
    "One clock offset per host, estimated from the end times of matched synchronous collectives"
    " (they end at nearly the same instant on every member): aligned time = raw trace time + offset_ns.",
    (
        C("host", STR, "host name (ranks.host; `rank-N` when the host is unknown)"),
        C("offset_ns", I64, "add to this host's raw timestamps to get reference-clock time", "ns"),
        C("spread_ns", I64, "robust spread (1.4826 x MAD) of the residuals of the collective end times used", "ns"),
        C("instances", I64, "matched collective instances spanning this host and another that were used"),
        C("rejected", I64, "instances rejected as outliers (residual > 5 spreads)"),
        C("reference", BOOL, "true for the reference host (offset 0)"),
        C("method", STR, "collective_end | reference | a2a (all-to-all causality bracket) | p2p (send/recv causality) | base_time (fallback: Kineto baseTimeNanoseconds) | wall_clock | none"),
    ),
    stage="analysis",
)

COLLECTIVE_INSTANCES = TableSpec(
    "collective_instances",
    "One row per collective instance: the same collective matched across all its participants.",
    (
        C("instance_id", I64, "id of the instance (unique within the job)"),
        C("channel", STR, "what it was matched within: `pg:<name>:<ranks>`, `p2p:<a>-<b>`, `stream:<id>` or `cpu`"),
        C("match", STR, "how: seq (process group + Seq) | order (order within channel and step)"),
        C("pg_name", STR, "process group name when known"),
        C("seq", I64, "Seq when matched by it"),
        C("step", I64, "ProfilerStep N (of the host-side call) on the first member"),
        C("op", STR, "normalized op (collectives.op)"),
        C("bytes", I64, "message size, nccl-tests convention (max over members)", "bytes"),
        C("group_size", I32, "members the group declares (Group size / pg_ranks); null if unknown"),
        C("members", I32, "members found in the bundle"),
        C("hosts", I32, "distinct hosts among the members"),
        C("scope", STR, "intra (all members on one host) | inter; a point-to-point pair with one end recorded is inter when "
                          "the other end's host (recorded, or its rank's block of a host) is another"),
        C("consistent", BOOL, "all members agree on op (a send and its recv agree) and size"),
        C("first_arrival_ns", I64, "earliest member start (aligned)", "ns"),
        C("last_arrival_ns", I64, "latest member start (aligned): when everyone was there", "ns"),
        C("last_rank", I32, "the member that arrived last"),
        C("end_ns", I64, "median member end (aligned)", "ns"),
        C("skew_ns", I64, "last_arrival - first_arrival: how long the earliest member waited", "ns"),
        C("transfer_ns", I64, "end - last_arrival: time to move the bytes once everyone was there", "ns"),
        C("bus_factor", F64, "nccl-tests bus-bandwidth factor: AllReduce 2(n-1)/n; AllGather, ReduceScatter, AllToAll (n-1)/n; others 1"),
        C("algbw_gbps", F64, "bytes / transfer time", "GB/s"),
        C("busbw_gbps", F64, "algbw x bus_factor", "GB/s"),
        C("absent", BOOL, "a declared member has no row and may have come last (its trace ended before, or it left "
                          "none and the transfer exceeds complete instances'): transfer_ns is no bandwidth"),
    ),
    stage="analysis",
)

COLLECTIVE_MEMBERS = TableSpec(
    "collective_members",
    "One row per (collective instance, member rank): when it arrived, how long it waited, when it ended.",
    (
        C("instance_id", I64, "→ collective_instances.instance_id"),
        C("rank", I32, "member rank → ranks.rank"),
        C("host", STR, "member host"),
        C("step", I64, "ProfilerStep N of this member's host-side call"),
        C("arrival_ns", I64, "start of this member's execution (kernel start), aligned", "ns"),
        C("end_ns", I64, "end of this member's execution, aligned", "ns"),
        C("wait_ns", I64, "last arrival - own arrival: time spent waiting for the others", "ns"),
        C("transfer_ns", I64, "own end - last arrival", "ns"),
        C("is_last", BOOL, "this member arrived last"),
        C("cpu_start_ns", I64, "host-side call start, aligned (null if not in the trace)", "ns"),
        C("ready_ns", I64, "when its inputs were ready: end of the computation launched before the host-side call "
                           "(the NCCL stream waits for it), aligned; null when unknown. arrival - ready is time spent "
                           "queued behind other collectives", "ns"),
        C("gates_compute", BOOL, "this member's GPU computation waited for the collective: its next computation started "
                                 "right at the end after the compute stream sat idle (FSDP all-gather, last gradient bucket, "
                                 "tensor-parallel all-reduce)"),
        C("compute_overlaps_end", BOOL, "this member's GPU was computing up to 30 µs before the collective ended or "
                                        "later: its computation did not sit idle waiting for it (DDP's gradient buckets "
                                        "under backward)"),
    ),
    stage="analysis",
)

STEP_BREAKDOWN = TableSpec(
    "step_breakdown",
    "Where each rank's step time went (the columns from compute_ns to other_idle_ns sum to step_ns)."
    " Built by a sweep over the rank's busy timeline (GPU activities, or main-thread CPU ops on"
    " CPU-only traces) inside the step window [this step's start, next step's start).",
    (
        C("rank", I32, "global rank"),
        C("host", STR, "host"),
        C("step", I64, "ProfilerStep N"),
        C("timeline", STR, "gpu (kernels) | cpu (main-thread ops; CPU-only traces)"),
        C("start_ns", I64, "window start (aligned)", "ns"),
        C("end_ns", I64, "window end (aligned): next step's start, or the end of the last step's work", "ns"),
        C("step_ns", I64, "window length", "ns"),
        C("compute_ns", I64, "busy with computation (kernels incl. memcpy/memset; CPU ops on CPU traces)", "ns"),
        C("comm_intra_ns", I64, "exposed communication (not under compute) moving bytes in intra-node collectives", "ns"),
        C("comm_inter_ns", I64, "exposed communication moving bytes in inter-node collectives", "ns"),
        C("sync_wait_ns", I64, "exposed time inside collectives waiting for later-arriving peers", "ns"),
        C("host_stall_ns", I64, "idle with nothing launched: the host was behind (data loading, syncs, launch overhead)", "ns"),
        C("other_idle_ns", I64, "idle although work was already launched (dependencies, launch latency)", "ns"),
        C("comm_hidden_ns", I64, "communication overlapped by compute (not part of the sum)", "ns"),
    ),
    stage="analysis",
)

RANK_HOSTS = TableSpec(
    "rank_hosts",
    "Hosts inferred for ranks whose host no input names: ranks on one host share a clock, so ranks"
    " whose estimated clock offsets coincide are grouped (the `ranks` view uses these when ranks.host is null).",
    (
        C("rank", I32, "global rank"),
        C("host", STR, "inferred host: a known host whose clock and rank block the rank shares, else `host-of-ranks-A-B`"),
        C("source", STR, "how it was inferred: clock"),
    ),
    stage="analysis",
)

register(RANK_HOSTS, CLOCK_OFFSETS, COLLECTIVE_INSTANCES, COLLECTIVE_MEMBERS, STEP_BREAKDOWN)
