"""Simulator #5: realistic nuisances of real clusters (``n5_*`` bundles, see README.md).

Written by a fifth reviewer who read neither ``stallscope/`` nor its samples nor the other
simulators' physics; it imports only ``ddp_sim.write_text`` (plain or gzipped trace, header time 0).

A DDP, FSDP or TP+DP step loop on 8-64 GPUs (4 or 8 per host), simulated op by op for all ranks
at once: each rank has a CPU clock (main thread, autograd thread in backward) and in-order GPU
streams (compute, one NCCL stream per process group). A collective starts on a rank at
max(CPU launch, its NCCL stream free, the compute queued before it when it depends on it) and ends
on every member at the last member's start + latency + algorithm factor x bytes / bus bandwidth
(ring, or tree when NCCL's tuner would pick it: whichever is faster). Bus bandwidth is the slowest
link the group crosses: inside a host NVLink (or SHM when P2P is off), across hosts the host's
NICs (count x line rate x 0.85), shared by the concurrent groups of that host in proportion to
the GPUs of the host each group holds.

Nuisances, the same in both twins (they are part of "healthy"): log-normal kernel durations with
a rare heavy tail, a per-step work factor shared by all ranks (sequence length), a small static
per-rank speed spread, Python GC pauses / allocator flushes / DataLoader hiccups on random ranks
at random steps, a slower first profiled step on every rank, host clock offsets, mixed file
naming and gzip, optionally a rank file cut short (killed job); in log bundles bootstrap over
Socket in IB jobs, harmless WARNs, env echoes, and several NCCL versions.

Every random number is drawn whatever the faults, so the healthy twin (same seed, no fault) is
exact and ``lost_frac`` = (makespan - healthy makespan) / makespan.
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ddp_sim import write_text

GPUS = {
    "H100": dict(name="NVIDIA H100 80GB HBM3", mem=85045231616, major=9, minor=0, sms=132, nvlink=360.0, speed=1.0),
    "A100": dict(name="NVIDIA A100-SXM4-80GB", mem=85097971712, major=8, minor=0, sms=108, nvlink=230.0, speed=0.45),
}
BUS_IDS = ["18000", "2a000", "3a000", "5d000", "9a000", "ab000", "ba000", "db000"]


@dataclass
class Cfg:
    name: str = "n5"
    seed: int = 0
    nodes: int = 2
    gpn: int = 8
    mode: str = "ddp"                 # ddp | fsdp | tpdp (TP = the host's GPUs, DP across hosts)
    layers: int = 12
    steps: int = 8                    # profiled steps (the first is a warm-up step)
    first_step: int = 10
    gpu: str = "H100"
    nics: int = 8                     # NICs per host
    nic_gbps: float = 400.0           # line rate per NIC
    layer_ms: float = 4.0             # forward compute of one layer on an H100 (backward 2x)
    grad_mb: float = 200.0            # fp32 gradient of one layer (DDP bucket), FSDP: bf16 params = half
    act_mb: float = 64.0              # TP activation all-reduce size (bf16)
    dl_ms: float = 1.2                # DataLoader next() on a good step
    # nuisances (present in both twins)
    kern_sigma: float = 0.02 
    tail_prob: float = 0.002
    seq_sigma: float = 0.07
    rank_sigma: float = 0.006
    gc_prob: float = 0.015
    gc_ms: float = 14.0
    alloc_prob: float = 0.005
    dl_hiccup_prob: float = 0.008
    dl_hiccup_ms: float = 30.0
    warmup: float = 1.0               # scale of the first step's extra cost (0: none)
    clock_ms: float = 8.0
    # formats
    hostfmt: str = "gpu-node-{:03d}"
    naming: str = "tb"                # tb: <host>_<pid>.<ms>.pt.trace.json, rank: rank<N>.<ms>.pt.trace.json, job: <job>-r<N>.json
    gz: str = "none"                  # none | all | odd | some
    nccl: str = "2.21.5"              # 2.17.1 | 2.18.3 | 2.19.3 | 2.20.5 | 2.21.5
    with_args: bool = True
    truncate_rank: int | None = None
    truncate_at: float = 0.7
    logs: Any = None                  # None | "all" | [host indices]
    log_style: str = "file"           # file: NCCL_DEBUG_FILE=%h.%p, host: torchrun capture per host
    # faults (healthy twin: none), each a dict with "kind"
    faults: list = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# physics

class Net:
    """Bus bandwidth (GB/s) and latency (us) of a collective over a group, given the faults."""

    def __init__(self, cfg: Cfg, faults: list[dict]):
        self.cfg = cfg
        g = GPUS[cfg.gpu]
        H = cfg.nodes
        self.intra = np.full(H, g["nvlink"])
        self.inter = np.full(H, cfg.nics * cfg.nic_gbps / 8.0 * 0.85)
        self.hop_inter = np.full(H, 7.0)
        self.socket = False
        for f in faults:
            k = f["kind"]
            if k == "socket":
                self.socket = True
                self.inter[:] = f.get("gbps", 4.0)          # TCP over the front-end Ethernet, per host
                self.hop_inter[:] = 45.0
            elif k == "nic_degraded":
                self.inter[f["host"]] *= f["factor"]
            elif k == "p2p_off":
                self.intra[f["host"]] = f.get("shm_gbps", 22.0)
            elif k == "xsocket":
                self.inter[f["host"]] *= f.get("factor", 0.45)   # SYS path, GDR off: bounce via host memory over UPI
                self.hop_inter[f["host"]] += 4.0
        self.cache: dict = {}

    def time(self, coll: str, nbytes: float, ranks: tuple[int, ...]) -> float:
        key = (coll, nbytes, ranks)
        if key in self.cache:
            return self.cache[key]
        gpn = self.cfg.gpn
        n = len(ranks)
        per_host: dict[int, int] = {}
        for r in ranks:
            per_host[r // gpn] = per_host.get(r // gpn, 0) + 1
        bws = []
        hop = 1.5
        for h, k in per_host.items():
            if k > 1:
                bws.append(self.intra[h])
            if len(per_host) > 1:
                bws.append(self.inter[h] * k / gpn)
                hop = max(hop, self.hop_inter[h])
        busbw = min(bws) * 1e3          # bytes per us
        if coll == "allreduce":
            ring = 12.0 + 2 * (n - 1) * hop + 2 * (n - 1) / n * nbytes / busbw
            t = ring
            if len(per_host) > 2:
                nn = len(per_host)
                tree = 12.0 + 2 * (math.log2(nn) * hop + 1.5 * max(per_host.values())) + 2 * (n - 1) / n * nbytes / (busbw * 0.9)
                t = min(ring, tree)
        else:                            # allgather / reducescatter, nbytes = the full (unsharded) buffer
            t = 10.0 + (n - 1) * hop + (n - 1) / n * nbytes / busbw
        self.cache[key] = t
        return t


class Noise:
    """Every random number of a job, drawn in a fixed order whatever the faults."""

    def __init__(self, cfg: Cfg, n_slots: int):
        R = cfg.nodes * cfg.gpn
        S = cfg.steps
        rng = np.random.default_rng(cfg.seed)
        self.kern = rng.lognormal(0.0, cfg.kern_sigma, (n_slots, R))
        tail = rng.random((n_slots, R)) < cfg.tail_prob
        self.kern *= np.where(tail, rng.uniform(1.3, 3.0, (n_slots, R)), 1.0)
        self.cpu = rng.lognormal(0.0, 0.25, (n_slots, R))            # CPU overhead noise
        self.xfer = rng.lognormal(0.0, 0.03, (n_slots, R))           # transfer noise (per group: its first rank's)
        self.seq = rng.lognormal(0.0, cfg.seq_sigma, S)               # per-step work, shared by every rank
        self.rank = rng.lognormal(0.0, cfg.rank_sigma, R)             # static per-rank speed
        self.rank_step = rng.lognormal(0.0, cfg.rank_sigma, (S, R))
        self.dl = cfg.dl_ms * 1e3 * rng.lognormal(0.0, 0.2, (S, R))
        self.hiccup = np.where(rng.random((S, R)) < cfg.dl_hiccup_prob,
                               cfg.dl_hiccup_ms * 1e3 * rng.lognormal(0.0, 0.6, (S, R)), 0.0)
        self.gc = np.where(rng.random((S, R)) < cfg.gc_prob, cfg.gc_ms * 1e3 * rng.lognormal(0.0, 0.6, (S, R)), 0.0)
        self.gc_layer = rng.integers(0, cfg.layers, (S, R))
        self.alloc = np.where(rng.random((S, R)) < cfg.alloc_prob, rng.uniform(2e3, 9e3, (S, R)), 0.0)
        self.alloc_layer = rng.integers(0, cfg.layers, (S, R))
        self.warm = cfg.warmup * rng.uniform(10e3, 35e3, R)          # first-step extra CPU (lazy init, autotune)
        self.jit = rng.exponential(1.0, (S, R))                       # unit draws for job-wide jitter
        self.jit2 = rng.exponential(1.0, (S, R))
        self.clock = rng.uniform(-1, 1, cfg.nodes) * cfg.clock_ms * 1e3
        self.fmt = np.random.default_rng(cfg.seed + 7777)             # formats, names, pids


def groups_of(cfg: Cfg) -> dict[str, list[tuple[int, ...]]]:
    R, gpn = cfg.nodes * cfg.gpn, cfg.gpn
    out = {"world": [tuple(range(R))]}
    if cfg.mode == "tpdp":
        out["tp"] = [tuple(range(h * gpn, (h + 1) * gpn)) for h in range(cfg.nodes)]
        out["dp"] = [tuple(range(i, R, gpn)) for i in range(gpn)]
    return out


FWD_K = [("aten::mm", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", 0.32),
         ("aten::_flash_attention_forward", "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, true, false, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)", 0.23),
         ("aten::mm", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", 0.30),
         ("aten::gelu", "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)", 0.15)]
BWD_K = [("autograd::engine::evaluate_function: GeluBackward0", "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, at::detail::Array<char*, 3> >(int, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, at::detail::Array<char*, 3>)", 0.12),
         ("autograd::engine::evaluate_function: MmBackward0", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", 0.55),
         ("autograd::engine::evaluate_function: ScaledDotProductFlashAttentionBackward0", "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> >, true, false, false, false, false, true, false>(pytorch_flash::Flash_bwd_params)", 0.6),
         ("autograd::engine::evaluate_function: MmBackward0", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", 0.55),
         ("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)", 0.18)]


def simulate(cfg: Cfg, faults: list[dict], noise: Noise | None = None) -> dict[str, Any]:
    """Run the job; return the per-op records (arrays over ranks, true time in us) and the makespan."""
    R, gpn, L, S = cfg.nodes * cfg.gpn, cfg.gpn, cfg.layers, cfg.steps
    gpu = GPUS[cfg.gpu]
    net = Net(cfg, faults)
    grp = groups_of(cfg)
    slots_per_step = L * (len(FWD_K) + len(BWD_K) + 8) + 16
    if noise is None:
        noise = Noise(cfg, slots_per_step * S + 8)
    # fault factors
    kfac = np.ones(R)
    dl_extra = np.zeros((S, R))
    cpu_fac = np.ones(R)
    mid_extra = np.zeros((S, R))
    for f in faults:
        k = f["kind"]
        if k == "straggler":
            kfac[f["rank"]] *= 1.0 + f["slow"]
        elif k == "host_stall":
            dl_extra[:, f["rank"]] += f["ms"] * 1e3
            cpu_fac[f["rank"]] *= f.get("cpu", 1.0)
        elif k == "intermittent":
            for s in f["steps"]:
                mid_extra[s, f["rank"]] += f["ms"] * 1e3
        elif k == "jitter":
            dl_extra += f["ms"] * 1e3 * noise.jit
            mid_extra += f.get("mid_ms", f["ms"] / 2) * 1e3 * noise.jit2
    ops: list[dict] = []
    cpu = np.zeros(R)
    comp = np.zeros(R)
    streams = {name: np.zeros(R) for name in grp}
    slot = [0]
    ridx = np.arange(R)

    def nxt() -> int:
        slot[0] += 1
        return slot[0] - 1

    def kernel(cpu_name: str, kname: str, base_us: float, s: int, thread: str, extra: dict | None = None) -> None:
        nonlocal cpu, comp
        i = nxt()
        oh = 18.0 * noise.cpu[i] * cpu_fac * (2.5 if s == 0 else 1.0)
        ts = cpu.copy()
        launch = ts + oh * 0.55
        start = np.maximum(launch + 4.0, comp)
        dur = base_us * noise.seq[s] * noise.rank * noise.rank_step[s] * noise.kern[i] * kfac / gpu["speed"]
        if s == 0:
            dur = dur * (1.0 + 0.1 * cfg.warmup)
        comp = start + dur
        cpu = ts + oh
        ops.append(dict(t="K", step=s, cpu_name=cpu_name, kname=kname, thread=thread, ts=ts, dur=oh, launch=launch,
                        kstart=start, kdur=dur, **(extra or {})))

    def coll(kind: str, gname: str, nbytes: float, dtype: str, s: int, thread: str, dep: bool = True) -> int:
        nonlocal cpu
        i = nxt()
        oh = 55.0 * noise.cpu[i] * cpu_fac * (2.5 if s == 0 else 1.0)
        ts = cpu.copy()
        launch = ts + oh * 0.6
        st = streams[gname]
        ready = np.maximum(launch + 5.0, st)
        if dep:
            ready = np.maximum(ready, comp)
        end = np.empty(R)
        for g in grp[gname]:
            ga = np.array(g)
            t = net.time(kind, nbytes, g) * noise.xfer[i, g[0]]
            end[ga] = ready[ga].max() + t
        streams[gname] = end
        cpu = ts + oh
        ops.append(dict(t="C", step=s, kind=kind, group=gname, nbytes=nbytes, dtype=dtype, thread=thread, ts=ts, dur=oh,
                        launch=launch, kstart=ready, kdur=end - ready))
        return len(ops) - 1

    def wait_on(op_index: int) -> None:
        nonlocal comp
        o = ops[op_index]
        comp = np.maximum(comp, o["kstart"] + o["kdur"])

    def span(name: str, thread: str, ts: np.ndarray, end: np.ndarray, s: int, cat: str = "cpu_op") -> None:
        ops.append(dict(t="S", step=s, name=name, thread=thread, ts=ts.copy(), dur=end - ts, cat=cat))

    wfac = 1.0
    step_start = np.zeros((S, R))
    step_end = np.zeros((S, R))
    tp = cfg.mode == "tpdp"
    shard = cfg.mode == "fsdp"
    lay_us = cfg.layer_ms * 1e3          # per GPU (TP: a bigger model, sharded over the host)
    for s in range(S):
        step_start[s] = cpu
        # DataLoader (+ first-step lazy init on every rank)
        t0 = cpu.copy()
        cpu = cpu + noise.dl[s] + noise.hiccup[s] + dl_extra[s] + (noise.warm if s == 0 else 0.0)
        span("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "main", t0, cpu, s)
        kernel("aten::copy_", "Memcpy HtoD (Pinned -> Device)", 60.0, s, "main", dict(memcpy=True))
        t0 = cpu.copy()
        cpu = cpu + 12.0 * noise.cpu[nxt()]
        span("Optimizer.zero_grad#AdamW.zero_grad", "main", t0, cpu, s, "user_annotation")
        fwd0 = cpu.copy()
        ag = {}
        done: dict[int, np.ndarray] = {}
        if shard:
            ag[0] = coll("allgather", "world", cfg.grad_mb / 2 * 1e6, "BFloat16", s, "main", dep=False)
        for layer in range(L):
            if shard:
                if layer + 1 < L:
                    if layer - 1 >= 0:          # FSDP's rate limiter: at most two all-gathers in flight
                        cpu = np.maximum(cpu, done[layer - 1])
                    ag[layer + 1] = coll("allgather", "world", cfg.grad_mb / 2 * 1e6, "BFloat16", s, "main", dep=False)
                wait_on(ag[layer])
            for j, (cn, kn, frac) in enumerate(FWD_K):
                kernel(cn, kn, lay_us * frac * wfac, s, "main")
                if tp and j in (0, 2):
                    o = coll("allreduce", "tp", cfg.act_mb * 1e6, "BFloat16", s, "main")
                    wait_on(o)
            done[layer] = comp.copy()
            gcl = (noise.gc[s] > 0) & (noise.gc_layer[s] == layer)
            stall = np.where(gcl, noise.gc[s], 0.0) + np.where(layer == L // 2, mid_extra[s], 0.0)
            cpu = cpu + stall                      # a GC pause or a stall: a gap in the CPU timeline
            al = (noise.alloc[s] > 0) & (noise.alloc_layer[s] == layer)
            if al.any():                            # allocator cache flush: cudaFree waits for the device
                t0 = cpu.copy()
                cpu = np.where(al, np.maximum(cpu, comp) + noise.alloc[s], cpu)
                ops.append(dict(t="S", step=s, name="cudaFree", thread="main", ts=t0, dur=cpu - t0, cat="cuda_runtime",
                                only=al.copy()))
        kernel("aten::cross_entropy_loss", "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)", 0.4 * lay_us, s, "main")
        span("DistributedDataParallel.forward" if cfg.mode == "ddp" else "FullyShardedDataParallel.forward", "main", fwd0, cpu, s, "user_annotation")
        # backward on the autograd thread
        bwd0 = cpu.copy()
        cpu = cpu + 30.0
        buckets = []
        bag: dict[int, int] = {}
        for layer in reversed(range(L)):
            if shard:
                if layer - 1 >= 0:              # prefetch the next layer's parameters (BACKWARD_PRE)
                    if layer + 1 < L:
                        cpu = np.maximum(cpu, done[layer + 1])
                    bag[layer - 1] = coll("allgather", "world", cfg.grad_mb / 2 * 1e6, "BFloat16", s, "bwd", dep=False)
                if layer in bag:
                    wait_on(bag[layer])
            for j, (cn, kn, frac) in enumerate(BWD_K):
                kernel(cn, kn, lay_us * frac * wfac, s, "bwd")
                if tp and j in (1, 3):
                    o = coll("allreduce", "tp", cfg.act_mb * 1e6, "BFloat16", s, "bwd")
                    wait_on(o)
            done[layer] = comp.copy()
            if shard:
                buckets.append(coll("reducescatter", "world", cfg.grad_mb / 2 * 1e6, "BFloat16", s, "bwd"))
            elif tp:
                buckets.append(coll("allreduce", "dp", cfg.grad_mb / gpn * 1e6, "Float", s, "bwd"))
            else:
                buckets.append(coll("allreduce", "world", cfg.grad_mb * 1e6, "Float", s, "bwd"))
        span("autograd::engine::evaluate_function: torch::autograd::GraphRoot", "bwd", bwd0, cpu, s)
        for b in buckets:
            wait_on(b)
        # optimizer, loss.item()
        t0 = cpu.copy()
        per_rank = L * cfg.grad_mb / (R if shard else (gpn if tp else 1))
        kernel("aten::_fused_adamw_", "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, double*, double*>(at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, double*, double*)",
               max(80.0, per_rank * 4.0), s, "main")
        span("Optimizer.step#AdamW.step", "main", t0, cpu, s, "user_annotation")
        i = nxt()
        t0 = cpu.copy()
        mstart = np.maximum(cpu + 8.0, comp)
        comp = mstart + 2.5
        cpu = comp + 6.0 + 3.0 * noise.cpu[i]
        ops.append(dict(t="Y", step=s, ts=t0, dur=cpu - t0, mstart=mstart, sync_ts=t0 + 9.0))
        cpu = cpu + 40.0 * noise.cpu[nxt()]
        step_end[s] = cpu
        slot[0] = slots_per_step * (s + 1)
    makespan = float(step_end[-1].max() - step_start[0].min())
    by_step: list[list[dict]] = [[] for _ in range(S)]
    for o in ops:
        by_step[o["step"]].append(o)
    return dict(ops=ops, by_step=by_step, step_start=step_start, step_end=step_end, makespan=makespan, noise=noise)


# ---------------------------------------------------------------------------------------------
# Kineto writer

NCCL_NAMES_NEW = {("allreduce", "Float"): "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                  ("allreduce", "BFloat16"): "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                  ("allgather", "BFloat16"): "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                  ("reducescatter", "BFloat16"): "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"}
NCCL_NAMES_OLD = {("allreduce", "Float"): "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
                  ("allreduce", "BFloat16"): "ncclKernel_AllReduce_RING_LL_Sum_bfloat16(ncclDevComm*, unsigned long, ncclWork*)",
                  ("allgather", "BFloat16"): "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
                  ("reducescatter", "BFloat16"): "ncclKernel_ReduceScatter_RING_LL_Sum_bfloat16(ncclDevComm*, unsigned long, ncclWork*)"}
COLL = {"allreduce": ("c10d::allreduce_", "allreduce", "nccl:all_reduce"),
        "allgather": ("c10d::_allgather_base_", "_allgather_base", "nccl:_all_gather_base"),
        "reducescatter": ("c10d::_reduce_scatter_base_", "_reduce_scatter_base", "nccl:_reduce_scatter_base")}


def new_nccl(ver: str) -> bool:
    return tuple(int(x) for x in ver.split(".")[:2]) >= (2, 19)


def ver_tuple(ver: str) -> tuple[int, ...]:
    return tuple(int(x) for x in ver.split("."))


def j(v: Any) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.3f}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(j(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f'"{k}": {j(x)}' for k, x in v.items()) + "}"
    return str(v)


def pg_layout(cfg: Cfg, r: int) -> dict[str, dict]:
    """Process groups of rank r: name (creation order), description, ranks, NCCL stream id."""
    grp = groups_of(cfg)
    out = {"world": dict(name="0", desc="default_pg", ranks=grp["world"][0], stream=20)}
    if cfg.mode == "tpdp":
        h, lr = r // cfg.gpn, r % cfg.gpn
        out["tp"] = dict(name=str(1 + h), desc="undefined", ranks=grp["tp"][h], stream=24)
        out["dp"] = dict(name=str(1 + cfg.nodes + lr), desc="undefined", ranks=grp["dp"][lr], stream=28)
    return out


def rank_trace(cfg: Cfg, sim: dict, r: int, host: str, pid: int, base_us: float, off: float, nccl_ver: str,
               wall_ns: int) -> str:
    gpu = GPUS[cfg.gpu]
    lr = r % cfg.gpn
    R = cfg.nodes * cfg.gpn
    tid_main, tid_bwd = pid, pid + 143
    tids = {"main": tid_main, "bwd": tid_bwd}
    pgs = pg_layout(cfg, r)
    names = NCCL_NAMES_NEW if new_nccl(nccl_ver) else NCCL_NAMES_OLD
    ev: list[str] = []
    ext = [1000]
    corr = [3000]

    def T(x: float) -> str:
        return f"{base_us + x + off:.3f}"

    def X(cat: str, name: str, pid_: Any, tid: Any, ts: float, dur: float, args: dict) -> None:
        ev.append(f'{{"ph": "X", "cat": "{cat}", "name": {j(name)}, "pid": {pid_}, "tid": {tid}, "ts": {T(ts)}, '
                  f'"dur": {max(dur, 0.0):.3f}, "args": {j(args)}}}')

    def launch(name: str, tid: int, ts: float, kname: str, kcat: str, kts: float, kdur: float, kargs: dict,
               cbid: int = 211) -> None:
        e, c = ext[0], corr[0]
        corr[0] += 1
        X("cuda_runtime", name, pid, tid, ts, 4.2, {"External id": e, "cbid": cbid, "correlation": c})
        ev.append(f'{{"ph": "s", "id": {c}, "pid": {pid}, "tid": {tid}, "ts": {T(ts)}, "cat": "ac2g", "name": "ac2g"}}')
        a = {"External id": e, "queued": 0, "device": lr, "context": 1, "stream": kargs.pop("stream", 7), "correlation": c}
        a.update(kargs)
        X(kcat, kname, lr, a["stream"], kts, kdur, a)
        ev.append(f'{{"ph": "f", "id": {c}, "pid": {lr}, "tid": {a["stream"]}, "ts": {T(kts)}, "cat": "ac2g", "name": "ac2g", "bp": "e"}}')

    for s in range(cfg.steps):
        X("user_annotation", f"ProfilerStep#{cfg.first_step + s}", pid, tid_main, float(sim["step_start"][s, r]),
          float(sim["step_end"][s, r] - sim["step_start"][s, r]), {"External id": ext[0], "Record function id": 0})
        ext[0] += 1
        for o in sim["by_step"][s]:
            t = o["t"]
            if t == "S":
                if "only" in o and not o["only"][r]:
                    continue
                X(o["cat"], o["name"], pid, tids[o["thread"]], float(o["ts"][r]), float(o["dur"][r]),
                  {"External id": ext[0]} if o["cat"] != "cuda_runtime" else {"cbid": 165, "correlation": 0})
                ext[0] += 1
            elif t == "K":
                ts, dur = float(o["ts"][r]), float(o["dur"][r])
                tid = tids[o["thread"]]
                X("cpu_op", o["cpu_name"], pid, tid, ts, dur, {"External id": ext[0], "Record function id": 0, "Sequence number": ext[0] % 9973})
                if o.get("memcpy"):
                    launch("cudaMemcpyAsync", tid, float(o["launch"][r]), o["kname"], "gpu_memcpy", float(o["kstart"][r]),
                           float(o["kdur"][r]), {"bytes": 1048576, "memory bandwidth (GB/s)": 1048576 / max(o["kdur"][r], 1.0) / 1e3}, cbid=51)
                else:
                    launch("cudaLaunchKernel", tid, float(o["launch"][r]), o["kname"], "kernel", float(o["kstart"][r]),
                           float(o["kdur"][r]), {"registers per thread": 168, "shared memory": 98304, "blocks per SM": 1.0,
                                                 "warps per SM": 8.0, "grid": [gpu["sms"], 1, 1], "block": [256, 1, 1],
                                                 "est. achieved occupancy %": 12})
                ext[0] += 1
            elif t == "C":
                pg = pgs[o["group"]]
                n = len(pg["ranks"])
                op_name, cname, ann = COLL[o["kind"]]
                elem = 4 if o["dtype"] == "Float" else 2
                nel = int(o["nbytes"] / elem)
                innel, outnel = nel, nel
                if o["kind"] == "allgather":
                    innel = nel // n
                elif o["kind"] == "reducescatter":
                    outnel = nel // n
                meta = {"Collective name": cname, "In msg nelems": innel, "Out msg nelems": outnel, "Group size": n,
                        "dtype": o["dtype"], "In split size": "[]", "Out split size": "[]",
                        "Process Group Name": pg["name"], "Process Group Description": pg["desc"],
                        "Process Group Ranks": "[" + ", ".join(str(x) for x in pg["ranks"]) + "]"}
                ts, dur = float(o["ts"][r]), float(o["dur"][r])
                tid = tids[o["thread"]]
                X("cpu_op", op_name, pid, tid, ts, dur, {"External id": ext[0], "Record function id": 0})
                ext[0] += 1
                rpc = {"External id": ext[0], "Record function id": 0}
                if cfg.with_args:
                    rpc.update({"Rank": r, "Global rank start": pg["ranks"][0],
                                "Global rank stride": (pg["ranks"][1] - pg["ranks"][0]) if n > 1 else 1})
                    rpc.update(meta)
                X("cpu_op", "record_param_comms", pid, tid, ts + 3.0, dur - 6.0, rpc)
                X("user_annotation", ann, pid, tid, ts + 8.0, dur * 0.5, {"External id": ext[0] + 1})
                ka = {"stream": pg["stream"], "registers per thread": 96, "shared memory": 87568, "blocks per SM": 0.06,
                      "warps per SM": 1.0, "grid": [16 if n > cfg.gpn else 8, 1, 1], "block": [640, 1, 1],
                      "est. achieved occupancy %": 0}
                if cfg.with_args:
                    ka.update(meta)
                launch("cudaLaunchKernelExC" if new_nccl(nccl_ver) else "cudaLaunchKernel", tid, float(o["launch"][r]),
                       names[(o["kind"], o["dtype"])], "kernel", float(o["kstart"][r]), float(o["kdur"][r]), ka,
                       cbid=430 if new_nccl(nccl_ver) else 211)
                ext[0] += 2
            elif t == "Y":
                ts = float(o["ts"][r])
                X("cpu_op", "aten::item", pid, tid_main, ts, float(o["dur"][r]), {"External id": ext[0]})
                X("cpu_op", "aten::_local_scalar_dense", pid, tid_main, ts + 1.0, float(o["dur"][r]) - 2.0, {"External id": ext[0] + 1})
                ext[0] += 1
                launch("cudaMemcpyAsync", tid_main, ts + 4.0, "Memcpy DtoH (Device -> Pinned)", "gpu_memcpy",
                       float(o["mstart"][r]), 2.5, {"bytes": 4, "memory bandwidth (GB/s)": 0.0016}, cbid=51)
                ext[0] += 1
                X("cuda_runtime", "cudaStreamSynchronize", pid, tid_main, float(o["sync_ts"][r]),
                  float(o["ts"][r] + o["dur"][r] - o["sync_ts"][r]) - 3.0, {"cbid": 131, "correlation": corr[0]})
                corr[0] += 1
    meta_ev = [
        f'{{"name": "process_name", "ph": "M", "ts": {T(0.0)}, "pid": {pid}, "tid": 0, "args": {{"name": "python3.11"}}}}',
        f'{{"name": "process_labels", "ph": "M", "ts": {T(0.0)}, "pid": {pid}, "tid": 0, "args": {{"labels": "CPU"}}}}',
        f'{{"name": "process_name", "ph": "M", "ts": {T(0.0)}, "pid": {lr}, "tid": 0, "args": {{"name": "python3.11"}}}}',
        f'{{"name": "process_labels", "ph": "M", "ts": {T(0.0)}, "pid": {lr}, "tid": 0, "args": {{"labels": "GPU {lr}"}}}}',
        f'{{"name": "thread_name", "ph": "M", "ts": {T(0.0)}, "pid": {pid}, "tid": {tid_main}, "args": {{"name": "thread {tid_main} (python3.11)"}}}}',
        f'{{"name": "thread_name", "ph": "M", "ts": {T(0.0)}, "pid": {pid}, "tid": {tid_bwd}, "args": {{"name": "thread {tid_bwd} (pt_autograd_{lr})"}}}}',
    ]
    for sid in sorted({7} | {p["stream"] for p in pgs.values()}):
        meta_ev.append(f'{{"name": "thread_name", "ph": "M", "ts": {T(0.0)}, "pid": {lr}, "tid": {sid}, "args": {{"name": "stream {sid} "}}}}')
    devs = [{"id": d, "name": gpu["name"], "totalGlobalMem": gpu["mem"], "computeMajor": gpu["major"], "computeMinor": gpu["minor"],
             "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
             "sharedMemPerBlock": 49152, "numSms": gpu["sms"], "regsPerMultiprocessor": 65536,
             "sharedMemPerBlockOptin": 232448 if gpu["major"] == 9 else 166912,
             "sharedMemPerMultiprocessor": 233472 if gpu["major"] == 9 else 167936} for d in range(cfg.gpn)]
    pgc = [{"pg_name": p["name"], "pg_desc": p["desc"], "backend_config": "cuda:nccl", "pg_size": len(p["ranks"]),
            "ranks": list(p["ranks"])} for p in pgs.values()]
    dist = {"backend": "nccl", "rank": r, "world_size": R, "pg_count": len(pgc), "pg_config": pgc, "nccl_version": nccl_ver}
    head = ['{', '  "schemaVersion": 1,', f'  "deviceProperties": {j(devs)},', f'  "distributedInfo": {j(dist)},',
            '  "record_shapes": 1,', '  "with_stack": 0,', '  "with_flops": 0,']
    if cfg.naming == "tb":
        head.append(f'  "host_name": {j(host)},')
    first_ns = (wall_ns - int(base_us * 1000)) // 10**9 * 10**9
    head += [f'  "trace_id": "{(r * 2654435761 + cfg.seed) % (16**12):012X}{pid:08X}0000000000AB",',
             '  "displayTimeUnit": "ms",', f'  "baseTimeNanoseconds": {first_ns},', '  "traceEvents": [']
    body = ",\n  ".join(meta_ev + ev)
    tail = ['  ],', f'  "traceName": "/tmp/profiler/{host}_{pid}.pt.trace.json"', '}']
    return "\n".join(head) + "\n  " + body + "\n" + "\n".join(tail) + "\n"


# ---------------------------------------------------------------------------------------------
# NCCL debug logs

def hexaddr(rng: np.random.Generator) -> str:
    return "0x" + format(0x55d000000000 + int(rng.integers(0, 2**32)) * 16, "x")


def rank_log(cfg: Cfg, r: int, host: str, pid: int, ip: str, faults: list[dict], nccl_ver: str, rng: np.random.Generator,
             comm_ids: dict) -> list[str]:
    gpn, R = cfg.gpn, cfg.nodes * cfg.gpn
    h, lr = r // gpn, r % gpn
    v = ver_tuple(nccl_ver)
    kinds = {f["kind"]: f for f in faults}
    socket = "socket" in kinds
    p2p_off = kinds.get("p2p_off", {}).get("host") == h
    xsock = kinds.get("xsocket", {}).get("host") == h
    degr = kinds.get("nic_degraded", {}).get("host") == h
    t0 = pid
    P = f"{host}:{pid}:{t0} [{lr}] NCCL INFO "
    W = f"{host}:{pid}:{{tid}} [{lr}] {{src}} NCCL WARN "
    bus = BUS_IDS[lr * 8 // gpn]
    dev = (lambda rr: str((rr % gpn) * 8 // gpn)) if v >= (2, 18, 3) else (lambda rr: BUS_IDS[(rr % gpn) * 8 // gpn])
    out = []
    if v >= (2, 19):
        out.append(P + "cudaDriverVersion 12040")
    out.append(P + "NCCL_SOCKET_IFNAME set by environment to eth0")
    out.append(P + f"Bootstrap : Using eth0:{ip}<0>")
    if r == 0:
        out.append(P + f"NCCL version {nccl_ver}+cuda12.{4 if v >= (2, 19) else 1}")
    if v >= (2, 19):
        out.append(P + "NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or directory "
                       "No plugin found (libnccl-net.so), using internal implementation")
    else:
        out.append(P + "NET/Plugin : No plugin found (libnccl-net.so), using internal implementation")
    tid = pid + 61 + lr
    P = f"{host}:{pid}:{tid} [{lr}] NCCL INFO "
    if socket:
        out.append(P + "NCCL_IB_DISABLE set by environment to 1.")
    else:
        out.append(P + "NCCL_IB_HCA set by environment to mlx5")
    if p2p_off:
        out.append(P + "NCCL_P2P_DISABLE set by environment to 1.")
    out.append(P + "NCCL_DEBUG_FILE set by environment to /var/log/nccl/%h.%p")
    nics = list(range(cfg.nics))
    if degr and kinds["nic_degraded"].get("log", "down") == "down":
        nics = nics[:-1]
    if socket:
        out.append(P + f"NET/Socket : Using [0]eth0:{ip}<0>")
        if v >= (2, 20):
            out.append(P + "Using non-device net plugin version 0")
        out.append(P + "Using network Socket")
    else:
        hcas = " ".join(f"[{i}]mlx5_{i}:1/IB" for i in nics)
        out.append(P + f"NET/IB : Using {hcas} [RO]; OOB eth0:{ip}<0>")
        if v >= (2, 20):
            out.append(P + "Using non-device net plugin version 0")
        out.append(P + "Using network IB")
    if degr:
        bad = cfg.nics - 1
        out.append("")
        out.append(W.format(tid=pid + 9, src="transport/net_ib.cc:123") + f"NET/IB : mlx5_{bad}:1 Got async event : port error")
        out.append("")
        if kinds["nic_degraded"].get("log", "down") == "flap":
            out.append(W.format(tid=pid + 9, src="transport/net_ib.cc:123") + f"NET/IB : mlx5_{bad}:1 Got async event : port active")
    for gname, pg in pg_layout(cfg, r).items():
        members = pg["ranks"]
        n = len(members)
        cr = members.index(r)
        cid = comm_ids[(gname, members)]
        addr = hexaddr(rng)
        init = "ncclCommInitRank " if v >= (2, 21) else ""
        out.append(P + f"{init}comm {addr} rank {cr} nranks {n} cudaDev {lr} nvmlDev {lr} busId {bus} commId {cid} - Init START")
        if gname == "world":
            out.append(P + f"Setting affinity for GPU {lr} to {'ffffffff,00000000,ffffffff' if lr >= gpn // 2 else 'ffffffff,00000000,ffffffff,00000000'}")
            if xsock:
                out.append(P + f"GPU Direct RDMA Disabled for GPU {bus} / HCA {lr * cfg.nics // gpn} (distance 7 > 4)")
            elif not socket:
                out.append(P + f"GPU Direct RDMA Enabled for GPU {bus} / HCA {lr * cfg.nics // gpn} (distance 3 <= 4), read 1")
        hosts_in = sorted({m // gpn for m in members})
        if v >= (2, 20):
            lrs = [m for m in members if m // gpn == h]
            out.append(P + f"comm {addr} rank {cr} nRanks {n} nNodes {len(hosts_in)} localRanks {len(lrs)} localRank {lrs.index(r)} MNNVL 0")
        if len(hosts_in) > 1 and gname == "world":
            typ = "SYS/PIX" if xsock else ("NVL/NET" if not socket else "NVL/SYS")
            bw = 12.0 if xsock else (24.0 if not socket else 5.0)
            out.append(P + f"Pattern 4, crossNic 0, nChannels {max(2, cfg.nics)}, bw {bw:.6f}/{bw:.6f}, type {typ}, sameChannels 1")
        prv, nx = members[(cr - 1) % n], members[(cr + 1) % n]
        out.append(P + f"Trees [0] {(cr + 1) % n if cr + 1 < n else -1}/-1/-1->{cr}->{cr - 1 if cr > 0 else -1} "
                       f"[1] {(cr + 1) % n if cr + 1 < n else -1}/-1/-1->{cr}->{cr - 1 if cr > 0 else -1}")
        nch = 2 * max(1, cfg.nics // 2) if len(hosts_in) > 1 else 4
        if cr == 0:
            ring = "".join(f"{x:>4}" for x in range(min(n, 20)))
            for c in range(nch):
                out.append(P + f"Channel {c:02d}/{nch:02d} :{ring}")
        if v >= (2, 19):
            out.append(P + f"P2P Chunksize set to {524288 if len(hosts_in) == 1 else 131072}")
        nx_same = nx // gpn == h
        for c in range(nch):
            if nx_same and n > 1:
                if p2p_off:
                    via = "SHM/direct/direct"
                else:
                    via = "P2P/CUMEM" if v >= (2, 19) else "P2P/IPC"
                out.append(P + f"Channel {c:02d}/0 : {cr}[{dev(r)}] -> {(cr + 1) % n}[{dev(nx)}] via {via}")
            elif n > 1:
                nic = (lr * cfg.nics // gpn + c) % len(nics) if not socket else 0
                tr = "NET/Socket/0" if socket else f"NET/IB/{nic}" + ("" if xsock else "/GDRDMA")
                out.append(P + f"Channel {c:02d}/0 : {cr}[{dev(r)}] -> {(cr + 1) % n}[{dev(nx)}] [send] via {tr}")
            if prv // gpn != h and n > 1:
                nic = (lr * cfg.nics // gpn + c) % len(nics) if not socket else 0
                tr = "NET/Socket/0" if socket else f"NET/IB/{nic}" + ("" if xsock else "/GDRDMA")
                out.append(P + f"Channel {c:02d}/0 : {(cr - 1) % n}[{dev(prv)}] -> {cr}[{dev(r)}] [receive] via {tr}")
        out.append(P + "Connected all rings")
        out.append(P + "Connected all trees")
        if cr == 0 and gname == "world" and v < (2, 20):
            out.append("")
            out.append(W.format(tid=tid, src="graph/tuning.cc:187") + "CollNet is not supported or fails to initialize, ignoring NCCL_ALGO=COLLNET")
        out.append(P + "threadThresholds 8/8/64 | 256/8/64 | 512 | 512")
        if v >= (2, 19):
            out.append(P + f"{nch} coll channels, 0 collnet channels, 0 nvls channels, {nch} p2p channels, 2 p2p channels per peer")
        else:
            out.append(P + f"{nch} coll channels, {nch} p2p channels, 2 p2p channels per peer")
        out.append(P + f"{init}comm {addr} rank {cr} nranks {n} cudaDev {lr} nvmlDev {lr} busId {bus} commId {cid} - Init COMPLETE")
        if v >= (2, 21) and gname == "world":
            out.append(P + f"Init timings: rank {cr} nranks {n} total {0.6 + 0.1 * cfg.nodes:.2f} (kernels 0.31, bootstrap 0.12, "
                           f"allgathers 0.01, topo 0.09, graphs 0.01, connections 0.05, rest 0.01)")
        if lr == 1 and gname == "world" and v >= (2, 19):
            out.append("")
            out.append(W.format(tid=tid, src="misc/nvmlwrap.cc:181") + "nvmlDeviceGetHandleByPciBusId() failed: Not Found")
    return out


# ---------------------------------------------------------------------------------------------

def write_bundle(cfg: Cfg, outdir: str) -> dict[str, Any]:
    """Simulate ``cfg`` and its healthy twin; write the bundle into ``outdir`` (replaced)."""
    sim = simulate(cfg, list(cfg.faults))
    twin = simulate(cfg, [], noise=sim["noise"]) if cfg.faults else sim
    lost = (sim["makespan"] - twin["makespan"]) / sim["makespan"]
    noise: Noise = sim["noise"]
    rng = noise.fmt
    R, gpn = cfg.nodes * cfg.gpn, cfg.gpn
    if os.path.exists(outdir):
        shutil.rmtree(outdir)
    os.makedirs(outdir)
    hosts = [cfg.hostfmt.format(h + 1) for h in range(cfg.nodes)]
    pids = [int(rng.integers(20000, 3_900_000)) for _ in range(R)]
    ips = [f"10.{int(rng.integers(1, 250))}.{int(rng.integers(1, 250))}.{h + 11}" for h in range(cfg.nodes)]
    mono = float(rng.integers(2_000_000, 9_000_000)) * 1e6
    wall_ms = 1_717_000_000_000 + int(rng.integers(0, 10**9))
    paths = []
    for r in range(R):
        h = r // gpn
        text = rank_trace(cfg, sim, r, hosts[h], pids[r], mono, float(noise.clock[h]), cfg.nccl, wall_ms * 10**6)
        if cfg.naming == "tb":
            fname = f"{hosts[h]}_{pids[r]}.{wall_ms + int(rng.integers(0, 400))}.pt.trace.json"
        elif cfg.naming == "rank":
            fname = f"rank{r}.{wall_ms + int(rng.integers(0, 400))}.pt.trace.json"
        else:
            fname = f"{cfg.name}-job-r{r:02d}.json"
        gz = cfg.gz == "all" or (cfg.gz == "odd" and r % 2 == 1) or (cfg.gz == "some" and rng.random() < 0.4)
        if cfg.truncate_rank == r:
            text = text[: int(len(text) * cfg.truncate_at)]
        paths.append(write_text(os.path.join(outdir, fname), text, gz))
    if cfg.logs is not None:
        want = list(range(cfg.nodes)) if cfg.logs == "all" else list(cfg.logs)
        comm_ids: dict = {}
        for gname, gl in groups_of(cfg).items():
            for g in gl:
                comm_ids[(gname, g)] = "0x" + format(int(rng.integers(0, 2**62)), "x")
        logdir = os.path.join(outdir, "nccl_logs")
        os.makedirs(logdir)
        for h in want:
            per_host = []
            for lr in range(gpn):
                r = h * gpn + lr
                lines = rank_log(cfg, r, hosts[h], pids[r], ips[h], cfg.faults, cfg.nccl, rng, comm_ids)
                if cfg.log_style == "file":
                    p = os.path.join(logdir, f"{hosts[h]}.{pids[r]}")
                    with open(p, "w") as f:
                        f.write("\n".join(lines) + "\n")
                    paths.append(p)
                else:
                    per_host.append([f"[default{lr}]:{x}" if x else x for x in lines])
            if per_host:       # interleave the local ranks' lines as one captured stdout would
                merged = []
                for k in range(max(len(x) for x in per_host)):
                    for x in per_host:
                        if k < len(x):
                            merged.append(x[k])
                p = os.path.join(logdir, f"torchrun.{hosts[h]}.log")
                with open(p, "w") as f:
                    f.write("\n".join(merged) + "\n")
                paths.append(p)
    return {"paths": paths, "lost_frac": round(lost, 4), "makespan_us": sim["makespan"], "healthy_makespan_us": twin["makespan"]}
