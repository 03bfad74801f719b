"""Kineto (PyTorch profiler) trace format: the raw fields we read and what they mean.

Kineto writes a Chrome-trace JSON object ``{"schemaVersion", "deviceProperties",
"distributedInfo", ..., "traceEvents": [...], "traceName", "baseTimeNanoseconds"}``. Events are
``ph: X`` complete events with ``ts``/``dur`` in microseconds (integers in older releases, floats
with ns resolution in newer ones), ``ph: M`` metadata, ``ph: s/f`` flows and ``ph: i`` instants.
Pids/tids are usually integers but may be strings (``"Spans"``, ``"Traces"``).

Two decoders share these definitions: a strict typed one (fast path, C-speed via msgspec) and a
lenient one that accepts any JSON types (used for a chunk only when the strict one rejects it).
"""

from __future__ import annotations

import re
from typing import Any, Union

import msgspec

#: raw ``args`` keys -> attribute names of :class:`KArgs`
ARG_FIELDS: dict[str, str] = {
    "External id": "external_id",
    "correlation": "correlation",
    "stream": "stream",
    "device": "device",
    "Collective name": "collective_name",
    "In msg nelems": "in_nelems",
    "Out msg nelems": "out_nelems",
    "Group size": "group_size",
    "dtype": "dtype",
    "Process Group Name": "pg_name",
    "Process Group Description": "pg_desc",
    "Process Group Ranks": "pg_ranks",
    "Seq": "seq",
    "Rank": "rank",
    "Src Rank": "src_rank",
    "Dst Rank": "dst_rank",
    "Input Dims": "input_dims",
    "Input type": "input_type",
    "name": "name",
    "labels": "labels",
}


class KArgs(msgspec.Struct, frozen=True, gc=False):
    """The subset of an event's ``args`` that ingest normalizes (strict types)."""

    external_id: int | None = msgspec.field(name="External id", default=None)
    correlation: int | None = None
    stream: int | None = None
    device: int | None = None
    collective_name: str | None = msgspec.field(name="Collective name", default=None)
    in_nelems: int | None = msgspec.field(name="In msg nelems", default=None)
    out_nelems: int | None = msgspec.field(name="Out msg nelems", default=None)
    group_size: int | None = msgspec.field(name="Group size", default=None)
    dtype: str | None = None
    pg_name: str | None = msgspec.field(name="Process Group Name", default=None)
    pg_desc: str | None = msgspec.field(name="Process Group Description", default=None)
    pg_ranks: msgspec.Raw = msgspec.field(name="Process Group Ranks", default=msgspec.Raw(b""))
    seq: int | None = msgspec.field(name="Seq", default=None)
    rank: int | None = msgspec.field(name="Rank", default=None)
    src_rank: int | None = msgspec.field(name="Src Rank", default=None)
    dst_rank: int | None = msgspec.field(name="Dst Rank", default=None)
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=msgspec.Raw(b""))
    input_type: msgspec.Raw = msgspec.field(name="Input type", default=msgspec.Raw(b""))
    #: metadata events (``ph: "M"``): the process or thread name, the process labels
    name: str | None = None
    labels: str | None = None


#: shared "no args" value (events without ``args`` or whose ``args`` are empty)
NO_ARGS = KArgs()


class KEvent(msgspec.Struct, tag_field="ph", tag="X", gc=False):
    """A complete event (``ph: "X"``; strict types). Unknown keys are skipped by the decoder."""

    cat: str | None = None
    name: str = ""
    pid: int | str = ""
    tid: int | str = ""
    ts: float = 0.0
    dur: float = 0.0
    args: KArgs = NO_ARGS


class MEvent(KEvent, tag="M"):
    """A metadata event (``ph: "M"``): process and thread names, process labels."""


#: every other phase of the Chrome trace event format (begin/end, instants, counters, async,
#: flows, objects, samples, marks, clock sync, contexts). Ingest keeps none of them, so each is
#: decoded to an empty struct: the decoder skips their fields instead of building values (flow
#: events are a third of a Kineto trace). An event whose ``ph`` is none of these (or missing)
#: sends its chunk to the lenient decoder, which drops it.
OTHER_PHASES = ("B", "E", "i", "I", "C", "b", "n", "e", "S", "T", "p", "F", "s", "t", "f",
                "P", "O", "N", "D", "V", "v", "R", "c", "(", ")")
_OTHER_EVENTS = tuple(msgspec.defstruct(f"Phase{ord(p):02X}Event", [], tag_field="ph", tag=p, gc=False)
                      for p in OTHER_PHASES)


class LEvent(msgspec.Struct, gc=False):
    """One trace event with any JSON types (lenient fallback)."""

    ph: Any = ""
    cat: Any = None
    name: Any = ""
    pid: Any = ""
    tid: Any = ""
    ts: Any = 0.0
    dur: Any = 0.0
    args: Any = None


STRICT_EVENTS = msgspec.json.Decoder(list[Union[(KEvent, MEvent, *_OTHER_EVENTS)]])  # noqa: UP007
LENIENT_EVENTS = msgspec.json.Decoder(list[LEvent])

#: categories of GPU activities, and their ``kernels.kind``
GPU_ACTIVITY_KIND: dict[str, str] = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
#: categories of host-side runtime calls that launch GPU work (CUDA and ROCm spellings)
RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver", "runtime"})
#: prefixes of NCCL / RCCL communication kernels: ``ncclKernel_*`` (NCCL < 2.19) and
#: ``ncclDevKernel_*`` (NCCL >= 2.19; RCCL uses both)
COMM_KERNEL_PREFIXES = ("ncclKernel", "ncclDevKernel", "ncclDev", "rcclKernel")

#: ``ProfilerStep#N`` marks steps on the CPU
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
#: ``Optimizer.step#AdamW.step``: torch.optim's annotation of every optimizer step, on the CPU
#: (and mirrored on the GPU as ``gpu_user_annotation``); where no ``ProfilerStep`` marks exist
#: (profiled without ``prof.step()``), each one ends a training step
OPTIMIZER_STEP_PREFIX = "Optimizer.step#"
#: ``ranks.step_source`` of a trace whose steps come from those annotations
OPTIMIZER_STEPS = OPTIMIZER_STEP_PREFIX.rstrip("#")
#: ``ranks.step_source`` of a trace with neither step marks nor optimizer steps whose collectives
#: repeat in a loop (:func:`stallscope.ingest.steps.steps_from_collectives`)
COLLECTIVE_LOOP = "collectives"
#: ``ranks.step_source`` of a trace with none of those: its whole profile is step 0
WHOLE_PROFILE = "profile"

# Old names: ncclKernel_AllReduce_RING_LL_Sum_float(...)
_OLD_KERNEL_RE = re.compile(
    r"^ncclKernel_(?P<op>[A-Za-z]+)_(?P<algo>RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|COLLNET|NVLS_TREE|NVLS|PAT)_(?P<proto>LL128|LL|SIMPLE)_(?P<redop>[A-Za-z]+)_(?P<dtype>\w+?)(?:\(|$)"
)
# New names: ncclDevKernel_AllReduce_Sum_f32_RING_LL(...), ncclDevKernel_SendRecv(...)
_NEW_KERNEL_RE = re.compile(
    r"^nccl(?:Dev)?Kernel_(?P<op>[A-Za-z]+)(?:_(?P<redop>Sum|Prod|Min|Max|PreMulSum|SumPostDiv|Avg))?(?:_(?P<dtype>[a-z]+\d*|bf16|f8e4m3|f8e5m2))?(?:_(?P<algo>RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|NVLS_TREE|NVLS|PAT))?(?:_(?P<proto>LL128|LL|SIMPLE))?(?:\(|$)"
)


def parse_comm_kernel_name(name: str) -> dict[str, str | None]:
    """Split an NCCL kernel name into op / algo / proto / dtype (any part may be None).

    >>> parse_comm_kernel_name("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)")["op"]
    'allreduce'
    >>> d = parse_comm_kernel_name("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
    >>> (d["op"], d["algo"], d["proto"])
    ('allgather', 'RING', 'LL')
    >>> parse_comm_kernel_name("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(x)")["dtype"]
    'bf16'
    """
    m = _OLD_KERNEL_RE.match(name) or _NEW_KERNEL_RE.match(name)
    if not m:
        return {"op": None, "algo": None, "proto": None, "dtype": None}
    d = m.groupdict()
    return {
        "op": normalize_op(d.get("op") or ""),
        "algo": d.get("algo"),
        "proto": d.get("proto"),
        "dtype": d.get("dtype"),
    }


_OP_WORDS = (
    ("allreduce", "allreduce"),
    ("reducescatter", "reducescatter"),
    ("allgather", "allgather"),
    ("alltoall", "alltoall"),
    ("sendrecv", "sendrecv"),
    ("broadcast", "broadcast"),
    ("barrier", "barrier"),
    ("reduce", "reduce"),
    ("gather", "gather"),
    ("scatter", "scatter"),
    ("send", "send"),
    ("recv", "recv"),
    ("coalesced", "coalesced"),
    ("generic", "unknown"),
)


def normalize_op(raw: str) -> str:
    """Map any spelling (``AllReduce``, ``all_reduce``, ``_allgather_base``, ``c10d::allreduce_``,
    ``gloo:all_gather``, ``reduce_scatter_tensor_coalesced``) to one lower-case op name.

    >>> [normalize_op(x) for x in ["AllReduce", "gloo:all_gather", "c10d::_reduce_scatter_base_", "all_to_all", "Recv"]]
    ['allreduce', 'allgather', 'reducescatter', 'alltoall', 'recv']
    """
    key = re.sub(r"[^a-z]", "", raw.lower().split("::")[-1].split(":")[-1])
    for word, op in _OP_WORDS:
        if word in key:
            return op
    return "unknown"


#: element sizes for every dtype spelling seen in traces (c10 names, kernel-name suffixes, C types)
DTYPE_BYTES: dict[str, int] = {
    "float": 4, "float32": 4, "f32": 4, "single": 4,
    "double": 8, "float64": 8, "f64": 8,
    "half": 2, "float16": 2, "f16": 2,
    "bfloat16": 2, "bf16": 2, "__nv_bfloat16": 2, "hip_bfloat16": 2, "rccl_bfloat16": 2,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "f8e4m3": 1, "f8e5m2": 1, "__nv_fp8_e4m3": 1, "__nv_fp8_e5m2": 1,
    "int8_t": 1, "int8": 1, "i8": 1, "char": 1, "signed char": 1,
    "uint8_t": 1, "uint8": 1, "u8": 1, "byte": 1, "unsigned char": 1, "bool": 1,
    "int32_t": 4, "int32": 4, "i32": 4, "int": 4,
    "uint32_t": 4, "uint32": 4, "u32": 4,
    "int64_t": 8, "int64": 8, "i64": 8, "long": 8, "long int": 8,
    "uint64_t": 8, "uint64": 8, "u64": 8,
    "short": 2, "int16": 2, "complexfloat": 8, "complexdouble": 16,
}


def dtype_size(dtype: str | None) -> int | None:
    """Bytes per element for a dtype spelling, or None if unknown.

    >>> dtype_size("Float"), dtype_size("BFloat16"), dtype_size("__nv_bfloat16"), dtype_size("weird")
    (4, 2, 2, None)
    """
    if not dtype:
        return None
    return DTYPE_BYTES.get(dtype.strip().lower())
