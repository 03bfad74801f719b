"""Tables parsed from PyTorch profiler (Kineto) traces: one trace file per rank."""

from __future__ import annotations

import pyarrow as pa

from stallscope.store.schema import C, TableSpec, register

I32, I64, F64, STR, BOOL = pa.int32(), pa.int64(), pa.float64(), pa.string(), pa.bool_()


def inferred_host(rank: int, size: int) -> str:
    """``ranks.host`` of a host no input names: the block of ``size`` consecutive ranks holding ``rank``.

    >>> inferred_host(6, 4)
    'host-of-ranks-4-7'
    """
    first = (rank // size) * size
    return f"host-of-ranks-{first}-{first + size - 1}"


def known_host_blocks(known: dict[int, str], size: int) -> dict[int, str] | None:
    """Block index -> its known host, when blocks of ``size`` consecutive ranks can be the hosts
    given the ranks whose host is known (``known``: rank -> host): each known host within one
    block and no block holding two; None when not.

    >>> known_host_blocks({8: "a", 10: "a"}, 4)
    {2: 'a'}
    >>> known_host_blocks({0: "a", 4: "a"}, 4) is None
    True
    """
    named: dict[int, set[str]] = {}
    for r, h in known.items():
        named.setdefault(r // size, set()).add(h)
    seen = [h for hs in named.values() for h in hs]
    if any(len(hs) > 1 for hs in named.values()) or len(seen) != len(set(seen)):
        return None
    return {b: next(iter(hs)) for b, hs in named.items()}

RANKS = TableSpec(
    "ranks",
    "One row per rank ingested: identity, host, devices and its traces' own facts. A rank whose process wrote"
    " several trace files (profiling windows: `schedule(repeat=N)`) has one row: span from the first window's"
    " start to the last one's end, counts summed; `files` lists each file.",
    (
        C("rank", I32, "global rank (from `distributedInfo.rank`, else the file name, else ingest order)"),
        C("world_size", I32, "world size the trace declares (`distributedInfo.world_size`); null if absent"),
        C("host", STR, "host name (trace `host_name`, else NCCL log or manifest, else file name `host_pid` pattern); null if unknown"),
        C("host_source", STR, "where `host` came from: trace | file_name | nccl_log | manifest | directory | inferred (block of a known host's size) | device (blocks of ranks driving GPUs 0..G-1) | clock (ranks sharing a clock)"),
        C("pid", I64, "main process id (the pid of the process holding CPU events)"),
        C("local_rank", I32, "rank within its host when known (manifest), else null"),
        C("backend", STR, "`distributedInfo.backend`: nccl, gloo, ... (null for non-distributed traces)"),
        C("nccl_version", STR, "`distributedInfo.nccl_version` when the trace records it"),
        C("device_name", STR, "name of the rank's GPU (`deviceProperties` entry of the device its kernels ran on); null for CPU-only"),
        C("device_id", I32, "CUDA device index its kernels ran on (most frequent `args.device`)"),
        C("device_count", I32, "number of entries in `deviceProperties` (GPUs visible to the process)"),
        C("platform", STR, "cuda | rocm | cpu: ROCm when HIP runtime names appear, cpu when no GPU event exists"),
        C("schema_version", I32, "Kineto `schemaVersion`"),
        C("base_time_ns", I64, "`baseTimeNanoseconds`: add to a trace-clock time to get Unix epoch ns (null if absent)", "ns"),
        C("trace_start_ns", I64, "earliest event start on this rank (trace clock)", "ns"),
        C("trace_end_ns", I64, "latest event end on this rank (trace clock)", "ns"),
        C("events", I64, "complete (`ph: X`) events kept"),
        C("kernels", I64, "GPU activities kept (kernels, memcpy, memset)"),
        C("collectives", I64, "collective calls found"),
        C("steps", I32, "training steps found (`ProfilerStep#N` spans, or inferred: `step_source`)"),
        C("step_source", STR, "where the steps come from: `ProfilerStep` (the profiler's `step()` marks), `Optimizer.step` "
                              "(no marks, the trace profiled without `prof.step()`: each step ends where a `Optimizer.step#…` "
                              "annotation of torch.optim ends, numbered from 0), `collectives` (neither: the loop of the rank's "
                              "collectives, each step ending at its longest pause), `profile` (no loop either, in a trace "
                              "with collectives: the whole profile is step 0), null (no steps)"),
        C("truncated", BOOL, "true when the file ended before the JSON did (killed job); complete events were kept"),
        C("file", STR, "path of the trace inside the bundle (the first window's when the rank left several)"),
        C("file_bytes", I64, "size of the file as stored (compressed if gzip; summed over a rank's windows)", "bytes"),
        C("sha256", STR, "content hash of the file as stored (of `file`)"),
    ),
)

EVENTS = TableSpec(
    "events",
    "Every complete (`ph: X`) event of every rank: CPU ops, annotations, runtime calls and GPU activities."
    " The `events` view adds `step` (the ProfilerStep the event belongs to).",
    (
        C("rank", I32, "global rank → ranks.rank"),
        C("ts_ns", I64, "start on the rank's trace clock (Kineto `ts` µs × 1000, exact for integer and float ts)", "ns"),
        C("dur_ns", I64, "duration (`dur` × 1000)", "ns"),
        C("cat", STR, "Kineto category: cpu_op, user_annotation, python_function, cuda_runtime, kernel, gpu_memcpy, gpu_memset, gpu_user_annotation, cuda_sync, ..."),
        C("name", STR, "event name (op, kernel or annotation name)"),
        C("pid", I64, "Kineto pid: process id for CPU events, device index for GPU events (null for label pids such as `Spans`)"),
        C("tid", I64, "Kineto tid: thread id for CPU events, stream for GPU events (null for label tids)"),
        C("stream", I64, "CUDA/HIP stream of a GPU activity (`args.stream`); null for CPU events"),
        C("device", I64, "GPU index of a GPU activity (`args.device`); null for CPU events"),
        C("correlation", I64, "`args.correlation`: links a runtime launch to its GPU activity"),
        C("external_id", I64, "`args.External id`: links GPU activities and runtime calls to the CPU op that issued them"),
        C("input_dims", STR, "`args.Input Dims` as JSON text (cpu_op / annotations recorded with shapes); null otherwise"),
        C("input_type", STR, "`args.Input type` as JSON text; null otherwise"),
    ),
)

KERNELS = TableSpec(
    "kernels",
    "GPU activities (kernels, memcpy, memset) with their launch, classified as compute or communication.",
    (
        C("rank", I32, "global rank → ranks.rank"),
        C("ts_ns", I64, "start on the GPU (trace clock)", "ns"),
        C("dur_ns", I64, "duration on the GPU", "ns"),
        C("name", STR, "kernel name (or memcpy/memset kind)"),
        C("kind", STR, "kernel | memcpy | memset"),
        C("is_comm", BOOL, "true for NCCL/RCCL communication kernels (`ncclKernel_*`, `ncclDevKernel_*`)"),
        C("stream", I64, "stream the activity ran on"),
        C("device", I64, "GPU index"),
        C("correlation", I64, "runtime correlation id"),
        C("external_id", I64, "External id of the issuing CPU op"),
        C("launch_ts_ns", I64, "start of the runtime call that launched it (same correlation); null if not in the trace", "ns"),
        C("launch_dur_ns", I64, "duration of that runtime call", "ns"),
    ),
)

COLLECTIVES = TableSpec(
    "collectives",
    "One row per collective call per rank: GPU execution (the NCCL kernel) when there is one, else the"
    " CPU execution (gloo annotation / c10d op), with the collective's metadata when the trace has it.",
    (
        C("rank", I32, "global rank → ranks.rank"),
        C("op", STR, "normalized operation: allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv, send, recv, barrier, gather, scatter, coalesced, unknown"),
        C("source", STR, "what the row was built from: nccl_kernel | cpu (gloo annotation or c10d op without a GPU kernel)"),
        C("name", STR, "raw name of the executing event (kernel name or annotation)"),
        C("pg_name", STR, "process group name (`Process Group Name`, e.g. '0'); null if the trace lacks it"),
        C("pg_desc", STR, "process group description (`Process Group Description`, e.g. default_pg)"),
        C("pg_ranks", pa.list_(I32), "global ranks of the group (`Process Group Ranks`); null if unknown"),
        C("group_size", I32, "`Group size` (members of the group); null if unknown"),
        C("seq", I64, "collective sequence number in its group (`Seq`), when the trace has it"),
        C("peer", I32, "for point-to-point ops: the other rank (`Dst Rank` of a send, `Src Rank` of a recv), global"),
        C("dtype", STR, "element type (`dtype`, or from the kernel name / input type)"),
        C("in_nelems", I64, "`In msg nelems` (elements sent/contributed by this rank)"),
        C("out_nelems", I64, "`Out msg nelems` (elements received)"),
        C("bytes", I64, "message size in nccl-tests convention: allreduce/broadcast/reduce/alltoall: input bytes; allgather: output bytes; reducescatter: input bytes", "bytes"),
        C("algo", STR, "NCCL algorithm from the kernel name (RING, TREE, NVLS, COLLNET_*, PAT); null if not named"),
        C("proto", STR, "NCCL protocol from the kernel name (LL, LL128, SIMPLE)"),
        C("start_ns", I64, "execution start (kernel start on the GPU, or CPU execution start)", "ns"),
        C("end_ns", I64, "execution end", "ns"),
        C("cpu_start_ns", I64, "start of the host-side call that issued it (record_param_comms / c10d op); null if not found", "ns"),
        C("cpu_end_ns", I64, "end of that host-side call", "ns"),
        C("stream", I64, "GPU stream of the kernel (NCCL communicator stream); null on CPU"),
        C("tid", I64, "thread of the CPU execution (gloo runloop thread); null on GPU"),
        C("external_id", I64, "External id of the executing event"),
        C("correlation", I64, "correlation id of the kernel"),
    ),
)

STEPS = TableSpec(
    "steps",
    "Training steps as the profiler marked them (`ProfilerStep#N` spans on the CPU), per rank; in a trace"
    " without those marks, from the end of one optimizer step to the end of the next; without either, from the"
    " loop of its collectives, or the whole profile as step 0 (`ranks.step_source`).",
    (
        C("rank", I32, "global rank → ranks.rank"),
        C("step", I64, "the N of `ProfilerStep#N` (same N on every rank for the same iteration); 0, 1, … in order "
                       "for steps taken from optimizer steps"),
        C("start_ns", I64, "CPU span start (trace clock; the previous optimizer step's end, or the trace's first "
                           "event, for steps taken from optimizer steps)", "ns"),
        C("end_ns", I64, "CPU span end", "ns"),
        C("dur_ns", I64, "CPU span duration", "ns"),
    ),
)

PROCESS_GROUPS = TableSpec(
    "process_groups",
    "Process groups each rank declares (`distributedInfo.pg_config`).",
    (
        C("rank", I32, "global rank that declared it"),
        C("pg_name", STR, "process group name"),
        C("pg_desc", STR, "description (default_pg, ...)"),
        C("backend_config", STR, "e.g. `cuda:nccl` or `cpu:gloo,cuda:gloo`"),
        C("pg_size", I32, "number of members"),
        C("ranks", pa.list_(I32), "global ranks of the members"),
    ),
)

THREADS = TableSpec(
    "threads",
    "Process and thread names from the trace metadata (`ph: M`), e.g. gloo runloop threads, GPU streams.",
    (
        C("rank", I32, "global rank"),
        C("pid", STR, "Kineto pid as text"),
        C("tid", STR, "Kineto tid as text ('0' for process-level names)"),
        C("kind", STR, "process_name | thread_name | process_labels"),
        C("name", STR, "the name or label"),
    ),
)

DEVICES = TableSpec(
    "devices",
    "GPU properties each rank's trace declares (`deviceProperties`).",
    (
        C("rank", I32, "global rank"),
        C("device_id", I32, "device index"),
        C("name", STR, "device name"),
        C("total_global_mem", I64, "memory", "bytes"),
        C("compute_major", I32, "compute capability major"),
        C("compute_minor", I32, "compute capability minor"),
        C("num_sms", I32, "streaming multiprocessors"),
    ),
)

register(RANKS, EVENTS, KERNELS, COLLECTIVES, STEPS, PROCESS_GROUPS, THREADS, DEVICES)
