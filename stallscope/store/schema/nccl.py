"""NCCL debug-log, nccl-tests and PyTorch watchdog tables (written by ``ingest.nccl_log``).

One NCCL log line becomes at most one row (a ``Trees`` line: one row per channel; a ``NET/IB :
Using`` line: one row per device). Every table carries the line's prefix ``host:pid:tid [cudaDev]``
(null where a launcher or the poster stripped it) and its provenance ``file``/``line_no``, so any
row can be traced back to the text it came from. Ranks are ranks *within the communicator* the
line belongs to; for a world-sized communicator they are global ranks.
"""

from __future__ import annotations

import pyarrow as pa

from stallscope.store.schema import C, Column, TableSpec, register

I32, I64, F64, STR, BOOL = pa.int32(), pa.int64(), pa.float64(), pa.string(), pa.bool_()
LIST_I32 = pa.list_(pa.int32())


def _prefix() -> tuple[Column, ...]:
    """The standard NCCL line prefix ``host:pid:tid [cudaDev] NCCL INFO`` (any launcher wrapper removed)."""
    return (
        C("host", STR, "host name from the line prefix `host:pid:tid [dev]`; null when the prefix was stripped"),
        C("pid", I64, "process id from the line prefix; null when stripped"),
        C("tid", I64, "thread id from the line prefix (NCCL's own numbering of the printing thread); null when stripped"),
        C("cuda_dev", I32, "CUDA device of the printing thread, the `[dev]` of the prefix (a message field `cudaDev` wins where the message has one)"),
    )


def _provenance() -> tuple[Column, ...]:
    return (
        C("file", STR, "path of the log inside the bundle"),
        C("line_no", I64, "1-based line number in the (decompressed) log"),
    )


def _table(name: str, doc: str, columns: tuple[Column, ...], *, distinct: tuple[str, ...] = ("line_no",)) -> TableSpec:
    """A table of log lines. Its integer columns repeat from line to line (pids, tids, devices, ranks,
    channels), so Parquet dictionary-encodes them like text: about a quarter smaller and faster to
    write. Columns in ``distinct`` (line numbers, opCounts) would only pay for a dictionary."""
    ints = tuple(c.name for c in columns if pa.types.is_integer(c.type) and c.name not in distinct)
    return TableSpec(name, doc, columns, dictionary=ints)


NCCL_COMMS = _table(
    "nccl_comms",
    "Communicator lifecycle lines: `Init START`, `Init COMPLETE`, `Destroy/Abort COMPLETE`, `bootstrapSplit ... DONE`"
    " and the `nRanks/nNodes/localRanks` topology line; one row per line. `nnodes`/`local_ranks` are copied to every"
    " row of the same communicator (same host, pid, comm pointer) once known.",
    (
        *_prefix(),
        C("event", STR, "init_start | init_complete | destroy_complete | abort_complete | split | topology"),
        C("init_func", STR, "API that created the communicator when printed (NCCL >= 2.21.5): ncclCommInitRank, ncclCommInitRankConfig, ncclCommSplit, ..."),
        C("comm_ptr", STR, "communicator pointer as printed (`comm 0x...`): unique within one process at one time"),
        C("comm_id", STR, "`commId` hash as printed (0x...): the same on every rank of the communicator (NCCL >= 2.16); null before"),
        C("rank", I32, "rank of this process in the communicator (global rank for the world communicator)"),
        C("nranks", I32, "number of ranks in the communicator"),
        C("nnodes", I32, "number of nodes of the communicator (`nNodes`, NCCL >= 2.19); null when not printed"),
        C("local_ranks", I32, "ranks of the communicator on this node (`localRanks`); null when not printed"),
        C("local_rank", I32, "this rank's index among its node's ranks (`localRank`); null when not printed"),
        C("nvml_dev", I32, "NVML device index (`nvmlDev`, physical GPU; differs from cuda_dev under CUDA_VISIBLE_DEVICES); null when not printed"),
        C("bus_id", STR, "PCI bus id of the GPU as printed (hex without 0x, e.g. `1b000`)"),
        C("parent_ptr", STR, "parent communicator pointer of a split communicator (`parent 0x...`)"),
        C("split_color", I64, "`color` of ncclCommSplit"),
        C("split_key", I64, "`key` of ncclCommSplit"),
        C("version", STR, "exact NCCL version (`NCCL version X.Y.Z` line of this process, or the file's only version); null when not printed"),
        C("version_range", STR, "NCCL versions consistent with the line formats of the file (e.g. `2.7.3-2.11.x`, `2.24.3+`); the exact version when known; null when nothing narrows it"),
        C("cuda_version", STR, "CUDA version NCCL was built with (`+cudaA.B` of the version line); null when not printed"),
        *_provenance(),
    ),
)

NCCL_NET = _table(
    "nccl_net",
    "Network facts: the selected network (`Using network X`), IB/RoCE devices (`NET/IB : Using [i]dev:port/link`),"
    " socket interfaces (`NET/Socket : Using`, `Bootstrap : Using`, the OOB interface), net/collnet plugins, and"
    " GPUDirect RDMA decisions per HCA. One row per device or per fact.",
    (
        *_prefix(),
        C("kind", STR, "selected | ib_device | socket_device | bootstrap_if | oob_if | plugin | collnet_plugin | gdr (per HCA) | gdr_gpu (per GPU/HCA pair) | no_device | ibverbs_missing"),
        C("net", STR, "network family: IB | Socket for devices and interfaces; for `selected` the name NCCL uses (IB, Socket, or a plugin's name such as IBext_v8)"),
        C("plugin", STR, "external net plugin: its name for `plugin`/`collnet_plugin` rows; for device rows the selected network of the process when it is not IB/Socket (the plugin that printed the devices)"),
        C("dev_index", I32, "device index `[i]` (the `NET/<net>/<i>` of connection lines)"),
        C("dev_name", STR, "HCA or interface name (mlx5_0, eth0, ...)"),
        C("port", I32, "HCA port number; for an interface, the number in `<n>` after its address"),
        C("link", STR, "link layer of an HCA port: IB | RoCE"),
        C("features", STR, "text after the link layer (e.g. `SHARP` for `/IB/SHARP`, rail/plane numbers as `:n`)"),
        C("address", STR, "IP address of an interface as printed (`10.0.0.1`, `fe80::...%ib0`)"),
        C("relaxed_ordering", BOOL, "true when the `NET/IB : Using` line ends with `[RO]` (PCI relaxed ordering on)"),
        C("gdr", BOOL, "GPUDirect RDMA for this HCA (`GPU Direct RDMA Enabled/Disabled for HCA`); on ib_device rows copied from the process's gdr rows; null when not printed"),
        C("gpu_bus_id", STR, "GPU of a per-GPU GDR decision (`... for GPU <busId> / HCA <i>`)"),
        C("message", STR, "the message text (after the prefix) for kinds that keep free text (plugin, gdr, gdr_gpu, no_device, ibverbs_missing)"),
        *_provenance(),
    ),
)

NCCL_CONNECTIONS = _table(
    "nccl_connections",
    "One row per connection line: `Ring|Channel CH[/CI] : SRC[dev] -> DST[dev] [send|receive] via TRANSPORT`"
    " (NCCL 2.4-2.30) and `CollNet CH/CI : RANK [send|receive] via COLLNET/...`. NET lines are printed by both sides"
    " (send and receive); P2P and SHM lines by the sender only.",
    (
        *_prefix(),
        C("comm_id", STR, "commId of the communicator being set up on this thread (last `Init START` of host:pid:tid); null when not attributable"),
        C("comm_ptr", STR, "communicator pointer of that `Init START`; null when not attributable"),
        C("channel", I32, "channel (ring) number"),
        C("conn_index", I32, "connection index after `/` (NET >= 2.12, P2P >= 2.14); null when not printed"),
        C("src_rank", I32, "sending rank (communicator rank); the rank itself for CollNet lines"),
        C("src_dev", I64, "bracket number of the sender: busId (hex decoded) when dev_is_bus_id, else nvmlDev (>= 2.18.3) or cudaDev (2.4)"),
        C("src_bus_id", STR, "sender's bracket text when it is a busId (hex, e.g. `3d000`), else null"),
        C("dst_rank", I32, "receiving rank; null for CollNet lines"),
        C("dst_dev", I64, "bracket number of the receiver (see src_dev)"),
        C("dst_bus_id", STR, "receiver's bracket text when it is a busId, else null"),
        C("dev_is_bus_id", BOOL, "true when the bracket numbers are PCI bus ids (NCCL 2.5-2.18.1), false when device indices; null without brackets"),
        C("direction", STR, "send | receive as printed (NET and CollNet lines); null for P2P/SHM (printed by the sender)"),
        C("transport", STR, "P2P | SHM | NET | COLLNET (or the first word of an unknown future transport)"),
        C("mechanism", STR, "P2P: IPC | CUMEM | MNNVL | direct pointer | common device | indirect; SHM: direct/direct, CE/direct, direct, direct shared memory; null for NET"),
        C("transport_detail", STR, "exact text after `via` (e.g. `P2P/IPC/read`, `NET/IB/0/GDRDMA`, `SHM/direct/direct`)"),
        C("net", STR, "network of a NET/COLLNET connection: IB | Socket | plugin name (IBext_v8, SHARP, ...); null otherwise"),
        C("net_dev", I32, "network device index (`NET/<net>/<i>`) → nccl_net.dev_index"),
        C("gdr", BOOL, "GPUDirect RDMA used (`/GDRDMA`); false for NET/COLLNET without it; null for P2P/SHM"),
        C("gdr_pci", BOOL, "GDR through PCI (`(PCI)` after /GDRDMA, NCCL >= 2.26)"),
        C("pxn_proxy_rank", I32, "PXN: rank whose NIC proxies this send (`NET/IB/0(5)`); null when not PXN"),
        C("shared", BOOL, "connection uses shared buffers (`/Shared`)"),
        C("read", BOOL, "P2P read mode (`/read`)"),
        C("ce", BOOL, "copy-engine mode (`/CE`, or SHM `CE` side)"),
        C("indirect_rank", I32, "intermediate rank of `P2P/indirect/<rank>[dev]`"),
        C("printer_rank", I32, "rank of the process that printed the line: the sender, or the receiver for `[receive]` lines"),
        C("inter_node", BOOL, "false for P2P/SHM (same host by construction); true for COLLNET; for NET true/false when both ranks' hosts are known from this file, else null (the `nccl_transports` view fills it in)"),
        *_provenance(),
    ),
)

NCCL_CHANNELS = _table(
    "nccl_channels",
    "Rings, trees and channel counts: `Channel NN/MM : r0 r1 ...` (ring order, rank 0 only), `Trees [c] ...` (one row"
    " per channel), GRAPH-subsystem `Ring NN : prev -> rank -> next` / `Tree N : up -> rank -> down`,"
    " `N coll channels, ...` summaries and `Connected all rings/trees/NVLS` milestones.",
    (
        *_prefix(),
        C("comm_id", STR, "commId attributed from the thread's last `Init START`; null when not attributable"),
        C("kind", STR, "ring | tree | graph_ring | graph_tree | summary | connected"),
        C("channel", I32, "channel number (ring, tree, graph_ring, graph_tree)"),
        C("n_channels", I32, "number of channels printed after `/` of a ring line"),
        C("ranks", LIST_I32, "ring order (ring rows); NCCL prints at most 20 ranks (<= 2.22) or 127 characters (>= 2.23)"),
        C("rank", I32, "the printing rank (middle of tree / graph lines)"),
        C("tree_parent", I32, "tree parent rank (-1 = root); for 2.5-2.7 `a|b` lines, of the first tree"),
        C("tree_children", LIST_I32, "tree children ranks (-1 entries dropped)"),
        C("prev_rank", I32, "graph_ring: previous rank in the ring"),
        C("next_rank", I32, "graph_ring: next rank in the ring"),
        C("coll_channels", I32, "summary: collective channels"),
        C("collnet_channels", I32, "summary: CollNet channels (NCCL >= 2.20)"),
        C("nvls_channels", I32, "summary: NVLS channels (NCCL >= 2.17)"),
        C("p2p_channels", I32, "summary: p2p channels"),
        C("p2p_channels_per_peer", I32, "summary: p2p channels per peer"),
        C("ring_pxn", I32, "`Connected all rings, use ring PXN n GDR m`: PXN used for rings (NCCL >= 2.24)"),
        C("ring_gdr", I32, "same line: GDR used for rings"),
        C("detail", STR, "tree entry text, or what was connected (`all rings`, `all trees`, `NVLS tree`, ...)"),
        *_provenance(),
    ),
)

NCCL_TOPOLOGY = _table(
    "nccl_topology",
    "GRAPH-subsystem topology dumps: nodes and links of the system tree (`CPU/0 (1/1/2)`, `+ PCI[24.0] - GPU/AB000`),"
    " computed paths (`GPU/2A000 :GPU/AB000 (3/10.0/SYS) ...`), graph searches (`Pattern 4, crossNic 0, nChannels 1,"
    " bw a/b, type SYS/PIX, sameChannels 1`) and the channels they found (` 0 : GPU/0 GPU/1`).",
    (
        *_prefix(),
        C("kind", STR, "node | link | path | graph | graph_channel | system"),
        C("node", STR, "topology node (`GPU/2A000`, `CPU/0`, `NIC/3D000`, `NET/0`): the node itself, or the link/path source (null when the dump starts mid-tree)"),
        C("node_info", STR, "text in parentheses after a node (GPU: rank; CPU: arch/vendor/model; NET: asic/port/bw)"),
        C("peer", STR, "link or path destination node"),
        C("link_type", STR, "link type (LOC, NVL, PCI, SYS, NET, C2C) or path type (LOC, NVL, NVB, C2C, PIX, PXB, PXN, P2C, PHB, SYS, NET, DIS)"),
        C("bw_gbs", F64, "link or path bandwidth as printed", "GB/s"),
        C("hops", I32, "path length in links"),
        C("pattern", I32, "graph search pattern (NCCL_TOPO_PATTERN_*: 1 balanced tree, 2 split tree, 3 tree, 4 ring, 5 NVLS, 6 CollNet direct)"),
        C("cross_nic", I32, "graph: 1 when rings may enter and leave a node through different NICs"),
        C("n_channels", I32, "graph: channels found"),
        C("bw_intra_gbs", F64, "graph: intra-node bandwidth per channel", "GB/s"),
        C("bw_inter_gbs", F64, "graph: inter-node bandwidth per channel", "GB/s"),
        C("type_intra", STR, "graph: worst intra-node path type used (NVL, PIX, PXB, PHB, NODE, SYS, ...)"),
        C("type_inter", STR, "graph: worst GPU-NIC path type used"),
        C("same_channels", I32, "graph: 1 when every channel uses the same path"),
        C("graph_seq", I32, "0-based index of the graph search on this thread; graph_channel rows belong to the graph row with the same value"),
        C("channel", I32, "graph_channel: channel number"),
        C("detail", STR, "graph_channel: the channel's node sequence (`GPU/0 GPU/1`); system: the header text"),
        *_provenance(),
    ),
)

NCCL_AFFINITY = _table(
    "nccl_affinity",
    "CPU affinity NCCL set for its threads: `Setting affinity for GPU g to <mask>`.",
    (
        *_prefix(),
        C("gpu", I32, "GPU (CUDA device) the affinity is for"),
        C("mask", STR, "CPU mask as printed (comma-separated 32-bit hex words, most significant first)"),
        C("cpu_count", I32, "number of CPUs in the mask"),
        *_provenance(),
    ),
)

NCCL_ENV = _table(
    "nccl_env",
    "Environment echoes: `NCCL_X set by environment to V` (only variables NCCL reads and reports).",
    (
        *_prefix(),
        C("name", STR, "variable name (`NCCL_IB_HCA`, ...)"),
        C("value", STR, "value as printed (the trailing `.` of integer parameters removed)"),
        *_provenance(),
    ),
)

NCCL_INIT_TIMINGS = _table(
    "nccl_init_timings",
    "Communicator init timings: `Init timings: rank r nranks n total t (kernels .., bootstrap .., ...)` (2.22) and"
    " `Init timings - <func>: rank ... (kernels .., alloc .., ...)` (>= 2.23), and `Bootstrap timings total t (create"
    " .., send .., recv .., ring .., delay ..)` (>= 2.23). Phases not printed by a version are null.",
    (
        *_prefix(),
        C("comm_id", STR, "commId attributed from the thread's last `Init START`; null when not attributable"),
        C("kind", STR, "init | bootstrap"),
        C("init_func", STR, "init function named in the line (>= 2.23); null otherwise"),
        C("rank", I32, "rank in the communicator"),
        C("nranks", I32, "ranks in the communicator"),
        C("total_s", F64, "total init (or bootstrap) time", "s"),
        C("kernels_s", F64, "init: loading device kernels", "s"),
        C("alloc_s", F64, "init: allocations (>= 2.23)", "s"),
        C("bootstrap_s", F64, "init: bootstrap", "s"),
        C("allgathers_s", F64, "init: allgathers of peer info", "s"),
        C("topo_s", F64, "init: topology detection", "s"),
        C("graphs_s", F64, "init: graph search", "s"),
        C("connections_s", F64, "init: connection setup", "s"),
        C("rest_s", F64, "init: the rest", "s"),
        C("create_s", F64, "bootstrap: create", "s"),
        C("send_s", F64, "bootstrap: send", "s"),
        C("recv_s", F64, "bootstrap: recv", "s"),
        C("ring_s", F64, "bootstrap: ring", "s"),
        C("delay_s", F64, "bootstrap: delay", "s"),
        C("phases", STR, "the parenthesized phase list as printed (keeps phases of future versions)"),
        *_provenance(),
    ),
)

NCCL_COLLS = _table(
    "nccl_colls",
    "COLL-subsystem lines, one per enqueued operation:"
    " `AllReduce: opCount 139d sendbuff .. recvbuff .. count N datatype 7 op 0 root 0 comm 0x.. [nranks=128] stream 0x..`"
    " (format unchanged 2.4-2.30).",
    (
        *_prefix(),
        C("op", STR, "operation as printed: AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, Send, Recv, ..."),
        C("op_count", I64, "`opCount` (printed in hex): per-communicator sequence number of the operation"),
        C("sendbuff", STR, "send buffer pointer as printed (`(nil)` for none)"),
        C("recvbuff", STR, "receive buffer pointer as printed"),
        C("count", I64, "element count (AllGather: per-rank send count; ReduceScatter: per-rank recv count)"),
        C("datatype", I32, "ncclDataType_t value"),
        C("datatype_name", STR, "int8, uint8, int32, uint32, int64, uint64, float16, float32, float64, bfloat16, float8e4m3, float8e5m2"),
        C("bytes", I64, "count × element size (null for unknown datatypes)", "bytes"),
        C("redop", I32, "ncclRedOp_t value (`op`)"),
        C("redop_name", STR, "sum | prod | max | min | avg (>= 4: avg in NCCL >= 2.10; larger values are user-defined ops)"),
        C("root", I32, "`root` as printed: root rank for Broadcast/Reduce"),
        C("peer", I32, "peer rank of Send/Recv (printed in the `root` field); null for collectives"),
        C("comm_ptr", STR, "communicator pointer (→ nccl_comms.comm_ptr of the same host and pid)"),
        C("nranks", I32, "ranks in the communicator"),
        C("stream", STR, "CUDA stream pointer"),
        *_provenance(),
    ),
    distinct=("line_no", "op_count"),  # opCounts count up: a dictionary would hold every value
)

NCCL_WARNINGS = _table(
    "nccl_warnings",
    "`file.cc:line NCCL WARN message` lines and the error trace that follows them (`file.cc:line -> code`, one row"
    " per trace line with is_error_trace). IB completion errors are decoded into the ib_* columns.",
    (
        *_prefix(),
        C("level", STR, "WARN for warnings, INFO for error-trace lines"),
        C("is_error_trace", BOOL, "true for `file:line -> code` lines (the call chain an error travelled)"),
        C("src_file", STR, "NCCL (or plugin) source file that printed the warning / trace step"),
        C("src_line", I32, "source line"),
        C("func", STR, "function name printed by NCCL >= 2.30.7 (`file:line (func) NCCL WARN`)"),
        C("message", STR, "warning text (null for trace lines)"),
        C("return_code", I32, "error-trace return code (ncclResult_t)"),
        C("return_name", STR, "ncclSuccess, ncclUnhandledCudaError, ncclSystemError, ncclInternalError, ncclInvalidArgument, ncclInvalidUsage, ncclRemoteError, ncclInProgress"),
        C("thread_tag", STR, "thread named at the end of a trace line (`Proxy Thread`, `Progress Thread`, ...)"),
        C("ib_peer", STR, "IB completion error: peer address as printed (`10.0.0.1<port>`, `fe80::...%ib0<port>`)"),
        C("ib_status", I32, "IB completion error: ibv_wc_status value"),
        C("ib_status_name", STR, "IBV_WC_* name of ib_status (e.g. IBV_WC_RETRY_EXC_ERR for 12)"),
        C("ib_opcode", I32, "IB completion error: opcode"),
        C("ib_len", I64, "IB completion error: length", "bytes"),
        C("ib_vendor_err", I32, "IB completion error: vendor error"),
        C("ib_request", STR, "IB completion error: request type (Send, Recv, ...)"),
        C("ib_local_gid", STR, "IB completion error: local GID when printed"),
        C("ib_remote_gid", STR, "IB completion error: remote GID when printed"),
        C("ib_hca", STR, "IB completion error: HCA name when printed (>= 2.24)"),
        *_provenance(),
    ),
)

WATCHDOG_TIMEOUTS = _table(
    "watchdog_timeouts",
    "PyTorch ProcessGroupNCCL watchdog records, six known formats: the timed-out work"
    " (`WorkNCCL(OpType=.., TensorShape=..)`, `WorkNCCL(SeqNum=.., OpType=.., Timeout(ms)=..)`, the same with"
    " `NumelIn/NumelOut`) and the PG status lines (`Timeout at NCCL work: ..`, `Exception (either an error or"
    " timeout) detected by watchdog at work: ..`, `failure detected by watchdog at work sequence id: ..`), plus the"
    " teardown notices. Filter `record = 'timeout'` for one row per timed-out work; its PG and last"
    " enqueued/completed fields are filled from the rank's status line for the same work.",
    (
        C("host", STR, "always null today: watchdog lines carry no host name (place a rank through nccl_comms or ranks)"),
        C("pid", I64, "process id from a launcher wrapper (`(RayTrainWorker pid=.., ip=..)`); null otherwise"),
        C("ip", STR, "IP address from a Ray wrapper; null otherwise"),
        C("rank", I32, "rank in the `[Rank R]` / `[rankR]:` tags (global rank in the default PG)"),
        C("pg_id", STR, "process group id (`PG 5`, `PG ID 2`); null when the format has none"),
        C("pg_guid", STR, "process group GUID (`PG GUID 9`)"),
        C("pg_desc", STR, "process group description in parentheses (`default_pg`)"),
        C("record", STR, "timeout | status | teardown | flight_recorder | exception_site (`Exception raised from <fn> at <file:line>`)"),
        C("format", STR, "tensor_shape | seqnum | seqnum_numel (timeout); timeout_at_work | exception_at_work | failure_at_seq (status)"),
        C("seq", I64, "SeqNum of the work (status records: the work the watchdog stopped at)"),
        C("op_type", STR, "OpType as printed (ALLREDUCE, ALLGATHER, ALLTOALL, COALESCED, ...)"),
        C("numel_in", I64, "NumelIn: input elements"),
        C("numel_out", I64, "NumelOut: output elements"),
        C("tensor_shape", STR, "TensorShape as printed (oldest format)"),
        C("timeout_ms", I64, "Timeout(ms) of the work", "ms"),
        C("elapsed_ms", I64, "`ran for N milliseconds before timing out`", "ms"),
        C("last_enqueued", I64, "last enqueued work sequence number of the PG"),
        C("last_completed", I64, "last completed work sequence number of the PG (-1: none completed)"),
        C("log_time", STR, "glog timestamp as printed (`E318 07:39:53.792630246`: level, month-day, time); null when absent"),
        C("src", STR, "ProcessGroupNCCL source location of the glog line (`ProcessGroupNCCL.cpp:616`); for exception_site, where the exception was raised"),
        C("message", STR, "the record's text (from the `[PG ..]`/`[Rank ..]` tag on)"),
        *_provenance(),
    ),
)

NCCL_FACTS = _table(
    "nccl_facts",
    "Scalar facts printed once per process or run, as key/value rows: nccl_version, cuda_version (the +cudaA.B"
    " NCCL was built with), cuda_driver_version,"
    " threads_per_block, thread_thresholds, p2p_chunksize, nvls_multicast_support, p2p_plugin, plugin_path,"
    " comm_config.<field>, nvls_comm, sharp_rank, mnnvl, ras_socket, nccltests.avg_busbw_gbs,"
    " nccltests.out_of_bounds; plus one file-level `version_range` row (no line of its own: line_no null) giving"
    " the NCCL versions consistent with the file's line formats.",
    (
        *_prefix(),
        C("key", STR, "what the fact is (see the table doc)"),
        C("value", STR, "value as text (numbers as printed; booleans as true/false)"),
        C("message", STR, "the message text the fact came from"),
        *_provenance(),
    ),
)

NCCL_TESTS_RANKS = _table(
    "nccl_tests_ranks",
    "nccl-tests device table: `#  Rank  1 Group  0 Pid 2966865 on host device  1 [0x00] NVIDIA H100 80GB HBM3`"
    " (global rank → host, pid, GPU).",
    (
        C("rank", I32, "global rank"),
        C("group", I32, "thread group (`Group`, absent in old nccl-tests)"),
        C("pid", I64, "process id of the nccl-tests process driving the GPU"),
        C("host", STR, "host name as nccl-tests prints it"),
        C("device", I32, "CUDA device index"),
        C("bus", STR, "PCI bus of the GPU as printed (`0x1b`)"),
        C("gpu_name", STR, "GPU model name as printed"),
        *_provenance(),
    ),
)

NCCL_TESTS_RESULTS = _table(
    "nccl_tests_results",
    "nccl-tests result rows (`size count type redop root time algbw busbw #wrong time algbw busbw #wrong`):"
    " out-of-place then in-place measurements for one message size.",
    (
        C("size_bytes", I64, "message size", "bytes"),
        C("count", I64, "elements per rank"),
        C("type", STR, "data type (float, half, ...)"),
        C("redop", STR, "reduction (sum, ...; `none` for non-reductions)"),
        C("root", I32, "root rank (-1 when not applicable)"),
        C("oop_time_us", F64, "out-of-place time", "µs"),
        C("oop_algbw_gbs", F64, "out-of-place algorithm bandwidth", "GB/s"),
        C("oop_busbw_gbs", F64, "out-of-place bus bandwidth", "GB/s"),
        C("oop_wrong", I64, "out-of-place wrong results (null for N/A)"),
        C("ip_time_us", F64, "in-place time", "µs"),
        C("ip_algbw_gbs", F64, "in-place algorithm bandwidth", "GB/s"),
        C("ip_busbw_gbs", F64, "in-place bus bandwidth", "GB/s"),
        C("ip_wrong", I64, "in-place wrong results (null for N/A)"),
        *_provenance(),
    ),
)

#: every table the NCCL log parser writes, in the order it writes them
NCCL_TABLES = (NCCL_COMMS, NCCL_NET, NCCL_CONNECTIONS, NCCL_CHANNELS, NCCL_TOPOLOGY, NCCL_AFFINITY, NCCL_ENV,
               NCCL_INIT_TIMINGS, NCCL_COLLS, NCCL_WARNINGS, WATCHDOG_TIMEOUTS, NCCL_FACTS, NCCL_TESTS_RANKS,
               NCCL_TESTS_RESULTS)

register(*NCCL_TABLES)
