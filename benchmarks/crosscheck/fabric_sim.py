"""Independent simulator #3: data-parallel and TP+DP jobs with NCCL debug logs next to the Kineto traces.

Written by a reviewer who did not read or import ``stallscope`` (neither ``samples`` nor the
rules nor the ingest code); the log lines follow the real NCCL formats of the excerpts in
``../shared/logs/nccl`` (format only, every value is generated here).

Physics
-------
``nodes`` hosts x ``gpn`` GPUs, one process per GPU.  Every rank runs the same op program, so the
simulation walks the program op by op for all ranks at once (lockstep over the op index, free
running in time): a rank has a CPU clock (launch cost 15-35 us per op), a compute stream and an
NCCL stream.  A collective on group G starts on a member when its NCCL stream is free and its
inputs are ready, and ends on every member at

    max(member starts) + bytes x algo / busbw(G) + latency(G)      (+0-4 us per member)

with ``algo`` = 2(n-1)/n for all-reduce, (n-1)/n for all-gather / reduce-scatter.  ``busbw(G)``
is the slowest link the ring crosses: the intra-host bandwidth of every host holding two or
more members (NVLink P2P ``nvl_bw``; SHM when P2P is off: ``nvl_bw x factor``) and, when G spans
hosts, the inter-node bandwidth of every member host, ``nics x nic_gbps/8 x 0.85`` (RDMA), shared
by the concurrent groups of that host (a group with k of the host's gpn GPUs gets k/gpn of it).
Socket transport replaces it by ``socket_gbs`` per host and a 35 us per hop latency (IB 5 us).

Jobs (``mode``): ``ddp`` (gradient buckets all-reduced during backward, over all ranks), ``fsdp``
(all-gather before each layer forward and backward with one-layer prefetch, reduce-scatter after
each backward layer), ``hsdp`` (FSDP inside a host, all-reduce of the shards across hosts), ``tp``
(tensor parallel inside a host, two all-reduces per layer each way, then data-parallel gradient
all-reduces across hosts after backward, not overlapped).

Scenarios (``scenario``, strength ``factor``):
``healthy``; ``socket`` (every host on NET/Socket, ``socket_gbs``); ``gdr_off`` (GPUDirect RDMA off
on every host: inter-node bandwidth x ``factor`` on messages >= 1 MB, half that loss below);
``nic_degraded`` (``culprit_host``'s inter-node bandwidth x ``factor``; its log has IB async-event
port errors, or a completion error, and optionally one HCA missing from ``NET/IB : Using``);
``p2p_off`` (``culprit_host`` uses SHM instead of P2P inside the host: intra bandwidth x ``factor``);
``cross_socket`` (``culprit_host`` reaches its NICs through the other CPU socket: path SYS, GDR
off there, inter-node bandwidth x ``factor``); ``straggler`` (``culprit_rank``'s kernels take
``1 + factor`` as long; logs healthy).  ``write_bundle`` simulates the job twice, with and without
the fault, and returns the true lost fraction (makespan - healthy makespan) / makespan.

Files
-----
One Kineto JSON per rank (``<host>_<pid>.<ms>.pt.trace.json``, or ``rank<N>.pt.trace.json`` with no
host name anywhere when ``naming="rank"``), ``ProfilerStep#N``, ``cpu_op`` + ``cudaLaunchKernel``
(``cudaLaunchKernelExC`` for NCCL >= 2.19) + ``ac2g`` flows, NCCL kernels ``ncclDevKernel_*``
(>= 2.19) or ``ncclKernel_*``, ``record_param_comms`` with the collective metadata
(``with_args``), ``distributedInfo`` with the process groups.  NCCL debug logs: one file per
process named as ``NCCL_DEBUG_FILE=%h.%p`` writes (``log_layout="proc"``, ``<host>.<pid>``) or one
capture per host (``"host"``, ``nccl.<host>.<pid>.log``, the lines of all local ranks interleaved,
optionally behind torchrun's ``[defaultN]:`` prefix), for every host or only ``log_hosts``.
Format by version: bracket = busId hex before 2.18.3, nvmlDev index after; ``Using non-device net
plugin``, ``cudaDriverVersion``, ``nRanks nNodes localRanks`` and ``P2P/CUMEM`` from 2.19;
``ncclCommInitRank comm ... Init START`` from 2.21.5; ``GPU Direct RDMA ... for GPU <busId>`` before
2.19, ``for GPU <rank>`` after.  Healthy jobs carry red herrings: bootstrap over Ethernet in IB
jobs, env echoes, a harmless CollNet WARN.

Randomness: ``default_rng([seed, rank])`` per rank for the simulation (the same draws with the
fault on or off), ``default_rng(seed + 7)`` for ids, pids, clocks and line order.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from ddp_sim import write_text  # the same gzip writer (header time 0): bytes depend only on the text

__all__ = ["Cfg", "simulate", "write_bundle"]

# ---------------------------------------------------------------------------------------------
# kernel names
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas"
GEMM_NN = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize256x128x64_warpgroupsize2x1x1_execute_segment_k_off_"
           "kernel__5x_cublas")
ATTN_F = ("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
          "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, "
          "false, false, false, true, false, false>(pytorch_flash::Flash_fwd_params)")
ATTN_B = ("void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<pytorch_flash::Flash_bwd_kernel_traits<128, 64, "
          "128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 64, 128, 8, "
          "cutlass::bfloat16_t> >, false, true, false, false, false, true, false, false>(pytorch_flash::Flash_bwd_params)")
ACT = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
       "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::"
       "{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl("
       "at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() "
       "const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)")
ACT_B = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, "
         "c10::basic_string_view<char>)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::"
         "{lambda(c10::BFloat16, c10::BFloat16)#1}, at::detail::Array<char*, 3> >(int, at::native::"
         "GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, c10::basic_string_view<char>)::{lambda()#2}::operator()() "
         "const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, at::detail::Array<char*, 3>)")
LOSS = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, float, "
        "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, c10::BFloat16 const*, int)")
ADAM = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
        "TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, "
        "(at::native::ADAM_MODE)1, false>, float*, double, float*, double, double, double, double, double, bool, float*, "
        "float*>(at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::"
        "FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, float*, double, float*, double, double, "
        "double, double, double, bool, float*, float*)")

# (cpu op, kernel, share of the layer's forward time)
FWD = [("aten::linear", GEMM, 0.34), ("aten::_scaled_dot_product_flash_attention", ATTN_F, 0.30),
       ("aten::linear", GEMM, 0.24), ("aten::gelu", ACT, 0.12)]
BWD = [("autograd::engine::evaluate_function: GeluBackward0", ACT_B, 0.22),
       ("autograd::engine::evaluate_function: AddmmBackward0", GEMM_NN, 0.62),
       ("autograd::engine::evaluate_function: ScaledDotProductFlashAttentionBackward0", ATTN_B, 0.66),
       ("autograd::engine::evaluate_function: AddmmBackward0", GEMM_NN, 0.50)]

COLL = {"allreduce": ("AllReduce", "nccl:all_reduce", "allreduce"),
        "allgather": ("AllGather", "nccl:_all_gather_base", "_allgather_base"),
        "reducescatter": ("ReduceScatter", "nccl:_reduce_scatter_base", "_reduce_scatter_base")}

BUSIDS = {8: ["18000", "2a000", "3a000", "5d000", "9a000", "ab000", "ba000", "db000"],
          4: ["1b000", "3d000", "8a000", "b2000"]}

NEW_VERSIONS = ("2.19.3", "2.20.5", "2.21.5")


@dataclass
class Cfg:
    name: str = ""
    seed: int = 0
    mode: str = "ddp"              # ddp | fsdp | hsdp | tp
    nodes: int = 2
    gpn: int = 8
    steps: int = 5
    first_step: int = 10
    layers: int = 8
    layer_ms: float = 1.6          # forward time of one layer; backward is ~2.3x
    grad_mb: float = 48.0          # bf16 gradient bytes per layer (MB)
    bucket_layers: int = 2         # DDP: one bucket every this many layers
    act_mb: float = 24.0           # TP all-reduce payload (MB)
    dp_buckets: int = 4            # TP: DP all-reduces after backward
    # hardware
    nics: int | None = None        # per host; default gpn // 2
    nic_gbps: float = 200.0
    rdma_eff: float = 0.85
    nvl_bw: float = 150e9          # intra-host bus bandwidth with P2P/NVLink (bytes/s)
    socket_gbs: float = 3.0        # per-host bandwidth of the Socket transport (GB/s)
    link: str = "IB"               # IB | RoCE
    # fault
    scenario: str = "healthy"      # healthy | socket | gdr_off | nic_degraded | p2p_off | cross_socket | straggler
    factor: float = 0.5
    culprit_host: int = 0
    culprit_rank: int = 0
    # trace format
    nccl: str = "2.21.5"
    cuda: str = "12.4"
    with_args: bool = True
    float_ts: bool = True
    naming: str = "tb"             # tb | rank
    hostfmt: str = "gpu-node-{:02d}"
    clock_ms: float = 4.0
    gz: bool = False
    # log format
    log_hosts: list[int] | None = None   # None = every host
    log_layout: str = "proc"             # proc | host
    log_prefix: str = ""                 # "" | torchrun
    subsys: str = "default"              # default | all (adds NET/GRAPH lines)
    env_echo: bool = True                # NCCL_IB_DISABLE / NCCL_P2P_DISABLE echoed when they caused the fault
    warn_kind: str = "async"             # nic_degraded: async | completion | none
    drop_hca: bool = False               # nic_degraded: the bad HCA missing from "NET/IB : Using"
    red_herring: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def nic_count(self) -> int:
        return self.nics if self.nics else max(1, self.gpn // 2)

    @property
    def new(self) -> bool:
        return self.nccl in NEW_VERSIONS

    @property
    def R(self) -> int:
        return self.nodes * self.gpn


# ---------------------------------------------------------------------------------------------
# groups and costs

def groups(c: Cfg) -> dict[str, list[tuple[int, ...]]]:
    R, g = c.R, c.gpn
    return {"world": [tuple(range(R))],
            "host": [tuple(range(h * g, (h + 1) * g)) for h in range(c.nodes)],
            "dp": [tuple(h * g + l for h in range(c.nodes)) for l in range(g)]}


def _inter_bw(c: Cfg, h: int, nbytes: float, fault: bool) -> float:
    bw = c.nic_count * c.nic_gbps / 8 * 1e9 * c.rdma_eff
    if not fault:
        return bw
    s = c.scenario
    if s == "socket":
        return c.socket_gbs * 1e9
    if s == "gdr_off":
        return bw * (c.factor if nbytes >= (1 << 20) else 1 - (1 - c.factor) / 2)
    if s in ("nic_degraded", "cross_socket") and h == c.culprit_host:
        return bw * c.factor
    return bw


def _intra_bw(c: Cfg, h: int, fault: bool) -> float:
    if fault and c.scenario == "p2p_off" and h == c.culprit_host:
        return c.nvl_bw * c.factor
    return c.nvl_bw


def coll_cost(c: Cfg, kind: str, grp: tuple[int, ...], nbytes: float, fault: bool) -> float:
    """Microseconds from the last member's start to the end of the collective (ring)."""
    n = len(grp)
    counts: dict[int, int] = {}
    for r in grp:
        counts[r // c.gpn] = counts.get(r // c.gpn, 0) + 1
    multi = len(counts) > 1
    bw = float("inf")
    for h, k in counts.items():
        if k > 1:
            bw = min(bw, _intra_bw(c, h, fault))
        if multi:
            bw = min(bw, _inter_bw(c, h, nbytes, fault) * k / c.gpn)
    algo = 2 * (n - 1) / n if kind == "allreduce" else (n - 1) / n
    steps = 2 * (n - 1) if kind == "allreduce" else n - 1
    hop = 35.0 if (fault and c.scenario == "socket") else 5.0
    lat = 8.0 + 0.6 * steps + (2 * (len(counts) - 1) * hop if multi else 0.0)
    return nbytes * algo / bw * 1e6 + lat


# ---------------------------------------------------------------------------------------------
# programs

def program(c: Cfg) -> list[tuple[Any, ...]]:
    """One step's ops, the same for every rank.

    ("k", cpu_op, kernel, us, phase)         compute kernel (phase fwd|bwd|opt)
    ("c", kind, gkind, bytes, dep, wait)     collective on group kind; dep: waits for compute;
                                             wait: compute waits for its end right away
    ("w",)                                   compute stream waits for the NCCL stream
    """
    L, lm = c.layers, c.layer_ms * 1000
    grad = c.grad_mb * 1e6
    ops: list[tuple[Any, ...]] = []

    def fwd(tp: bool = False) -> None:
        for i, (op, k, sh) in enumerate(FWD):
            ops.append(("k", op, k, lm * sh, "fwd"))
            if tp and i in (1, 3):
                ops.append(("c", "allreduce", "host", c.act_mb * 1e6, True, True))

    def bwd(tp: bool = False) -> None:
        for i, (op, k, sh) in enumerate(BWD):
            ops.append(("k", op, k, lm * sh * 1.15, "bwd"))
            if tp and i in (1, 3):
                ops.append(("c", "allreduce", "host", c.act_mb * 1e6, True, True))

    if c.mode == "ddp":
        for _ in range(L):
            fwd()
        ops.append(("k", "aten::cross_entropy_loss", LOSS, 350.0, "fwd"))
        for li in range(L):
            bwd()
            if (li + 1) % c.bucket_layers == 0 or li == L - 1:
                ops.append(("c", "allreduce", "world", grad * c.bucket_layers, True, False))
    elif c.mode in ("fsdp", "hsdp"):
        gk = "world" if c.mode == "fsdp" else "host"
        ops.append(("c", "allgather", gk, grad, False, False))
        for li in range(L):
            if li + 1 < L:
                ops.append(("c", "allgather", gk, grad, False, False))
            ops.append(("c0",))  # compute waits for the all-gather of this layer (the one before last)
            fwd()
        ops.append(("k", "aten::cross_entropy_loss", LOSS, 350.0, "fwd"))
        ops.append(("c", "allgather", gk, grad, False, False))
        for li in range(L):
            if li + 1 < L:
                ops.append(("c", "allgather", gk, grad, False, False))
            ops.append(("c0",))
            bwd()
            ops.append(("c", "reducescatter", gk, grad, True, False))
            if c.mode == "hsdp":
                ops.append(("c", "allreduce", "dp", grad / c.gpn, False, False))
    elif c.mode == "tp":
        for _ in range(L):
            fwd(tp=True)
        ops.append(("k", "aten::cross_entropy_loss", LOSS, 350.0, "fwd"))
        for _ in range(L):
            bwd(tp=True)
        for _ in range(c.dp_buckets):
            ops.append(("c", "allreduce", "dp", grad * L / c.gpn / c.dp_buckets, True, False))
    else:
        raise ValueError(c.mode)
    ops.append(("w",))
    ops.append(("k", "Optimizer.step#AdamW.step", ADAM, 900.0 if c.mode != "ddp" else 1400.0, "opt"))
    return ops


def simulate(c: Cfg, fault: bool = True) -> tuple[list[list[tuple[Any, ...]]], float]:
    """Events per rank (true time, us) and the makespan."""
    R, g = c.R, c.gpn
    G = groups(c)
    gid = {k: {r: grp for grp in v for r in grp} for k, v in G.items()}
    rngs = [np.random.default_rng([c.seed, r]) for r in range(R)]
    cpu = np.array([rngs[r].uniform(0, 300) for r in range(R)])
    comp = np.zeros(R)
    comm = np.zeros(R)
    ev: list[list[tuple[Any, ...]]] = [[] for _ in range(R)]
    prog = program(c)
    slow = np.ones(R)
    if fault and c.scenario == "straggler":
        slow[c.culprit_rank] = 1 + c.factor
    t0 = cpu.min()
    for s in range(c.steps):
        n = c.first_step + s
        st0 = cpu.copy()
        for r in range(R):
            d = rngs[r].uniform(900, 1500)
            ev[r].append(("cpu", "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "user_annotation",
                          cpu[r] + 5, d))
            cpu[r] += d + 10
            lt = cpu[r] + 8
            st = max(lt + 6, comp[r])
            ev[r].append(("h2d", cpu[r], lt, st, 180.0))
            comp[r] = st + 180.0
            cpu[r] += 30
        pend: list[np.ndarray] = []   # all-gather ends not yet waited on (FSDP)
        bwd_started = False
        for op in prog:
            k = op[0]
            if k == "k":
                _, cop, kn, us, ph = op
                if ph == "bwd" and not bwd_started:
                    bwd_started = True
                    for r in range(R):
                        ev[r].append(("cpu", "aten::backward", "cpu_op", cpu[r], 40.0))
                        cpu[r] += 45
                if ph == "opt":
                    for r in range(R):
                        ev[r].append(("cpu", "aten::_foreach_add_", "cpu_op", cpu[r], 20.0))
                for r in range(R):
                    lc = rngs[r].uniform(15, 35)
                    dur = us * slow[r] * float(np.exp(rngs[r].normal(0, 0.02)))
                    lt = cpu[r] + lc * 0.4
                    st = max(lt + 5, comp[r])
                    ev[r].append(("k", cop, kn, cpu[r], lc, lt, st, dur, ph))
                    comp[r] = st + dur
                    cpu[r] += lc + 2
            elif k == "c":
                _, kind, gk, nbytes, dep, wait = op
                starts = np.zeros(R)
                lts = np.zeros(R)
                for r in range(R):
                    lc = rngs[r].uniform(25, 45)
                    lts[r] = cpu[r] + lc * 0.6
                    starts[r] = max(lts[r] + 6, comm[r], comp[r] if dep else 0.0)
                ends = np.zeros(R)
                for grp in G[gk]:
                    idx = list(grp)
                    base = starts[idx].max() + coll_cost(c, kind, grp, nbytes, fault)
                    for r in grp:
                        ends[r] = base + rngs[r].uniform(0, 4)
                for r in range(R):
                    grp = gid[gk][r]
                    ev[r].append(("c", kind, gk, grp, nbytes, cpu[r], lts[r], starts[r], ends[r] - starts[r], wait))
                    comm[r] = ends[r]
                    cpu[r] += 48
                    if wait:
                        ev[r].append(("cpu", "cudaStreamWaitEvent", "cuda_runtime", cpu[r], 3.0))
                        comp[r] = max(comp[r], ends[r])
                        cpu[r] += 5
                if kind == "allgather" and not wait:
                    pend.append(ends.copy())
            elif k == "c0":
                e = pend.pop(0)
                for r in range(R):
                    ev[r].append(("cpu", "cudaStreamWaitEvent", "cuda_runtime", cpu[r], 3.0))
                    comp[r] = max(comp[r], e[r])
                    cpu[r] += 5
            elif k == "w":
                for r in range(R):
                    ev[r].append(("cpu", "cudaStreamWaitEvent", "cuda_runtime", cpu[r], 3.0))
                    comp[r] = max(comp[r], comm[r])
                    cpu[r] += 5
        for r in range(R):
            # loss.item(): the CPU waits for the GPU
            ev[r].append(("sync", cpu[r], max(comp[r] - cpu[r], 2.0)))
            cpu[r] = max(cpu[r], comp[r]) + 25
            ev[r].append(("step", n, st0[r], cpu[r] - st0[r]))
            cpu[r] += rngs[r].uniform(20, 60)
    return ev, float(cpu.max() - t0)


# ---------------------------------------------------------------------------------------------
# Kineto writer

def nccl_kernel(c: Cfg, kind: str, nbytes: float) -> str:
    proto = "LL" if nbytes < (64 << 10) else ("LL128" if nbytes < (8 << 20) else "SIMPLE")
    op = COLL[kind][0]
    if c.new:
        if kind == "allgather":
            return "ncclDevKernel_AllGather_RING_%s(ncclDevKernelArgsStorage<4096ul>)" % proto
        return "ncclDevKernel_%s_Sum_bf16_RING_%s(ncclDevKernelArgsStorage<4096ul>)" % (op, proto)
    if kind == "allgather":
        return "ncclKernel_AllGather_RING_%s_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)" % proto
    return "ncclKernel_%s_RING_%s_Sum_bfloat16(ncclDevComm*, unsigned long, ncclWork*)" % (op, proto)


def pg_names(c: Cfg) -> dict[tuple[int, ...], tuple[str, str]]:
    out: dict[tuple[int, ...], tuple[str, str]] = {tuple(range(c.R)): ("0", "default_pg")}
    G = groups(c)
    i = 1
    if c.mode in ("hsdp", "tp"):
        for grp in G["host"]:
            out[grp] = (str(i), "intra_node_group" if c.mode == "hsdp" else "tensor_parallel")
            i += 1
        for grp in G["dp"]:
            out[grp] = (str(i), "inter_node_group" if c.mode == "hsdp" else "data_parallel")
            i += 1
    return out


def write_trace(c: Cfg, r: int, evs: list[tuple[Any, ...]], pid: int, off: float, hosts: list[str],
                rng: np.random.Generator, outdir: str, pgs: dict[tuple[int, ...], tuple[str, str]]) -> str:
    lr = r % c.gpn
    tid_main, tid_bwd = pid, pid + 117 + lr
    nccl_stream = 28 if c.new else 20
    # ProcessGroupNCCL gives each process group (communicator) its own stream on the device
    # (numbered in the order the rank's groups are named, as each process creates them)
    mine = sorted((g for g in pgs if r in g), key=lambda g: pgs[g][0])
    pg_stream = {g: nccl_stream + 4 * i for i, g in enumerate(mine)}
    if c.float_ts:
        def T(x: float) -> float | int:
            return round(x + off, 3)

        def D(x: float) -> float | int:
            return round(max(x, 0.001), 3)
    else:
        def T(x: float) -> float | int:
            return int(round(x + off))

        def D(x: float) -> float | int:
            return max(1, int(round(x)))
    out: list[dict[str, Any]] = []
    ext = [1]
    corr = [5000 + 3 * r]
    bwd_mode = [False]

    def cpu(name: str, cat: str, ts: float, dur: float, tid: int, args: dict[str, Any] | None = None) -> int:
        a: dict[str, Any] = {"External id": ext[0], "Record function id": ext[0], "Ev Idx": ext[0] - 1}
        if args:
            a.update(args)
        ext[0] += 1
        out.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": T(ts), "dur": D(dur), "args": a})
        return a["External id"]

    def launch(name: str, ts: float, dur: float, tid: int, x: int, cbid: int) -> int:
        cc = corr[0]
        corr[0] += 4
        out.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": tid, "ts": T(ts), "dur": D(dur),
                    "args": {"External id": x, "cbid": cbid, "correlation": cc}})
        out.append({"ph": "s", "id": cc, "pid": pid, "tid": tid, "ts": T(ts), "cat": "ac2g", "name": "ac2g"})
        return cc

    def gpu(cat: str, name: str, ts: float, dur: float, stream: int, x: int, cc: int,
            extra: dict[str, Any] | None = None) -> None:
        a: dict[str, Any] = {"External id": x, "queued": 0, "device": lr, "context": 1, "stream": stream,
                             "correlation": cc}
        if cat == "kernel":
            a.update({"registers per thread": 128, "shared memory": 65536, "blocks per SM": 1.0,
                      "warps per SM": 8.0, "grid": [132, 1, 1], "block": [256, 1, 1], "est. achieved occupancy %": 12})
        if extra:
            a.update(extra)
        out.append({"ph": "X", "cat": cat, "name": name, "pid": lr, "tid": stream, "ts": T(ts), "dur": D(dur), "args": a})
        out.append({"ph": "f", "id": cc, "pid": lr, "tid": stream, "ts": T(ts), "cat": "ac2g", "name": "ac2g", "bp": "e"})

    t_first, t_last = None, 0.0
    for e in evs:
        k = e[0]
        tid = tid_bwd if bwd_mode[0] else tid_main
        if k == "step":
            _, n, ts, dur = e
            cpu("ProfilerStep#%d" % n, "user_annotation", ts, dur, tid_main)
            t_first = ts if t_first is None else t_first
            t_last = ts + dur
            bwd_mode[0] = False
        elif k == "cpu":
            _, name, cat, ts, dur = e
            if name == "aten::backward":
                cpu(name, cat, ts, dur, tid_main)
                bwd_mode[0] = True
                continue
            if name == "aten::_foreach_add_":
                bwd_mode[0] = False
                continue
            if cat == "cuda_runtime":
                out.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": tid, "ts": T(ts),
                            "dur": D(dur), "args": {"External id": 0, "cbid": 147, "correlation": corr[0]}})
                corr[0] += 1
            else:
                cpu(name, cat, ts, dur, tid)
        elif k == "h2d":
            _, ts, lt, st, dur = e
            x = cpu("aten::copy_", "cpu_op", ts, 26, tid_main)
            cc = launch("cudaMemcpyAsync", lt, 9, tid_main, x, 41)
            gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", st, dur, 7, x, cc,
                {"bytes": 50331648, "memory bandwidth (GB/s)": round(50331648 / dur / 1e3, 3)})
        elif k == "k":
            _, cop, kn, ts, lc, lt, st, dur, ph = e
            if ph == "opt":
                x = cpu(cop, "user_annotation", ts, lc, tid_main)
                x = cpu("aten::_fused_adamw_", "cpu_op", ts + 1, lc - 2, tid_main)
                cc = launch("cudaLaunchKernel", lt, 6, tid_main, x, 211)
            else:
                x = cpu(cop, "cpu_op", ts, lc, tid)
                cc = launch("cudaLaunchKernel", lt, 5, tid, x, 211)
            gpu("kernel", kn, st, dur, 7, x, cc)
        elif k == "c":
            _, kind, gk, grp, nbytes, ts, lt, st, dur, wait = e
            _, ann, cname = COLL[kind]
            n = len(grp)
            elems = int(nbytes // 2)
            if kind == "allgather":
                nin, nout = elems // n, elems
            elif kind == "reducescatter":
                nin, nout = elems, elems // n
            else:
                nin = nout = elems
            pgn, pgd = pgs[grp]
            cargs: dict[str, Any] = {}
            if c.with_args:
                cargs = {"Collective name": cname, "In msg nelems": nin, "Out msg nelems": nout, "Group size": n,
                         "dtype": "BFloat16", "In split size": "[]", "Out split size": "[]",
                         "Process Group Name": pgn, "Process Group Description": pgd,
                         "Process Group Ranks": "[" + ", ".join(str(i) for i in grp) + "]"}
            xa = cpu(ann, "user_annotation", ts, 44, tid)
            x = cpu("record_param_comms", "cpu_op", ts + 2, 38, tid,
                    dict(cargs, **{"Global rank start": 0, "Global rank stride": 1}) if c.with_args else None)
            cc = launch("cudaLaunchKernelExC" if c.new else "cudaLaunchKernel", lt, 9, tid, x, 430 if c.new else 211)
            gpu("kernel", nccl_kernel(c, kind, nbytes), st, dur, pg_stream[grp], x, cc, cargs)
            out.append({"ph": "X", "cat": "gpu_user_annotation", "name": ann, "pid": lr, "tid": pg_stream[grp],
                        "ts": T(st - 0.8), "dur": D(dur + 1.2), "args": {"External id": xa}})
        elif k == "sync":
            _, ts, dur = e
            x = cpu("aten::item", "cpu_op", ts, dur + 6, tid_main)
            cpu("aten::_local_scalar_dense", "cpu_op", ts + 1, dur + 4, tid_main)
            out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": pid, "tid": tid_main,
                        "ts": T(ts + 2), "dur": D(dur), "args": {"External id": x, "cbid": 131, "correlation": corr[0]}})
            corr[0] += 1
    assert t_first is not None
    m = T(t_first - 400)
    meta: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "ts": m, "pid": pid, "tid": 0, "args": {"name": "python3"}},
        {"name": "process_labels", "ph": "M", "ts": m, "pid": pid, "tid": 0, "args": {"labels": "CPU"}},
        {"name": "process_name", "ph": "M", "ts": m, "pid": lr, "tid": 0, "args": {"name": "python3"}},
        {"name": "process_labels", "ph": "M", "ts": m, "pid": lr, "tid": 0, "args": {"labels": "GPU %d" % lr}},
        {"name": "thread_name", "ph": "M", "ts": m, "pid": lr, "tid": 7, "args": {"name": "stream 7 "}},
        *({"name": "thread_name", "ph": "M", "ts": m, "pid": lr, "tid": st,
           "args": {"name": "stream %d " % st}} for st in sorted(set(pg_stream.values()))),
        {"name": "thread_name", "ph": "M", "ts": m, "pid": pid, "tid": tid_main,
         "args": {"name": "thread %d (pt_main_thread)" % tid_main}},
        {"name": "thread_name", "ph": "M", "ts": m, "pid": pid, "tid": tid_bwd,
         "args": {"name": "thread %d (pt_autograd_0)" % tid_bwd}}]
    out.sort(key=lambda ev: (ev["ts"], ev["ph"] != "X"))
    pgc = [{"pg_name": pn, "pg_desc": pd, "backend_config": "cuda:nccl", "pg_size": len(grp), "ranks": list(grp)}
           for grp, (pn, pd) in sorted(pgs.items(), key=lambda x: int(x[1][0])) if r in grp]
    gpu_name = "NVIDIA H100 80GB HBM3" if c.gpn == 8 else "NVIDIA A100-SXM4-80GB"
    trace: dict[str, Any] = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": i, "name": gpu_name, "totalGlobalMem": 85029158912, "computeMajor": 9 if c.gpn == 8 else 8,
                              "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
                              "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
                              "numSms": 132 if c.gpn == 8 else 108, "regsPerMultiprocessor": 65536,
                              "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472}
                             for i in range(c.gpn)],
        "distributedInfo": {"backend": "nccl", "rank": r, "world_size": c.R, "pg_count": len(pgc), "pg_config": pgc,
                            "nccl_version": c.nccl},
        "record_shapes": 0,
        "traceEvents": meta + out + [
            {"ph": "X", "cat": "Trace", "ts": T(t_first - 800), "dur": D(t_last - t_first + 1600), "pid": "Spans",
             "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}},
            {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": T(t_last + 900)}],
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": 1_730_000_000_000_000_000 + c.seed * 10**12,
        "traceName": "/tmp/trace_%d.json" % r,
    }
    if c.naming == "rank":
        fn = "rank%d.pt.trace.json" % r
    else:
        ms = 1_730_000_000_000 + c.seed * 10**6 + int(rng.integers(0, 90_000))
        fn = "%s_%d.%d.pt.trace.json" % (hosts[r // c.gpn], pid, ms)
    return write_text(os.path.join(outdir, fn), json.dumps(trace), c.gz)


# ---------------------------------------------------------------------------------------------
# NCCL log writer

class _Comm:
    def __init__(self, ranks: tuple[int, ...], rng: np.random.Generator, nch: int):
        self.ranks = ranks
        self.comm_id = "0x%016x" % int(rng.integers(1 << 60, 1 << 63))
        self.ptr = {r: "0x%x" % int(rng.integers(0x55d000000000, 0x55ffffffffff)) for r in ranks}
        self.nch = nch


def write_logs(c: Cfg, hosts: list[str], pids: list[int], rng: np.random.Generator, outdir: str) -> list[str]:
    R, g, nics = c.R, c.gpn, c.nic_count
    s, ch = c.scenario, c.culprit_host
    new = c.new
    bus = BUSIDS[g]
    ips = ["10.%d.%d.%d" % (20 + h // 200, h % 200 + 1, 11 + h) for h in range(c.nodes)]
    sock = s == "socket"

    def br(l: int) -> str:
        return str(l) if new else bus[l]

    def nic_of(l: int) -> int:
        return l * nics // g

    dropped = s == "nic_degraded" and c.drop_hca and nics > 1
    bad = nic_of(c.culprit_rank % g)
    avail = [j for j in range(nics) if j != bad]

    def dev_of(h: int, l: int) -> int:
        """NET device index as the host's own ``NET/IB : Using`` list numbers it."""
        d = nic_of(l)
        if not (dropped and h == ch):
            return d
        if d == bad:
            d = avail[min(bad, len(avail) - 1)]
        return avail.index(d)

    def gdr_on(h: int) -> bool:
        return not sock and s != "gdr_off" and not (s == "cross_socket" and h == ch)

    def p2p_str(h: int) -> str:
        if s == "p2p_off" and h == ch:
            return "SHM/direct/direct"
        return "P2P/CUMEM/read" if new else "P2P/IPC/read"

    def net_str(h: int, l: int) -> str:
        if sock:
            return "NET/Socket/0"
        return "NET/IB/%d%s" % (dev_of(h, l), "/GDRDMA" if gdr_on(h) else "")

    # lines[r] = list of (phase, tid_kind, text, level)
    lines: dict[int, list[tuple[float, str, str]]] = {r: [] for r in range(R)}
    tids = {r: {"main": pids[r], "init": pids[r] + 60 + int(rng.integers(0, 40)),
                "async": pids[r] + 3 + (r % g), "proxy": pids[r] + 140 + int(rng.integers(0, 40))} for r in range(R)}

    def add(r: int, phase: float, tk: str, msg: str, warn_src: str | None = None) -> None:
        lines[r].append((phase, tk, (warn_src + " NCCL WARN " + msg) if warn_src else ("NCCL INFO " + msg)))

    ibdev_list = ["[%d]mlx5_%d:1/%s" % (i, i, c.link) for i in range(nics)]
    hca_env = "mlx5"
    for r in range(R):
        h, l = divmod(r, g)
        add(r, 0.0, "main", "Bootstrap : Using eth0:%s<0>" % ips[h])
        if new:
            add(r, 0.1, "main", "cudaDriverVersion 12040")
            add(r, 0.2, "main", "NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or "
                "directory No plugin found (libnccl-net.so), using internal implementation")
        else:
            add(r, 0.2, "main", "NET/Plugin : No plugin found (libnccl-net.so), using internal implementation")
        add(r, 0.05, "main", "NCCL_SOCKET_IFNAME set by environment to eth0")
        if not sock:
            add(r, 0.06, "main", "NCCL_IB_HCA set by environment to %s" % hca_env)
        if c.red_herring and r % g == 0:
            add(r, 0.07, "main", "NCCL_ALGO set by environment to Ring,CollNet")
        if sock and c.env_echo:
            add(r, 0.06, "main", "NCCL_IB_DISABLE set by environment to 1.")
        if s == "p2p_off" and h == ch and c.env_echo:
            add(r, 0.06, "main", "NCCL_P2P_DISABLE set by environment to 1")
        if r == 0:
            add(r, 0.3, "main", "NCCL version %s+cuda%s" % (c.nccl, c.cuda))
        if sock:
            if not c.env_echo:
                add(r, 0.4, "init", "Failed to open libibverbs.so[.1]")
            add(r, 0.41, "init", "NET/Socket : Using [0]eth0:%s<0>" % ips[h])
        else:
            devs = list(ibdev_list)
            if dropped and h == ch:
                devs = ["[%d]%s" % (i, ibdev_list[j].split("]", 1)[1]) for i, j in enumerate(avail)]
            add(r, 0.41, "init", "NET/IB : Using %s [RO]; OOB eth0:%s<0>" % (" ".join(devs), ips[h]))
        if new:
            add(r, 0.42, "init", "Using non-device net plugin version 0")
        add(r, 0.43, "init", "Using network %s" % ("Socket" if sock else "IB"))

    # communicators: world, and for hsdp / tp the intra-host and cross-host groups
    comms: list[tuple[str, _Comm]] = []
    multi_nch = min(16, 2 * nics)
    comms.append(("world", _Comm(tuple(range(R)), rng, multi_nch if c.nodes > 1 else 16)))
    if c.mode in ("hsdp", "tp"):
        for grp in groups(c)["host"]:
            hh = grp[0] // g
            comms.append(("host", _Comm(grp, rng, 4 if (s == "p2p_off" and hh == ch) else 16)))
        for grp in groups(c)["dp"]:
            comms.append(("dp", _Comm(grp, rng, 2)))

    for ci, (kind, cm) in enumerate(comms):
        base = 1.0 + ci
        n = len(cm.ranks)
        pos = {r: i for i, r in enumerate(cm.ranks)}
        nhost = len({r // g for r in cm.ranks})
        for r in cm.ranks:
            h, l = divmod(r, g)
            cr = pos[r]
            head = "ncclCommInitRank " if c.nccl >= "2.21.5" else ""
            ident = "comm %s rank %d nranks %d cudaDev %d nvmlDev %d busId %s commId %s" % (
                cm.ptr[r], cr, n, l, l, bus[l], cm.comm_id)
            add(r, base, "init", head + ident + " - Init START")
            if ci == 0:
                mask = "ffffffff,00000000,ffffffff,00000000" if l >= g // 2 else "00000000,ffffffff,00000000,ffffffff"
                add(r, base + 0.01, "init", "Setting affinity for GPU %d to %s" % (l, mask))
                if c.subsys == "all" and not sock:
                    for nd in sorted({dev_of(h, l)}):
                        if gdr_on(h):
                            dist = "(distance 4 <= 5), read 1"
                            who = str(cr) if new else bus[l]
                            add(r, base + 0.02, "init", "GPU Direct RDMA Enabled for GPU %s / HCA %d %s" % (who, nd, dist))
                        else:
                            who = str(cr) if new else bus[l]
                            dd = "(distance 8 > 5)" if new else "(distance 7 > 5)"
                            if s == "gdr_off":
                                add(r, base + 0.02, "init", "NET/IB : GPU Direct RDMA Disabled for HCA %d 'mlx5_%d'"
                                    % (nd, nd))
                            else:
                                add(r, base + 0.02, "init", "GPU Direct RDMA Disabled for GPU %s / HCA %d %s"
                                    % (who, nd, dd))
                    if l == 0:
                        ptype = "SYS" if (s == "cross_socket" and h == ch) else "PXB"
                        intra = "SHM" if (s == "p2p_off" and h == ch) else "NVL"
                        bw_i = "%.6f" % (20.0 if intra == "SHM" else 40.0)
                        add(r, base + 0.03, "init", "Pattern 4, crossNic 0, nChannels %d, bw %s/%s, type %s/%s, "
                            "sameChannels 1" % (cm.nch // 2, bw_i, "12.000000" if ptype == "SYS" else "24.000000",
                                                intra, ptype))
                        add(r, base + 0.031, "init", "GPU/%s :GPU/%s (0/5000.000000/LOC) NET/%d (%d/%s/%s)"
                            % (bus[0].upper(), bus[0].upper(), 0, 5 if ptype == "SYS" else 3,
                               "12.000000" if ptype == "SYS" else "24.000000", ptype))
                if new:
                    add(r, base + 0.04, "init", "comm %s rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL 0"
                        % (cm.ptr[r], cr, n, c.nodes, g, l))
            # trees: chain inside the host, host roots chained
            loc = [x for x in cm.ranks if x // g == h]
            li = loc.index(r)
            child = pos[loc[li + 1]] if li + 1 < len(loc) else -1
            if li > 0:
                parent = pos[loc[li - 1]]
            else:
                hs = sorted({x // g for x in cm.ranks})
                hi = hs.index(h)
                parent = pos[[x for x in cm.ranks if x // g == hs[hi - 1]][0]] if hi > 0 else -1
            downs = [child]
            if li == 0:
                hs = sorted({x // g for x in cm.ranks})
                hi = hs.index(h)
                if hi + 1 < len(hs):
                    downs.append(pos[[x for x in cm.ranks if x // g == hs[hi + 1]][0]])
            dn = "/".join(str(x) for x in (downs + [-1, -1, -1])[:3])
            add(r, base + 0.05, "init", "Trees " + " ".join("[%d] %s->%d->%d" % (t, dn, cr, parent)
                                                           for t in range(cm.nch)))
            if new:
                add(r, base + 0.06, "init", "P2P Chunksize set to 524288")
            if cr == 0:
                for chn in range(cm.nch):
                    order = _ring(cm, chn, g)
                    shown = [pos[x] for x in order][:20]
                    add(r, base + 0.04, "init", "Channel %02d/%02d : %s" % (chn, cm.nch, "".join("%4d" % x for x in shown)))
        # connections
        for chn in range(cm.nch):
            order = _ring(cm, chn, g)
            for i, a in enumerate(order):
                b = order[(i + 1) % len(order)]
                if a == b:
                    continue
                ha, hb = a // g, b // g
                pa, pb = pos[a], pos[b]
                tag = "Channel %02d/0 : %d[%s] -> %d[%s]" % (chn, pa, br(a % g), pb, br(b % g))
                if ha == hb:
                    add(a, base + 0.2, "init", "%s via %s" % (tag, p2p_str(ha)))
                else:
                    add(a, base + 0.2, "init", "%s [send] via %s" % (tag, net_str(ha, a % g)))
                    add(b, base + 0.2, "init", "%s [receive] via %s" % (tag, net_str(hb, b % g)))
        for r in cm.ranks:
            h, l = divmod(r, g)
            add(r, base + 0.3, "init", "Connected all rings")
            if nhost > 1 or n > 2:
                add(r, base + 0.31, "init", "Connected all trees")
            if c.red_herring and kind == "world" and r % g == 0:
                add(r, base + 0.32, "init", "CollNet is not supported or fails to initialize, ignoring NCCL_ALGO=Ring,CollNet",
                    warn_src="graph/tuning.cc:%d" % (236 if new else 187))
            thr = "8/8/64 | %d/8/64 | 512 | 512" % (8 * n)
            add(r, base + 0.33, "init", "threadThresholds %s" % thr)
            if new:
                add(r, base + 0.34, "init", "%d coll channels, 0 collnet channels, 0 nvls channels, %d p2p channels, "
                    "%d p2p channels per peer" % (cm.nch, cm.nch, 2))
            else:
                add(r, base + 0.34, "init", "%d coll channels, 0 nvls channels, %d p2p channels, %d p2p channels per peer"
                    % (cm.nch, cm.nch, 2))
            head = "ncclCommInitRank " if c.nccl >= "2.21.5" else ""
            add(r, base + 0.4, "init", head + "comm %s rank %d nranks %d cudaDev %d nvmlDev %d busId %s commId %s - "
                "Init COMPLETE" % (cm.ptr[r], pos[r], n, l, l, bus[l], cm.comm_id))

    # faults that show up while the job runs
    if s == "nic_degraded" and c.warn_kind != "none":
        for r in range(ch * g, (ch + 1) * g):
            l = r % g
            dev = nic_of(l)
            if c.warn_kind == "async":
                if r % g == 0 or (nics > 1 and nic_of(l) == nic_of(c.culprit_rank % g)):
                    for j, what in enumerate(("port error", "port active", "port error")):
                        if c.new:
                            add(r, 50 + j, "async", "NET/IB : mlx5_%d:1 Got async event : %s" % (dev, what),
                                warn_src="transport/net_ib.cc:%d" % 124)
                        else:
                            add(r, 50 + j, "async", "NET/IB : Got async event : %s" % what,
                                warn_src="transport/net_ib.cc:%d" % 97)
            elif c.warn_kind == "completion" and l == c.culprit_rank % g:
                peer = ips[(ch + 1) % c.nodes]
                port = 40000 + int(rng.integers(0, 20000))
                if c.new:
                    add(r, 50, "proxy", "NET/IB : Got completion from peer %s<%d> with status=12 opcode=0 len=0 vendor "
                        "err 129 (Recv) localGid ::ffff:%s remoteGids::ffff:%s" % (peer, port, ips[ch], peer),
                        warn_src="transport/net_ib.cc:1696")
                    for src in ("transport/net.cc:1302 -> 6", "proxy.cc:698 -> 6", "proxy.cc:878 -> 6 [Progress Thread]"):
                        add(r, 50.1, "proxy", src)
                else:
                    add(r, 50, "proxy", "NET/IB : Got completion from peer %s<%d> with error 12, opcode 0, len 0, vendor "
                        "err 129 (Recv)" % (peer, port), warn_src="transport/net_ib.cc:1295")
                    for src in ("transport/net.cc:1008 -> 6", "proxy.cc:679 -> 6", "proxy.cc:858 -> 6 [Proxy Thread]"):
                        add(r, 50.1, "proxy", src)

    # files
    paths: list[str] = []
    keep = range(c.nodes) if c.log_hosts is None else c.log_hosts
    for h in keep:
        ranks = list(range(h * g, (h + 1) * g))
        rows: list[tuple[float, float, int, str]] = []
        for r in ranks:
            for i, (ph, tk, txt) in enumerate(lines[r]):
                rows.append((ph, float(rng.uniform(0, 0.009)) + i * 1e-6, r, "%s:%d:%d [%d] %s" % (
                    hosts[h], pids[r], tids[r][tk], r % g, txt)))
        if c.log_layout == "proc":
            for r in ranks:
                mine = sorted((x for x in rows if x[2] == r), key=lambda x: (x[0], x[1]))
                text = "".join(("\n" if " NCCL WARN " in t else "") + t + "\n" for _, _, _, t in mine)
                p = os.path.join(outdir, "%s.%d" % (hosts[h], pids[r]))
                with open(p, "w") as f:
                    f.write(text)
                paths.append(p)
        else:
            rows.sort(key=lambda x: (x[0], x[1]))
            pre = (lambda r: "[default%d]:" % (r % g)) if c.log_prefix == "torchrun" else (lambda r: "")
            text = "".join(("%s\n" % pre(r) if " NCCL WARN " in t else "") + pre(r) + t + "\n" for _, _, r, t in rows)
            p = os.path.join(outdir, "nccl.%s.%d.log" % (hosts[h], pids[h * g]))
            with open(p, "w") as f:
                f.write(text)
            paths.append(p)
    return paths


def _ring(cm: _Comm, chn: int, g: int) -> list[int]:
    """Ring order of channel ``chn``: hosts in order, each host entered at a rotating local GPU."""
    by_host: dict[int, list[int]] = {}
    for r in cm.ranks:
        by_host.setdefault(r // g, []).append(r)
    order: list[int] = []
    for h in sorted(by_host):
        loc = by_host[h]
        k = len(loc)
        st = (chn * 2) % k if len(by_host) > 1 and k > 1 else 0
        if chn % 2 == 1 and k > 2:
            loc = loc[::-1]
        order += [loc[(st + i) % k] for i in range(k)]
    return order


# ---------------------------------------------------------------------------------------------

def write_bundle(c: Cfg, outdir: str) -> dict[str, Any]:
    """Write the bundle into ``outdir`` (replaced): ``paths``, makespans and ``lost_frac``."""
    ev, T = simulate(c, True)
    _, T0 = simulate(c, False)
    rng = np.random.default_rng(c.seed + 7)
    hosts = [c.hostfmt.format(h + 1) for h in range(c.nodes)]
    if os.path.exists(outdir):
        shutil.rmtree(outdir)
    os.makedirs(outdir)
    pids = [int(rng.integers(20000, 3_900_000)) for _ in range(c.R)]
    host_off = rng.uniform(-c.clock_ms, c.clock_ms, c.nodes) * 1000.0
    mono0 = float(rng.integers(2_000_000, 8_000_000)) * 1e6
    pgs = pg_names(c)
    paths = [write_trace(c, r, ev[r], pids[r], mono0 + host_off[r // c.gpn], hosts, rng, outdir, pgs)
             for r in range(c.R)]
    paths += write_logs(c, hosts, pids, rng, outdir)
    return {"paths": paths, "lost_frac": (T - T0) / T, "makespan_fault_us": T, "makespan_healthy_us": T0}


def healthy_twin(c: Cfg) -> Cfg:
    return replace(c, scenario="healthy")
