"""Independent simulator #1: data-parallel jobs (DDP, FSDP, HSDP) written as Kineto traces.

Written from scratch with numpy only, without reading or importing ``stallscope.samples``, so
that stallscope's attribution can be checked against physics it was not tuned on.

What it simulates
-----------------
``nodes`` hosts with ``gpn`` GPUs each run the same per-step program (``build_program``) in
*true* time (microseconds, one clock for the whole job):

* a DataLoader fetch on the CPU (1-2.5 ms, uniform), a 4 MiB host-to-device copy;
* forward: ``layers`` x (GEMM, GELU, LayerNorm) kernels, plus an all-gather per layer for FSDP;
* backward in reverse layer order: GEMMs, GELU/LayerNorm backward; DDP all-reduces a 24 MB
  bucket every two layers, FSDP all-gathers before and reduce-scatters after each layer (HSDP:
  reduce-scatter inside the host plus an all-reduce across hosts between same-local-rank GPUs);
* the compute stream waits for the NCCL stream (``cudaStreamWaitEvent``), 8 fused-Adam
  kernels, and a ``cudaStreamSynchronize`` that ends the step.

Each rank has a CPU clock (launches run ahead, 25-45 us per op), an in-order compute stream and
an in-order NCCL stream.  A collective starts on a rank when it is launched, its stream is free
and (all-reduce/reduce-scatter) the compute stream has produced the data; it *ends* on every
member at ``max(member starts) + bytes * bus_factor / bandwidth + 25 us`` (+0-8 us jitter).
Bandwidth is the slowest host link of the group (``inter_bw`` +-5 %) across hosts, NVLink
(150 GB/s) inside one host.  Kernel times get 2 % log-normal noise.

Scenarios (``Cfg.scenario``): ``healthy``; ``compute_straggler`` (one rank's kernels ``slow``
longer); ``host_stall`` (one rank's DataLoader ``stall_ms`` longer every step); ``intermittent``
(the same, only on ``stall_steps``); ``locality`` (every rank of one host slower, optionally a
slower host link ``host_bw_factor`` or slower NVLink ``intra_slow_bw``); ``fabric`` (every host
link at ``fabric_bw``); ``jitter`` (exponential DataLoader delays on every rank, or with
``jitter_kind="compute"`` a random per-rank compute slowdown each step).

How it writes traces
--------------------
One PyTorch-profiler (Kineto) JSON per rank: ``ProfilerStep#N`` annotations, ``cpu_op`` events
with ``cudaLaunchKernel`` runtime events and ``ac2g`` flow arrows to the GPU kernels, NCCL
kernels (``ncclDevKernel_*`` or the older ``ncclKernel_*`` names, ``with_args`` adds the
``record_param_comms`` collective metadata) with ``gpu_user_annotation`` spans,
``distributedInfo``, ``deviceProperties`` and metadata events.  Timestamps are the true times
plus a monotonic base and a per-host clock offset (uniform +-``clock_ms``), so hosts disagree
about time like real ones do.  Files are named like TensorBoard's trace handler
(``<host>_<pid>.<ms>.pt.trace.json``) or ``rank<N>.pt.trace.json`` (``naming="rank"`` adds a
``host_name`` key, ``naming="bare"`` names no host at all); ``gz`` compresses them (gzip header
time 0, so the bytes depend only on the seed).  ``drop_ranks`` leaves ranks' files out and
``truncate_rank`` cuts one file at ``truncate_frac`` of its length, after every random draw, so
the other files are unchanged.

Everything random comes from ``numpy.random.default_rng(seed)`` (simulation) and
``default_rng(seed + 1000)`` (ids, clocks, file names): a spec's seed fixes its bytes.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Cfg", "build_program", "simulate", "write_bundle"]


@dataclass
class Cfg:
    name: str = "b"
    scenario: str = "healthy"      # healthy | compute_straggler | host_stall | intermittent | locality | fabric | jitter
    nodes: int = 2
    gpn: int = 4                   # GPUs per node
    mode: str = "ddp"              # ddp | fsdp
    hsdp: bool = False             # fsdp only: shard inside a host, replicate across hosts
    steps: int = 8
    first_step: int = 10
    layers: int = 12
    inter_bw: float = 25e9         # healthy host link, bytes/s
    seed: int = 0
    # trace format
    with_args: bool = True         # collective metadata in record_param_comms / kernel args
    new_names: bool = True         # ncclDevKernel_* (NCCL >= 2.19) vs ncclKernel_*
    new_sig: bool = False          # (ncclDevKernelArgsStorage<4096ul>) kernel signature
    naming: str = "tb"             # tb | rank | bare (see module docstring)
    gz: bool = False
    float_ts: bool = True          # float (ns precision) or integer microsecond timestamps
    hostfmt: str = "gpu-node-{:02d}"
    clock_ms: float = 4.0          # per-host clock offsets, uniform in +-clock_ms
    gpu_name: str = "NVIDIA H100 80GB HBM3"
    # scenario parameters
    culprit_rank: int | None = None
    culprit_host: int | None = None
    slow: float = 0.0              # compute slowdown fraction
    stall_ms: float = 0.0          # host-side stall
    stall_steps: list[int] | None = None
    jitter_ms: float = 0.0
    jitter_kind: str = "cpu"       # cpu | compute
    fabric_bw: float | None = None
    host_bw_factor: float = 1.0    # locality: the slow host's link bandwidth factor
    intra_slow_bw: float = 1.0     # locality: the slow host's NVLink bandwidth factor
    # damaged bundles (applied when writing, after every random draw)
    drop_ranks: list[int] = field(default_factory=list)
    truncate_rank: int | None = None
    truncate_frac: float = 0.7


# ---------------------------------------------------------------------------------------------
# kernel names

GEMM_TN = "ampere_sgemm_128x64_tn"
GEMM_NN = "ampere_sgemm_128x64_nn"
GEMM_NT = "ampere_sgemm_64x64_nt"
GELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
        "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#1}::operator()() const::{lambda(float)#1}, "
        "at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)"
        "::{lambda()#2}::operator()() const::{lambda()#1}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)")
LAYER_NORM = ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, "
              "float const*, float const*, float*, float*, float*)")
SOFTMAX = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
           "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)")
GELU_BWD = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, "
            "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#1}::operator()() const::{lambda(float, float)#1}, "
            "at::detail::Array<char*, 3> >(int, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)"
            "::{lambda()#2}::operator()() const::{lambda()#1}::operator()() const::{lambda(float, float)#1}, at::detail::Array<char*, 3>)")
LAYER_NORM_BWD = ("void at::native::(anonymous namespace)::layer_norm_grad_input_kernel<float, float>(float const*, float const*, "
                  "float const*, float const*, float const*, float*, int)")
_ADAM_T = ("at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor"
           "<float, 4, (at::native::ADAM_MODE)0, false>, float*, double, float*, double, double, double, double, double, bool, "
           "float*, float*")
ADAM = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<%s>(%s)" % (_ADAM_T, _ADAM_T)

ADDMM_BWD = "autograd::engine::evaluate_function: AddmmBackward0"

COLL_ARGNAME = {"allreduce": "allreduce", "allgather": "_allgather_base",
                "reducescatter": "_reduce_scatter_base", "broadcast": "broadcast"}
ANNOT = {"allreduce": "nccl:all_reduce", "allgather": "nccl:_all_gather_base",
         "reducescatter": "nccl:_reduce_scatter_base", "broadcast": "nccl:broadcast"}


def nccl_kernel_name(cfg: Cfg, coll: str, dtype: str) -> str:
    dt_new = {"Float": "f32", "BFloat16": "bf16"}[dtype]
    dt_old = {"Float": "float", "BFloat16": "__nv_bfloat16"}[dtype]
    sig = "(ncclDevKernelArgsStorage<4096ul>)" if cfg.new_sig else "(ncclDevComm*, unsigned long, ncclWork*)"
    if cfg.new_names:
        return {"allreduce": "ncclDevKernel_AllReduce_Sum_%s_RING_LL%s" % (dt_new, sig),
                "allgather": "ncclDevKernel_AllGather_RING_LL%s" % sig,
                "reducescatter": "ncclDevKernel_ReduceScatter_Sum_%s_RING_LL%s" % (dt_new, sig),
                "broadcast": "ncclDevKernel_Broadcast_RING_LL%s" % sig}[coll]
    base = {"allreduce": "AllReduce", "allgather": "AllGather", "reducescatter": "ReduceScatter",
            "broadcast": "Broadcast"}[coll]
    d = dt_old if coll != "allgather" else "int8_t"
    return "ncclKernel_%s_RING_LL_Sum_%s(ncclDevComm*, unsigned long, ncclWork*)" % (base, d)


# ---------------------------------------------------------------------------------------------
# the program every rank runs each step


def build_program(cfg: Cfg) -> list[tuple[Any, ...]]:
    """Per-step op list, the same for every rank.

    ``("k", kernel, ms, cpu_op, mark)``: a kernel of ``ms`` milliseconds launched by ``cpu_op``;
    under FSDP a kernel with ``mark`` waits for the all-gather tagged ``mark``.
    ``("coll", kind, nelem, dtype, tag)``: a collective on the NCCL stream.
    """
    L = cfg.layers
    fsdp = cfg.mode == "fsdp"
    ops: list[tuple[Any, ...]] = [("dataloader",), ("h2d", 4 << 20)]
    for layer in range(L):                                           # forward
        if fsdp:
            ops.append(("coll", "allgather", 6_000_000, "BFloat16", "fwd%d" % layer))
        ops.append(("k", GEMM_TN, 1.1, "aten::linear", "fwd%d" % layer))
        ops.append(("k", GELU, 0.18, "aten::gelu", None))
        ops.append(("k", LAYER_NORM, 0.12, "aten::native_layer_norm", None))
    ops.append(("k", SOFTMAX, 0.3, "aten::_log_softmax", None))
    ops.append(("bwd_begin",))
    for i, layer in enumerate(reversed(range(L))):                   # backward
        if fsdp:
            ops.append(("coll", "allgather", 6_000_000, "BFloat16", "bwd%d" % layer))
        ops.append(("k", GEMM_NN, 1.1, ADDMM_BWD, "bwd%d" % layer))
        ops.append(("k", GEMM_NT, 1.0, ADDMM_BWD, None))
        ops.append(("k", GELU_BWD, 0.2, "autograd::engine::evaluate_function: GeluBackward0", None))
        ops.append(("k", LAYER_NORM_BWD, 0.15, "autograd::engine::evaluate_function: NativeLayerNormBackward0", None))
        if fsdp:
            ops.append(("coll", "reducescatter", 6_000_000, "Float", "rs%d" % layer))
            if cfg.hsdp:
                ops.append(("coll", "allreduce", 6_000_000 // cfg.gpn, "Float", "bucketx%d" % layer))
        elif i % 2 == 1:                                             # DDP: one bucket per two layers
            ops.append(("coll", "allreduce", 6_000_000, "Float", "bucket%d" % i))
    ops.append(("bwd_end",))
    ops.append(("wait_nccl",))
    ops.append(("opt_begin",))
    ops.extend(("k", ADAM, 0.35, "aten::_fused_adam_", None) for _ in range(8))
    ops.append(("opt_end",))
    ops.append(("sync",))
    return ops


# ---------------------------------------------------------------------------------------------
# simulation in true time


def simulate(cfg: Cfg) -> tuple[list[list[tuple[str, dict[str, Any]]]], list[str], list[int]]:
    """Run the job; return per-rank event records, host names and each rank's host index."""
    rng = np.random.default_rng(cfg.seed)
    R = cfg.nodes * cfg.gpn
    hosts = [cfg.hostfmt.format(i + 1) for i in range(cfg.nodes)]
    host_of = [r // cfg.gpn for r in range(R)]
    prog = build_program(cfg)
    MS = 1000.0  # microseconds per millisecond

    slow = np.ones(R)                                                # per-rank compute slowdown
    if cfg.scenario == "compute_straggler":
        slow[cfg.culprit_rank] = 1 + cfg.slow
    if cfg.scenario == "locality":
        for r in range(R):
            if host_of[r] == cfg.culprit_host:
                slow[r] = 1 + cfg.slow
    host_bw = np.full(cfg.nodes, cfg.inter_bw) * rng.uniform(0.95, 1.05, cfg.nodes)
    if cfg.scenario == "fabric":
        host_bw = np.full(cfg.nodes, cfg.fabric_bw) * rng.uniform(0.9, 1.1, cfg.nodes)
    if cfg.scenario == "locality":
        host_bw[cfg.culprit_host] *= cfg.host_bw_factor
    nvl_bw = 150e9

    cpu = np.zeros(R) + rng.uniform(0, 200, R)                       # CPU clock of each rank
    gpu = np.zeros(R)                                                # compute stream free at
    ncl = np.zeros(R)                                                # NCCL stream free at
    events: list[list[tuple[str, dict[str, Any]]]] = [[] for _ in range(R)]
    stall_steps = set(cfg.stall_steps or [])

    for s in range(cfg.steps):
        step_no = cfg.first_step + s
        for r in range(R):
            events[r].append(("step_begin", dict(step=step_no, ts=cpu[r])))
        pending_fsdp: dict[str, np.ndarray] = {}                     # all-gather tag -> end per rank
        step_slow = np.ones(R)
        for op in prog:
            kind = op[0]
            if kind == "dataloader":
                dl = rng.uniform(1.0, 2.5, R) * MS
                if cfg.scenario == "host_stall":
                    dl[cfg.culprit_rank] += cfg.stall_ms * MS * rng.uniform(0.9, 1.1)
                if cfg.scenario == "intermittent" and s in stall_steps:
                    dl[cfg.culprit_rank] += cfg.stall_ms * MS * rng.uniform(0.9, 1.1)
                if cfg.scenario == "jitter" and cfg.jitter_kind == "cpu":
                    dl += rng.exponential(cfg.jitter_ms, R) * MS
                if cfg.scenario == "jitter" and cfg.jitter_kind == "compute":
                    step_slow = 1 + rng.exponential(cfg.jitter_ms / 100.0, R)
                for r in range(R):
                    events[r].append(("cpu", dict(name="enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
                                                   cat="user_annotation", ts=cpu[r], dur=dl[r], thread="main")))
                cpu += dl + 20
            elif kind == "h2d":
                for r in range(R):
                    lt = cpu[r] + 15
                    st = max(lt + 8, gpu[r])
                    d = op[1] / 20e9 * 1e6
                    events[r].append(("memcpy", dict(cpu_ts=cpu[r], lt=lt, st=st, dur=d, bytes=op[1])))
                    gpu[r] = st + d
                cpu += 40
            elif kind == "k":
                _, kname, base_ms, cpuop, mark = op
                for r in range(R):
                    ov = rng.uniform(25, 45)                         # CPU cost of the op
                    lt = cpu[r] + ov * 0.4
                    st = lt + 6
                    if cfg.mode == "fsdp" and mark is not None and mark in pending_fsdp:
                        st = max(st, pending_fsdp[mark][r])
                    st = max(st, gpu[r])
                    d = base_ms * MS * slow[r] * step_slow[r] * rng.lognormal(0, 0.02)
                    events[r].append(("kernel", dict(name=kname, cpuop=cpuop, cpu_ts=cpu[r], cpu_dur=ov, lt=lt,
                                                     st=st, dur=d, stream=7,
                                                     thread="bwd" if cpuop.startswith("autograd") else "main")))
                    gpu[r] = st + d
                    cpu[r] += ov
            elif kind == "coll":
                _, coll, nelem, dtype, tag = op
                esz = 4 if dtype == "Float" else 2
                nbytes = nelem * esz                                 # all-gather: output; reduce-scatter: input
                fac = 2.0 * (R - 1) / R if coll == "allreduce" else (R - 1) / R
                if cfg.hsdp:
                    if coll == "allreduce":                          # replicate groups: same local rank, every host
                        groups = [[h * cfg.gpn + g for h in range(cfg.nodes)] for g in range(cfg.gpn)]
                    else:                                            # shard groups: one host
                        groups = [[h * cfg.gpn + g for g in range(cfg.gpn)] for h in range(cfg.nodes)]
                else:
                    groups = [list(range(R))]
                launch = np.zeros(R)
                starts = np.zeros(R)
                ends = np.zeros(R)
                for r in range(R):
                    lt = cpu[r] + 30
                    launch[r] = lt
                    dep = gpu[r] if coll in ("allreduce", "reducescatter") else 0.0
                    starts[r] = max(lt + 8, ncl[r], dep)
                    cpu[r] += 90
                group_of: dict[int, list[int]] = {}
                for grp in groups:
                    n = len(grp)
                    bus = fac * R / (R - 1) * (n - 1) / n            # bus factor for a group of n
                    ghosts = sorted(set(host_of[m] for m in grp))
                    if len(ghosts) > 1:
                        bw = min(host_bw[h] for h in ghosts)
                    else:
                        slow_nvl = cfg.scenario == "locality" and ghosts[0] == cfg.culprit_host
                        bw = nvl_bw * (cfg.intra_slow_bw if slow_nvl else 1.0)
                    nb = nbytes if not (cfg.hsdp and coll != "allreduce") else nbytes / cfg.nodes
                    xfer = nb * bus / bw * 1e6 + 25.0
                    last = max(starts[m] for m in grp)
                    for m in grp:
                        ends[m] = last + xfer + rng.uniform(0, 8)
                        group_of[m] = grp
                for r in range(R):
                    events[r].append(("nccl", dict(coll=coll, nelem=nelem, dtype=dtype, cpu_ts=launch[r] - 30,
                                                   lt=launch[r], st=starts[r], dur=ends[r] - starts[r], R=R,
                                                   grp=group_of[r],
                                                   thread="bwd" if tag.startswith(("bwd", "bucket", "rs")) else "main")))
                    ncl[r] = ends[r]
                if coll == "allgather":
                    pending_fsdp[tag] = ends.copy()
            elif kind == "bwd_begin":
                for r in range(R):
                    events[r].append(("bwd_begin", dict(ts=cpu[r])))
                cpu += 30
            elif kind == "bwd_end":
                for r in range(R):
                    events[r].append(("bwd_end", dict(ts=cpu[r])))
                cpu += 20
            elif kind == "wait_nccl":                                # compute stream waits for NCCL work
                for r in range(R):
                    events[r].append(("cpu", dict(name="cudaStreamWaitEvent", cat="cuda_runtime", ts=cpu[r], dur=3,
                                                   thread="main")))
                    gpu[r] = max(gpu[r], ncl[r])
                cpu += 10
            elif kind == "opt_begin":
                for r in range(R):
                    events[r].append(("opt_begin", dict(ts=cpu[r])))
            elif kind == "opt_end":
                for r in range(R):
                    events[r].append(("opt_end", dict(ts=cpu[r])))
            elif kind == "sync":
                for r in range(R):
                    t0 = cpu[r]
                    done = max(gpu[r], ncl[r], t0) + 10
                    events[r].append(("sync", dict(ts=t0, dur=done - t0)))
                    cpu[r] = done + 15
        for r in range(R):
            events[r].append(("step_end", dict(step=step_no, ts=cpu[r])))
        cpu += 30
    return events, hosts, host_of


# ---------------------------------------------------------------------------------------------
# Kineto writer


def _device_properties(cfg: Cfg) -> list[dict[str, Any]]:
    return [{"id": g, "name": cfg.gpu_name, "totalGlobalMem": 85029158912,
             "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
             "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
             "sharedMemPerBlock": 49152, "numSms": 132, "regsPerMultiprocessor": 65536,
             "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472}
            for g in range(cfg.gpn)]


def write_text(path: str, text: str, gz: bool) -> str:
    """Write a trace; gzip with header time 0 so the bytes depend only on the text."""
    if gz:
        path += ".gz"
        with open(path, "wb") as raw, gzip.GzipFile(os.path.basename(path), "wb", 9, raw, mtime=0) as f:
            f.write(text.encode())
    else:
        with open(path, "w") as f:
            f.write(text)
    return path


def write_bundle(cfg: Cfg, outdir: str) -> list[str]:
    """Simulate ``cfg`` and write one Kineto trace per rank into ``outdir`` (replaced); return the paths."""
    events, hosts, host_of = simulate(cfg)
    rng = np.random.default_rng(cfg.seed + 1000)
    R = cfg.nodes * cfg.gpn
    if os.path.exists(outdir):
        shutil.rmtree(outdir)
    os.makedirs(outdir)
    host_off = rng.uniform(-cfg.clock_ms, cfg.clock_ms, cfg.nodes) * 1000.0
    mono0 = float(rng.integers(3_000_000, 6_000_000)) * 1e6         # monotonic-clock base, us
    base_ns = 1_715_000_000_000_000_000 + int(rng.integers(0, 10**6)) * 10**9
    nccl_ver = "2.21.5" if cfg.new_names else "2.17.1"
    paths = []
    for r in range(R):
        h = host_of[r]
        lr = r % cfg.gpn
        pid = int(rng.integers(10000, 4000000))
        tid_main = pid
        tid_bwd = pid + int(rng.integers(10, 9000))
        off = mono0 + host_off[h]
        if cfg.float_ts:
            def fmt(x: float, off: float = off) -> float | int:
                return round(float(x) + off, 3)

            def fdur(x: float) -> float | int:
                return round(float(x), 3)
        else:
            def fmt(x: float, off: float = off) -> float | int:
                return int(round(float(x) + off))

            def fdur(x: float) -> float | int:
                return max(1, int(round(float(x))))
        ext = [1]                  # next External id
        corr = [1000 + r]          # next correlation id
        evidx = [0]
        out: list[dict[str, Any]] = []

        def tid_of(th: str) -> int:
            return tid_main if th == "main" else tid_bwd

        def cpu_ev(name: str, cat: str, ts: float, dur: float, th: str, args: dict[str, Any] | None = None) -> int:
            a = {"External id": ext[0], "Record function id": ext[0], "Ev Idx": evidx[0]}
            if args:
                a.update(args)
            ext[0] += 1
            evidx[0] += 1
            out.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid_of(th), "ts": fmt(ts),
                        "dur": fdur(dur), "args": a})
            return a["External id"]

        def launch(name: str, ts: float, dur: float, th: str, extid: int) -> int:
            c = corr[0]
            corr[0] += 7
            out.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": tid_of(th),
                        "ts": fmt(ts), "dur": fdur(dur),
                        "args": {"External id": extid, "cbid": 211 if name == "cudaLaunchKernel" else 430,
                                 "correlation": c}})
            out.append({"ph": "s", "id": c, "pid": pid, "tid": tid_of(th), "ts": fmt(ts), "cat": "ac2g",
                        "name": "ac2g"})
            return c

        def gpu_ev(cat: str, name: str, ts: float, dur: float, stream: int, extid: int, c: int,
                   extra: dict[str, Any] | None = None) -> None:
            a: dict[str, Any] = {"External id": extid, "queued": 0, "device": lr, "context": 1, "stream": stream,
                                 "correlation": c}
            if cat == "kernel":
                a.update({"registers per thread": 96, "shared memory": 0, "blocks per SM": 1.0,
                          "warps per SM": 4.0, "grid": [128, 1, 1], "block": [256, 1, 1],
                          "est. achieved occupancy %": 25})
            if extra:
                a.update(extra)
            out.append({"ph": "X", "cat": cat, "name": name, "pid": lr, "tid": stream, "ts": fmt(ts),
                        "dur": fdur(dur), "args": a})
            out.append({"ph": "f", "id": c, "pid": lr, "tid": stream, "ts": fmt(ts), "cat": "ac2g", "name": "ac2g",
                        "bp": "e"})

        step_ts = opt_ts = 0.0
        t_first: float | None = None
        t_last = 0.0
        for kind, d in events[r]:
            if kind == "step_begin":
                step_ts = d["ts"]
                t_first = d["ts"] if t_first is None else t_first
            elif kind == "step_end":
                cpu_ev("ProfilerStep#%d" % d["step"], "user_annotation", step_ts, d["ts"] - step_ts, "main")
                t_last = d["ts"]
            elif kind == "bwd_begin":
                pass
            elif kind == "bwd_end":
                cpu_ev("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", "cpu_op", d["ts"] - 15,
                       10, "bwd")
            elif kind == "opt_begin":
                opt_ts = d["ts"]
            elif kind == "opt_end":
                cpu_ev("Optimizer.step#AdamW.step", "user_annotation", opt_ts, d["ts"] - opt_ts, "main")
            elif kind == "cpu":
                if d["cat"] == "cuda_runtime":
                    out.append({"ph": "X", "cat": "cuda_runtime", "name": d["name"], "pid": pid, "tid": tid_main,
                                "ts": fmt(d["ts"]), "dur": fdur(d["dur"]),
                                "args": {"External id": 0, "cbid": 147, "correlation": corr[0]}})
                    corr[0] += 1
                else:
                    cpu_ev(d["name"], d["cat"], d["ts"], d["dur"], d["thread"])
            elif kind == "memcpy":
                x = cpu_ev("aten::copy_", "cpu_op", d["cpu_ts"], d["lt"] - d["cpu_ts"] + 12, "main")
                c = launch("cudaMemcpyAsync", d["lt"], 8, "main", x)
                gpu_ev("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", d["st"], d["dur"], 7, x, c,
                       {"bytes": d["bytes"], "memory bandwidth (GB/s)": d["bytes"] / d["dur"] / 1e3})
            elif kind == "kernel":
                x = cpu_ev(d["cpuop"], "cpu_op", d["cpu_ts"], d["cpu_dur"] - 2, d["thread"])
                c = launch("cudaLaunchKernel", d["lt"], 5, d["thread"], x)
                gpu_ev("kernel", d["name"], d["st"], d["dur"], 7, x, c)
            elif kind == "nccl":
                coll = d["coll"]
                ann = ANNOT[coll]
                x_ann = cpu_ev(ann, "user_annotation", d["cpu_ts"], 85, d["thread"])
                cargs: dict[str, Any] = {}
                if cfg.with_args:
                    grp = d["grp"]
                    G = len(grp)
                    n_in = d["nelem"] if coll != "allgather" else d["nelem"] // G
                    n_out = d["nelem"] if coll != "reducescatter" else d["nelem"] // G
                    if G == d["R"]:
                        pgn, pgd = "0", "default_pg"
                    elif coll == "allreduce":
                        pgn, pgd = str(1 + cfg.nodes + grp[0] % cfg.gpn), "replicate_group"
                    else:
                        pgn, pgd = str(1 + grp[0] // cfg.gpn), "shard_group"
                    cargs = {"Collective name": COLL_ARGNAME[coll], "In msg nelems": n_in, "Out msg nelems": n_out,
                             "Group size": G, "dtype": d["dtype"], "In split size": "[]",
                             "Out split size": "[]", "Process Group Name": pgn,
                             "Process Group Description": pgd,
                             "Process Group Ranks": "[" + ", ".join(str(i) for i in grp) + "]"}
                    x = cpu_ev("record_param_comms", "cpu_op", d["cpu_ts"] + 2, 80, d["thread"],
                               dict(cargs, **{"Global rank start": 0, "Global rank stride": 1}))
                else:
                    x = cpu_ev("record_param_comms", "cpu_op", d["cpu_ts"] + 2, 80, d["thread"])
                c = launch("cudaLaunchKernelExC" if cfg.new_names else "cudaLaunchKernel", d["lt"], 12, d["thread"], x)
                gpu_ev("kernel", nccl_kernel_name(cfg, coll, d["dtype"]), d["st"], d["dur"], 20, x, c, cargs)
                out.append({"ph": "X", "cat": "gpu_user_annotation", "name": ann, "pid": lr, "tid": 20,
                            "ts": fmt(d["st"] - 1), "dur": fdur(d["dur"] + 1.5), "args": {"External id": x_ann}})
            elif kind == "sync":
                x = cpu_ev("aten::item", "cpu_op", d["ts"], d["dur"] + 5, "main")
                out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": pid,
                            "tid": tid_main, "ts": fmt(d["ts"] + 2), "dur": fdur(d["dur"]),
                            "args": {"External id": x, "cbid": 131, "correlation": corr[0]}})
                corr[0] += 1
        assert t_first is not None
        mts = fmt(t_first - 500)
        meta: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "ts": mts, "pid": pid, "tid": 0, "args": {"name": "python3.10"}},
            {"name": "process_labels", "ph": "M", "ts": mts, "pid": pid, "tid": 0, "args": {"labels": "CPU"}}]
        for g in range(cfg.gpn):
            meta.append({"name": "process_name", "ph": "M", "ts": mts, "pid": g, "tid": 0,
                         "args": {"name": "python3.10"}})
            meta.append({"name": "process_labels", "ph": "M", "ts": mts, "pid": g, "tid": 0,
                         "args": {"labels": "GPU %d" % g}})
        for st in (7, 20):
            meta.append({"name": "thread_name", "ph": "M", "ts": mts, "pid": lr, "tid": st,
                         "args": {"name": "stream %d " % st}})
        meta.append({"name": "thread_name", "ph": "M", "ts": mts, "pid": pid, "tid": tid_main,
                     "args": {"name": "thread %d (python3)" % tid_main}})
        meta.append({"name": "thread_name", "ph": "M", "ts": mts, "pid": pid, "tid": tid_bwd,
                     "args": {"name": "thread %d (pt_autograd_0)" % tid_bwd}})
        out.sort(key=lambda e: (e["ts"], e.get("ph") != "X"))
        trace: dict[str, Any] = {
            "schemaVersion": 1,
            "deviceProperties": _device_properties(cfg),
            "distributedInfo": {"backend": "nccl", "rank": r, "world_size": R, "pg_count": 1,
                                "pg_config": [{"pg_name": "0", "pg_desc": "default_pg",
                                               "backend_config": "cuda:nccl", "pg_size": R,
                                               "ranks": list(range(R))}],
                                "nccl_version": nccl_ver},
            "record_shapes": 0,
            "trace_id": "%032X" % int(rng.integers(0, 2**62)),
            "traceEvents": meta + out + [
                {"ph": "X", "cat": "Trace", "ts": fmt(t_first - 1000), "dur": fdur(t_last - t_first + 2000),
                 "pid": "Spans", "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)",
                 "args": {"Op count": 0}},
                {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": fmt(t_last + 1000)}],
            "displayTimeUnit": "ms",
            "baseTimeNanoseconds": base_ns,
            "traceName": "/tmp/tmp%06x.json" % int(rng.integers(0, 2**24)),
        }
        if cfg.naming in ("rank", "bare"):
            if cfg.naming == "rank":
                trace["host_name"] = hosts[h]
            fn = "rank%d.pt.trace.json" % r
        else:
            wall_ms = base_ns // 10**6 + int((t_last + off) / 1000) % 10**6 + int(rng.integers(0, 50))
            fn = "%s_%d.%d.pt.trace.json" % (hosts[h], pid, wall_ms)
        if r in cfg.drop_ranks:
            continue
        text = json.dumps(trace)
        if r == cfg.truncate_rank:
            text = text[: int(len(text) * cfg.truncate_frac)]
        paths.append(write_text(os.path.join(outdir, fn), text, cfg.gz))
    return paths
