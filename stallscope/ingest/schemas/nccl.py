"""NCCL debug-log formats: line prefix, message patterns, enums and version fingerprints.

Everything the NCCL log parser knows about the text NCCL prints lives here, so that a new NCCL
release means editing this file only. Message patterns match the text *after* the standard prefix
``host:pid:tid [cudaDev] NCCL INFO `` (or ``... file.cc:line NCCL WARN ``).

Version fingerprints
--------------------
NCCL prints its exact version (``NCCL version 2.19.3+cuda12.3``) once per process, often only on
rank 0 or only in stdout. When it is missing, the *format* of other lines narrows the version:
each fingerprint below is a line format that exists in a contiguous range of NCCL releases. The
ranges were read off the format strings in the NVIDIA/nccl release tags v2.4.2-1 ... v2.30.7-1 (the
first and last tag whose source prints that exact format). A file's range is the intersection of
the ranges of every fingerprint it shows; an empty intersection (mixed versions) or no fingerprint
gives ``None`` — the parser never guesses an exact version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# -- line prefix -----------------------------------------------------------------------------

#: the standard prefix, found anywhere in a line (launchers prepend ``[1,0]<stdout>:``, ``[155] ``,
#: ``(RayTrainWorker pid=.., ip=..) ``, srun labels, timestamps, ``> `` ...). Group ``src`` is the
#: ``file.cc:line`` of WARN lines (and of TRACE lines, which are ignored).
PREFIX_RE = re.compile(
    r"(?:(?P<host>[^\s:\[\]()<>]+):(?P<pid>\d+):(?P<tid>\d+) )?"
    r"(?:\[(?P<dev>-?\d+)\] )?"
    r"(?:(?P<src>[^\s:\[\]]+):(?P<sline>\d+)(?: \((?P<func>[^)]*)\))? )?"
    r"NCCL (?P<level>INFO|WARN|TRACE|CALL)(?: |$)"
)
#: a WARN line's text after ``host:pid:tid [dev] ``: PREFIX_RE's ``src``, ``sline`` and ``func`` groups and the level
WARN_HEAD_RE = re.compile(r"(?P<src>[^\s:\[\]]+):(?P<sline>\d+)(?: \((?P<func>[^)]*)\))? NCCL WARN(?: |$)")
#: where the level word starts; PREFIX_RE is then run on the short text before it (cheap)
LEVEL_RE = re.compile(r"NCCL (?:INFO|WARN|TRACE|CALL)(?: |$)")

#: launcher wrappers at the start of a line whose NCCL prefix was stripped (bare messages)
WRAPPER_RE = re.compile(
    r"^(?:\s*(?:\([^()]*\)|\[\d+,\d+\]<std(?:out|err)>:|\[[^\]]*\]:?|\d+:|>|\|))*\s*"
)
RAY_WRAPPER_RE = re.compile(r"\((?P<actor>\w+) pid=(?P<pid>\d+)(?:, ip=(?P<ip>[0-9a-fA-F.:]+))?\)")

# -- connections -----------------------------------------------------------------------------

CONN_RE = re.compile(
    r"(?P<kw>Ring|Channel) (?P<ch>\d+)(?:/(?P<ci>\d+))? : (?P<src>-?\d+)(?:\[(?P<sdev>[0-9a-fA-F]*)\])?"
    r" -> (?P<dst>-?\d+)(?:\[(?P<ddev>[0-9a-fA-F]*)\])?(?: \[(?P<dir>send|receive)\])? via (?P<via>.*?)\s*$"
)
COLLNET_RE = re.compile(
    r"(?P<kw>CollNet|Coll) (?P<ch>\d+)(?:/(?P<ci>\d+))? : (?P<rank>-?\d+) \[(?P<dir>send|receive)\] via (?P<via>.*?)\s*$"
)
NET_VIA_RE = re.compile(r"(?P<t>NET|COLLNET)/(?P<net>[^/()\s]+)/(?P<dev>-?\d+)(?:\((?P<proxy>-?\d+)\))?(?P<rest>.*)$")
INDIRECT_RE = re.compile(r"indirect/(?P<rank>-?\d+)")

# -- rings, trees, channels ------------------------------------------------------------------

RING_LIST_RE = re.compile(r"Channel (?P<ch>\d+)/(?P<n>\d+) :(?P<ranks>(?:\s+-?\d+)*)\s*$")
GRAPH_RING_RE = re.compile(r"Ring (\d+) : (-?\d+) -> (-?\d+) -> (-?\d+)\s*$")
GRAPH_TREE_RE = re.compile(r"Tree (\d+) : (-?\d+) -> (-?\d+) -> (-?\d+)/(-?\d+)/(-?\d+)\s*$")
TREE_ENTRY_RE = re.compile(r"\[(\d+)\] (\S+)")
CHANNELS_SUMMARY_RE = re.compile(
    r"(?P<coll>\d+) coll channels, (?:(?P<collnet>\d+) collnet channels, )?(?:(?P<nvls>\d+) nvls channels, )?"
    r"(?P<p2p>\d+) p2p channels, (?P<pp>\d+) p2p channels per peer"
)
CONNECTED_RE = re.compile(r"Connected (?P<what>.*?)(?:, use ring PXN (?P<pxn>\d+) GDR (?P<gdr>\d+))?\s*$")

# -- communicators ---------------------------------------------------------------------------

#: ``[[Rank r] ][func ]comm 0x.. name value name value ... - Init START`` (fields parsed as pairs)
COMM_EVENT_RE = re.compile(
    r"(?:\[Rank (?P<rk>-?\d+)\] )?(?:(?P<func>nccl\w+) )?comm (?P<ptr>\S+) (?P<pairs>.*?)\s*-\s*"
    r"(?P<ev>Init START|Init COMPLETE|Destroy COMPLETE|Abort COMPLETE)\s*$"
)
COMM_TOPO_RE = re.compile(
    r"comm (?P<ptr>\S+) rank (?P<rank>-?\d+) nRanks (?P<n>\d+) nNodes (?P<nn>\d+) localRanks (?P<lr>\d+) localRank (?P<l>-?\d+)"
)
SPLIT_RE = re.compile(
    r"bootstrapSplit: (?:comm (?P<ptr>\S+) parent (?P<parent>\S+) )?rank (?P<rank>-?\d+) nranks (?P<n>\d+)"
    r" color (?P<color>-?\d+) key (?P<key>-?\d+)"
)
INIT_TIMINGS_RE = re.compile(
    r"Init timings(?: - (?P<func>\w+))?: rank (?P<rank>-?\d+) nranks (?P<n>\d+) total (?P<total>(?:\d+(?:\.\d*)?|\.\d+)) \((?P<ph>[^)]*)\)"
)
BOOTSTRAP_TIMINGS_RE = re.compile(r"Bootstrap timings total (?P<total>(?:\d+(?:\.\d*)?|\.\d+)) \((?P<ph>[^)]*)\)")
#: a phase and its time. In this module, decimals are spelled so that only numbers float() reads
#: match (``[\d.]+`` took "." and "-." from mangled lines: "topo -.-0" is no time)
PHASE_RE = re.compile(r"(\w+) (-?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?)")
INIT_PHASES = ("kernels", "alloc", "bootstrap", "allgathers", "topo", "graphs", "connections", "rest")
BOOTSTRAP_PHASES = ("create", "send", "recv", "ring", "delay")

# -- network ---------------------------------------------------------------------------------

IB_USING_RE = re.compile(
    r"NET/(?P<net>\w+) ?: Using(?P<devs>[^;]*?)\s*(?P<ro>\[RO\])?\s*;\s*OOB (?P<oob>\S+)"
)
IB_DEV_RE = re.compile(
    r"\[(?P<i>\d+)\](?P<name>[^\s:\[\]]+):(?P<port>\d+)(?P<extra>(?::\d*)*)/(?P<link>[A-Za-z]+)(?P<feat>(?:/[^\s\[]+)?)"
)
#: ``[0]eth0:10.0.0.1<0>`` or ``eth0:10.0.0.1<0>`` (Socket, Bootstrap, OOB interfaces)
IF_RE = re.compile(r"(?:\[(?P<i>\d+)\])?(?P<name>[^\s:\[\]<>]+):(?P<addr>\S+?)<(?P<port>\d+)>")
USING_NETWORK_RE = re.compile(r"Using network (?P<net>\S+)")
GDR_HCA_RE = re.compile(r"NET/(?P<net>\S+?) ?: GPU Direct RDMA (?P<st>Enabled|Disabled) for HCA (?P<i>\d+) '(?P<name>[^']*)'")
GDR_GPU_RE = re.compile(r"GPU Direct RDMA (?P<st>Enabled|Disabled) for GPU (?P<bus>[0-9a-fA-F]+) / HCA (?P<i>\d+)")
PLUGIN_LOADED_RE = re.compile(r"NET/Plugin ?: Loaded (?P<kind>net|collnet|coll) plugin (?P<name>.+?)\s*$")

# -- facts, env, affinity --------------------------------------------------------------------

VERSION_RE = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+)(?P<suffix>[^+\s]*)(?:\+cuda(?P<cuda>\d+\.\d+))?")
ENV_RE = re.compile(r"(?P<name>[A-Z][A-Z0-9_]*) set by environment to (?P<val>.*?)\s*$")
AFFINITY_RE = re.compile(r"Setting affinity for GPU (?P<gpu>-?\d+) to (?P<mask>[0-9a-fA-F,]+)")
FACT_RES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("cuda_driver_version", re.compile(r"cudaDriverVersion (?P<v>\d+)")),
    ("threads_per_block", re.compile(r"Threads per block : (?P<v>\S+)")),
    ("thread_thresholds", re.compile(r"threadThresholds (?P<v>.+?)\s*$")),
    ("p2p_chunksize", re.compile(r"P2P Chunksize set to (?P<v>\d+)")),
    ("nvls_multicast_support", re.compile(r"NVLS multicast support is (?P<v>not )?available on dev (?P<dev>\d+)")),
    ("p2p_plugin", re.compile(r"P2P plugin (?P<v>\S+)")),
    ("sharp_rank", re.compile(r"SHARP rank (?P<v>\d+/\d+) initialized on (?P<hca>\S+)")),
    ("nvls_comm", re.compile(r"NVLS comm (?P<v>\S+) headRank")),
    ("mnnvl", re.compile(r"MNNVL busId (?P<v>.+?)\s*$")),
    ("ras_socket", re.compile(r"RAS client listening socket at (?P<v>\S+)")),
    ("plugin_path", re.compile(r"Plugin Path : (?P<v>\S+)")),
)
COMM_CONFIG_RE = re.compile(r"Comm config (?P<field>\w+) set to (?P<v>.+?)\s*$")

# -- COLL, warnings, error traces ------------------------------------------------------------

COLL_RE = re.compile(
    r"(?P<op>\w+): opCount (?P<oc>[0-9a-fA-F]+) sendbuff (?P<sb>\S+) recvbuff (?P<rb>\S+) count (?P<cnt>\d+)"
    r" datatype (?P<dt>-?\d+) op (?P<redop>-?\d+) root (?P<root>-?\d+) comm (?P<comm>\S+)"
    r"(?: \[nranks=(?P<nr>\d+)\])?(?: stream (?P<stream>\S+))?"
)
TRACE_RE = re.compile(
    r"(?P<f>[\w./+-]+\.(?:cc|c|h|cu|cpp|hpp|hh|cxx|cuh)):(?P<l>\d+) -> (?P<rc>-?\d+)(?: \[(?P<tag>[^\]]*)\])?\s*$"
)
IB_COMPLETION_RES = (
    # <= 2.19: "with error 4, opcode 32564, len 32564, vendor err 81 (Send)"
    re.compile(r"Got completion from peer (?P<peer>\S+) with error (?P<st>\d+), opcode (?P<op>\d+), len (?P<len>\d+),"
               r" vendor err (?P<ve>\d+)(?: \((?P<req>[^)]*)\))?"),
    # 2.20-2.28: "with status=12 opcode=0 len=0 vendor err 129 (Recv)"
    re.compile(r"Got completion from peer (?P<peer>\S+) with status=(?P<st>\d+) opcode=(?P<op>\d+) len=(?P<len>\d+)"
               r" vendor err (?P<ve>\d+)(?: \((?P<req>[^)]*)\))?"),
    # >= 2.29: "with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129"
    re.compile(r"Got completion from peer (?P<peer>\S+) with status=\w+\((?P<st>\d+)\) opcode=\w+\((?P<op>\d+)\)"
               r" vendor_err=(?P<ve>\d+)"),
)
IB_LOCAL_GID_RE = re.compile(r"localGid (?P<g>[0-9a-fA-F:.]+)")
IB_REMOTE_GID_RE = re.compile(r"remoteGids? ?(?P<g>[0-9a-fA-F:.]+)")
IB_HCA_RE = re.compile(r" hca (?P<h>\S+)")

# -- topology (GRAPH subsystem) --------------------------------------------------------------

_NODE = r"(?:CPU|GPU|NIC|NET|PCI|NVS|C2C|GIN)/[0-9A-Fa-f-]+"
TOPO_LINK_RE = re.compile(
    r"(?P<ind> *)\+ (?P<type>\w+)\[(?P<bw>(?:\d+(?:\.\d*)?|\.\d+))\] - (?P<node>" + _NODE + r")(?: \((?P<info>[^)]*)\))?\s*$"
)
TOPO_NODE_RE = re.compile(r"(?P<ind> *)(?P<node>" + _NODE + r")(?: \((?P<info>[^)]*)\))?\s*$")
TOPO_PATH_RE = re.compile(r"(?P<node>" + _NODE + r") :(?P<rest>.*)$")
TOPO_PATH_ENTRY_RE = re.compile(r"(?P<node>" + _NODE + r") \((?P<hops>\d+)/(?P<bw>(?:\d+(?:\.\d*)?|\.\d+))/(?P<type>\w+)\)")
PATTERN_RE = re.compile(
    r"Pattern (?P<p>\d+), crossNic (?P<cn>\d+), nChannels (?P<nc>\d+), bw (?P<bi>(?:\d+(?:\.\d*)?|\.\d+))/(?P<be>(?:\d+(?:\.\d*)?|\.\d+)),"
    r" type (?P<ti>\w+)/(?P<te>\w+), sameChannels (?P<sc>\d+)"
)
GRAPH_CHANNEL_RE = re.compile(r" *(?P<ch>\d+) : (?P<path>.+?)\s*$")

# -- nccl-tests output -----------------------------------------------------------------------

NCCLTESTS_RANK_RE = re.compile(
    r"#\s+Rank\s+(?P<rank>\d+)(?:\s+Group\s+(?P<group>\d+))?\s+Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)\s+device\s+(?P<dev>\d+)"
    r"\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*?)\s*$"
)
NCCLTESTS_HEADER_RE = re.compile(r"#\s+size\s+count\s+type\s+redop")
NCCLTESTS_ROW_RE = re.compile(
    r"\s*(?P<size>\d+)\s+(?P<count>\d+)\s+(?P<type>\w+)\s+(?P<redop>\w+)\s+(?P<root>-?\d+)"
    r"\s+(?P<t1>(?:\d+(?:\.\d*)?|\.\d+))\s+(?P<a1>(?:\d+(?:\.\d*)?|\.\d+))\s+(?P<b1>(?:\d+(?:\.\d*)?|\.\d+))\s+(?P<w1>\S+)"
    r"\s+(?P<t2>(?:\d+(?:\.\d*)?|\.\d+))\s+(?P<a2>(?:\d+(?:\.\d*)?|\.\d+))\s+(?P<b2>(?:\d+(?:\.\d*)?|\.\d+))\s+(?P<w2>\S+)\s*$"
)
NCCLTESTS_AVG_RE = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(?P<v>(?:\d+(?:\.\d*)?|\.\d+))")
NCCLTESTS_OOB_RE = re.compile(r"#\s*Out of bounds values\s*:\s*(?P<v>.+?)\s*$")

# -- NCCL enums ------------------------------------------------------------------------------

#: ncclDataType_t -> (name, bytes per element)
DATATYPES: dict[int, tuple[str, int]] = {
    0: ("int8", 1), 1: ("uint8", 1), 2: ("int32", 4), 3: ("uint32", 4), 4: ("int64", 8), 5: ("uint64", 8),
    6: ("float16", 2), 7: ("float32", 4), 8: ("float64", 8), 9: ("bfloat16", 2), 10: ("float8e4m3", 1),
    11: ("float8e5m2", 1),
}
#: ncclRedOp_t built-ins (larger values are ops created with ncclRedOpCreatePreMulSum)
REDOPS = {0: "sum", 1: "prod", 2: "max", 3: "min", 4: "avg"}
#: ncclResult_t
RESULTS = {0: "ncclSuccess", 1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
           4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError", 7: "ncclInProgress"}
#: enum ibv_wc_status (libibverbs)
IBV_WC_STATUS = {
    0: "IBV_WC_SUCCESS", 1: "IBV_WC_LOC_LEN_ERR", 2: "IBV_WC_LOC_QP_OP_ERR", 3: "IBV_WC_LOC_EEC_OP_ERR",
    4: "IBV_WC_LOC_PROT_ERR", 5: "IBV_WC_WR_FLUSH_ERR", 6: "IBV_WC_MW_BIND_ERR", 7: "IBV_WC_BAD_RESP_ERR",
    8: "IBV_WC_LOC_ACCESS_ERR", 9: "IBV_WC_REM_INV_REQ_ERR", 10: "IBV_WC_REM_ACCESS_ERR", 11: "IBV_WC_REM_OP_ERR",
    12: "IBV_WC_RETRY_EXC_ERR", 13: "IBV_WC_RNR_RETRY_EXC_ERR", 14: "IBV_WC_LOC_RDD_VIOL_ERR",
    15: "IBV_WC_REM_INV_RD_REQ_ERR", 16: "IBV_WC_REM_ABORT_ERR", 17: "IBV_WC_INV_EECN_ERR",
    18: "IBV_WC_INV_EEC_STATE_ERR", 19: "IBV_WC_FATAL_ERR", 20: "IBV_WC_RESP_TIMEOUT_ERR", 21: "IBV_WC_GENERAL_ERR",
}
#: source files of NCCL core whose WARN wording is a version fingerprint (plugins print their own)
CORE_IB_SOURCES = ("transport/net_ib.cc", "net_ib/", "transport/net_ib/")

#: INFO messages NCCL prints that the parser recognizes but does not tabulate (not "unknown")
IGNORED_PREFIXES = (
    "NET/Plugin", "PROFILER/Plugin", "TUNER/Plugin", "ENV/Plugin", "GIN/Plugin", "Using non-device net plugin",
    "Using internal network plugin", "Using NCCL_NET_DEVICE_UNPACK", "Failed to find nccl", "Could not enable P2P",
    "Assigned NET plugin", "Initialized NET plugin", "Loaded ", "RAS ", "CC Off", "CC On", "NVLS ", "ncclCommInitRank",
    "init.cc", "Allocated", "MMAP allocated", "CUMEM allocated", "Enabled NCCL Func/Proto/Algo", "Symmetric",
    "nvmlInit", "Channel ",
)

# -- version fingerprints --------------------------------------------------------------------

NEWEST_KNOWN = (2, 30, 7)


@dataclass(frozen=True)
class Fingerprint:
    """A line format that exists from NCCL ``lo`` to ``hi`` (inclusive; ``None``: still printed in NEWEST_KNOWN)."""

    lo: tuple[int, int, int]
    hi: tuple[int, int, int] | None
    what: str


def _v(s: str) -> tuple[int, int, int]:
    a, b, c = s.split(".")
    return int(a), int(b), int(c)


FINGERPRINTS: dict[str, Fingerprint] = {k: Fingerprint(_v(lo), _v(hi) if hi else None, what) for k, (lo, hi, what) in {
    "conn_ring_busid": ("2.5.6", "2.6.4", "`Ring NN : r[busId] -> r[busId] via ...` connection lines"),
    "conn_ring": ("2.4.2", "2.6.4", "`Ring NN : ... via ...` connection lines (renamed Channel in 2.7)"),
    "net_ring_nobracket": ("2.4.2", "2.4.8", "NET connection without device brackets"),
    "net_channel_noci": ("2.7.3", "2.11.4", "NET connection `Channel NN :` without /connIndex"),
    "net_channel_ci_busid": ("2.12.7", "2.18.1", "NET connection `Channel NN/C` with busId brackets"),
    "net_channel_ci_dev": ("2.18.3", None, "NET connection `Channel NN/C` with nvmlDev brackets"),
    "p2p_channel_noci": ("2.7.3", "2.13.4", "P2P connection `Channel NN :` without /connIndex"),
    "p2p_channel_ci_busid": ("2.14.3", "2.18.1", "P2P connection `Channel NN/C` with busId brackets"),
    "p2p_channel_ci_dev": ("2.18.3", None, "P2P connection `Channel NN/C` with nvmlDev brackets"),
    "shm_channel_busid": ("2.7.3", "2.18.1", "SHM connection `Channel NN :` with busId brackets"),
    "shm_channel_dev": ("2.18.3", None, "SHM connection `Channel NN :` with nvmlDev brackets"),
    "shm_direct_shared_memory": ("2.4.2", "2.12.12", "SHM spelled `via direct shared memory`"),
    "shm_two_modes": ("2.13.4", "2.30.4", "SHM spelled `via SHM/<send>/<recv>`"),
    "shm_one_mode": ("2.30.7", None, "SHM spelled `via SHM/direct`"),
    "p2p_cumem": ("2.18.1", None, "`P2P/CUMEM`"),
    "p2p_mnnvl": ("2.20.3", None, "`P2P/MNNVL`"),
    "p2p_read": ("2.7.3", None, "`/read` P2P mode"),
    "p2p_indirect": ("2.8.3", None, "`P2P/indirect`"),
    "net_shared": ("2.8.3", None, "`/Shared` NET buffers"),
    "net_gdr_pci": ("2.26.2", None, "`/GDRDMA(PCI)`"),
    "net_pxn": ("2.12.7", None, "PXN proxy rank `NET/IB/0(5)`"),
    "collnet_coll": ("2.6.4", "2.8.4", "`Coll NN : r [send] via COLLNET`"),
    "collnet_noci": ("2.9.6", "2.13.4", "`CollNet NN : r [send] via COLLNET`"),
    "collnet_ci": ("2.14.3", None, "`CollNet NN/C : r [send] via COLLNET`"),
    "using_network": ("2.6.4", None, "`Using network X`"),
    "non_device_net_plugin": ("2.19.1", "2.21.5", "`Using non-device net plugin version N`"),
    "internal_network_plugin": ("2.21.5", "2.25.1", "`Using internal network plugin`"),
    "init_start_nofunc": ("2.18.3", "2.20.5", "`comm .. commId .. - Init START` without the API name"),
    "init_start_func": ("2.21.5", "2.28.9", "`ncclCommInitRank comm .. - Init START` (API name, no [Rank])"),
    "init_func_other": ("2.23.4", None, "Init START/COMPLETE naming an API other than ncclCommInitRank/ncclCommSplit"),
    "init_start_rank_tag": ("2.29.2", None, "`[Rank N] <api> comm .. - Init START`"),
    "init_complete_nvml_nobusid": ("2.4.2", "2.4.8", "`cudaDev d nvmlDev n - Init COMPLETE`"),
    "init_complete_busid": ("2.5.6", "2.15.5", "`cudaDev d busId b - Init COMPLETE` (no commId)"),
    "init_complete_commid_nonvml": ("2.16.2", "2.18.1", "`cudaDev d busId b commId c - Init COMPLETE`"),
    "init_complete_nofunc": ("2.18.3", "2.20.5", "`comm .. nvmlDev .. commId .. - Init COMPLETE` without the API name"),
    "init_complete_func": ("2.21.5", None, "`<api> comm .. - Init COMPLETE`"),
    "init_timings_v22": ("2.22.3", "2.22.3", "`Init timings: rank ..` (no API name, no alloc)"),
    "init_timings_func": ("2.23.4", None, "`Init timings - <api>: rank ..`"),
    "bootstrap_timings": ("2.23.4", None, "`Bootstrap timings total ..`"),
    "connected_rings_plain": ("2.8.3", "2.23.4", "`Connected all rings` alone"),
    "connected_rings_pxn": ("2.24.3", None, "`Connected all rings, use ring PXN n GDR m`"),
    "channels_summary_v7": ("2.7.3", "2.16.5", "`N coll channels, N p2p channels, N p2p channels per peer`"),
    "channels_summary_v17": ("2.17.1", "2.19.4", "`N coll channels, N nvls channels, N p2p channels, ..`"),
    "channels_summary_v20": ("2.20.3", None, "`N coll channels, N collnet channels, N nvls channels, ..`"),
    "threads_per_block": ("2.5.6", "2.5.7", "`Threads per block : a/b/c`"),
    "trees_pipe": ("2.5.6", "2.7.8", "`Trees [c] a/b/c->r->u|u->r->a/b/c` (two trees per channel)"),
    "cuda_driver_version": ("2.13.4", None, "`cudaDriverVersion N`"),
    "ib_relaxed_ordering": ("2.12.7", None, "`[RO]` in `NET/IB : Using`"),
    "ib_completion_comma": ("2.10.3", "2.19.4", "core `Got completion from peer .. with error N, opcode ..`"),
    "ib_completion_status_eq": ("2.20.3", "2.28.9", "core `Got completion from peer .. with status=N opcode=N ..`"),
    "ib_completion_status_named": ("2.29.2", None, "core `.. with status=NAME(N) opcode=NAME(N) vendor_err=N`"),
    "p2p_chunksize": ("2.16.2", None, "`P2P Chunksize set to N`"),
    "mnnvl_busid": ("2.20.3", None, "`MNNVL busId ..`"),
    "ras_client": ("2.24.3", None, "`RAS client listening socket at ..`"),
    "profiler_plugin_not_found": ("2.23.4", "2.25.1", "`PROFILER/Plugin: Could not find ..`"),
    "tuner_plugin": ("2.21.5", None, "`TUNER/Plugin ..`"),
    "graph_pattern": ("2.14.3", None, "`Pattern p, crossNic c, nChannels n, bw a/b, type X/Y, sameChannels s`"),
    "bootstrap_split_comm": ("2.20.3", None, "`bootstrapSplit: comm .. parent .. rank ..`"),
    "comm_nnodes": ("2.20.3", None, "`comm .. rank r nRanks n nNodes m localRanks l localRank k MNNVL x`"),
    "nvls_multicast": ("2.17.1", None, "`NVLS multicast support is [not ]available on dev N`"),
    "affinity": ("2.4.2", "2.27.7", "`Setting affinity for GPU g to mask`"),
    "warn_func": ("2.30.7", None, "`file:line (func) NCCL WARN`"),
    "comm_config": ("2.17.1", None, "`Comm config <field> set to ..`"),
    "nvls_tree": ("2.18.1", None, "`Connected NVLS tree`"),
}.items()}


def version_tuple(s: str) -> tuple[int, int, int] | None:
    """``"2.19.3"`` -> (2, 19, 3); None when not a version."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", s)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def version_range(names: set[str] | frozenset[str]) -> str | None:
    """The NCCL versions consistent with every fingerprint in ``names``, as text.

    >>> version_range({"net_channel_noci", "p2p_read", "using_network"})
    '2.7.3-2.11.x'
    >>> version_range({"connected_rings_pxn", "init_timings_func"})
    '2.24.3+'
    >>> version_range({"init_timings_v22"})
    '2.22.3-2.22.x'
    >>> version_range({"threads_per_block", "affinity", "net_channel_ci_dev"}) is None  # contradictory
    True
    """
    fps = [FINGERPRINTS[n] for n in names if n in FINGERPRINTS]
    if not fps:
        return None
    lo = max(f.lo for f in fps)
    his = [f.hi for f in fps if f.hi is not None]
    hi = min(his) if his else None
    if hi is not None and hi < lo:
        return None
    if hi is None:
        return f"{lo[0]}.{lo[1]}.{lo[2]}+"
    return f"{lo[0]}.{lo[1]}.{lo[2]}-{hi[0]}.{hi[1]}.x"
