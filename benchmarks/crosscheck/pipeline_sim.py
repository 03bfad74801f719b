"""Independent simulator #2: tensor-, pipeline- and data-parallel jobs written as Kineto traces.

Written from scratch with numpy only, without reading or importing ``stallscope.samples``, so
that stallscope's attribution can be checked against physics it was not tuned on.

What it simulates
-----------------
``nodes`` hosts x ``gpn`` GPUs laid out Megatron-style (``Layout``): tensor-parallel groups of
``tp`` GPUs inside a host, ``pp`` pipeline stages made of consecutive groups of hosts, and
data-parallel groups joining the same TP slot of every host of a stage.  Each rank gets its own
op program (``build_programs``): per layer a GEMM / flash-attention / GEMM / GELU / GEMM chain
with two TP all-reduces forward and two backward; pipeline ranks receive activations from the
previous stage and send them to the next (``nccl:send`` / ``nccl:recv``, gradients the other
way) under a 1F1B or GPipe micro-batch schedule; after backward each rank all-reduces
``dp_buckets`` gradient buckets in its DP group, waits for them, runs fused Adam and
synchronises.

The simulation is a discrete-event one in true time: every rank is a generator that walks its
program with a CPU clock (launches run ahead of the GPU, 20-40 us per op) and in-order GPU
streams; it yields whenever it needs a communication result that another rank has not reached
yet.  A collective or send/recv *ends* on every member at
``max(member arrivals) + bytes * bus_factor / bandwidth + latency`` (+0-8 us jitter per rank);
compute that consumes a result waits for it (``cudaStreamWaitEvent``).  Bandwidth is NVLink
(``nvl_bw``) inside a host and, across hosts, the slowest member host's link (``host_bw``
+-5 %) divided among the ``gpn`` GPUs that share it.  With ``pp_sync`` the CPU blocks on every
receive (``cudaDeviceSynchronize``), as Megatron's batched p2p does.

Faults (``Cfg.fault``): ``straggler`` (one rank's kernels ``slow`` longer), ``slow_host`` (every
rank of one host), ``intermittent`` / ``stall`` (a ``stall_ms`` CPU stall, ``gc.collect``, on
``stall_steps``), ``fabric`` (every host link at ``fabric_bw``).  ``write_bundle`` also runs the
same job with the fault switched off, so the true lost fraction
``(makespan - healthy makespan) / makespan`` is known exactly.

How it writes traces
--------------------
One PyTorch-profiler (Kineto) JSON per rank with ``ProfilerStep#N``, ``cpu_op`` /
``cudaLaunchKernel`` / ``ac2g`` flows, NCCL kernels (``ncclDevKernel_*`` or ``ncclKernel_*``),
``record_param_comms`` collective metadata (``with_args``) with Megatron process-group names,
``gpu_user_annotation`` spans (``p2p_peer_ann`` names the peer: ``nccl:send 4->8``),
``distributedInfo`` with every process group of the rank (``dist_info``), per-host clock offsets
of 1-``clock_ms`` ms with random sign.  Files are ``<host>_<pid>.<ms>.pt.trace.json`` or
``rank<N>.pt.trace.json`` with a ``host_name`` key; ``gz`` compresses them (gzip header time 0);
``truncate_rank`` cuts that rank's file at ``truncate_frac`` of its text.

Randomness: ``default_rng(seed)`` for link speeds, ``default_rng([seed, rank])`` per rank for the
simulation, ``default_rng(seed + 1000)`` for ids, clocks and names: a spec's seed fixes its bytes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from dataclasses import dataclass
from typing import Any, Generator

import numpy as np
from ddp_sim import write_text  # the same gzip writer (header time 0): bytes depend only on the text

__all__ = ["Cfg", "Layout", "build_programs", "simulate", "write_bundle"]

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
GEMM_B = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas"
FLASH_F = ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
           "Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>"
           "(flash::Flash_fwd_params)")
FLASH_B = ("void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, "
           "false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> >, false, true, false, false, "
           "false, true, false, false>(flash::Flash_bwd_params)")
LN = ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
      "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)")
LN_B = ("void at::native::(anonymous namespace)::layer_norm_grad_input_kernel<c10::BFloat16, float>(c10::BFloat16 const*, "
        "c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, c10::BFloat16*, int)")
GELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
        "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, "
        "at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)"
        "::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, "
        "at::detail::Array<char*, 2>)")
XENT = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, float, "
        "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, c10::BFloat16 const*, int)")
_ADAM_T = ("at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor"
           "<float, 4, (at::native::ADAM_MODE)1, false>, float*, double, float*, double, double, double, double, double, bool, "
           "float*, float*")
ADAM = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<%s>(%s)" % (_ADAM_T, _ADAM_T)
EMB = ("void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>"
       "(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 const, "
       "unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)")

ANNOT = {"allreduce": "nccl:all_reduce", "send": "nccl:send", "recv": "nccl:recv"}
MM_BWD = "autograd::engine::evaluate_function: MmBackward0"
LN_BWD_OP = "autograd::engine::evaluate_function: NativeLayerNormBackward0"


@dataclass
class Cfg:
    nodes: int = 2
    gpn: int = 8
    tp: int = 8                    # tensor-parallel group, inside a host
    pp: int = 1                    # pipeline stages (groups of hosts)
    micro: int = 4                 # micro-batches per step (pp > 1)
    sched: str = "1f1b"            # 1f1b | gpipe
    layers: int = 4                # layers per stage
    steps: int = 3
    first_step: int = 20
    seed: int = 0
    host_bw: float = 200e9         # per-host inter-node bytes/s, shared by the host's GPUs
    nvl_bw: float = 150e9
    tp_bytes: int = 16 << 20
    act_bytes: int = 16 << 20
    dp_bucket_bytes: int = 25 << 20
    dp_buckets: int = 4
    last_stage_extra: float = 0.0  # healthy imbalance: last stage heavier
    stage_work: list[float] | None = None  # per-stage work multipliers
    kscale: float = 1.0
    # faults
    fault: str | None = None       # None | straggler | slow_host | intermittent | fabric | stall
    culprit_rank: int | None = None
    culprit_host: int | None = None
    slow: float = 0.0
    stall_ms: float = 0.0
    stall_steps: tuple[int, ...] = ()
    stall_where: str = "mid"       # mid (half-way through the schedule) | start
    pp_sync: bool = False          # CPU blocks on each pipeline receive
    fabric_bw: float | None = None
    # trace format
    with_args: bool = True
    new_names: bool = True
    dist_info: bool = True
    naming: str = "tb"             # tb | rank
    gz: bool = False
    float_ts: bool = True
    clock_ms: float = 30.0
    truncate_rank: int | None = None
    truncate_frac: float = 0.7
    hostfmt: str = "node-{:03d}"
    pg_desc_style: str = "megatron"  # megatron | undefined
    p2p_peer_ann: bool = False


class Layout:
    """Which host, local GPU, stage and TP / DP / PP group each rank is in."""

    def __init__(self, c: Cfg):
        self.c = c
        self.R = c.nodes * c.gpn
        assert c.nodes % c.pp == 0 and c.gpn % c.tp == 0
        self.hps = c.nodes // c.pp                                   # hosts per stage
        self.host = [r // c.gpn for r in range(self.R)]
        self.loc = [r % c.gpn for r in range(self.R)]
        self.stage = [self.host[r] // self.hps for r in range(self.R)]
        self.tp_group: dict[int, tuple[int, ...]] = {}
        self.dp_group: dict[int, tuple[int, ...]] = {}
        self.pp_group: dict[int, tuple[int, ...]] = {}
        for r in range(self.R):
            h, lo = self.host[r], self.loc[r]
            t0 = h * c.gpn + (lo // c.tp) * c.tp
            self.tp_group[r] = tuple(range(t0, t0 + c.tp))
            s = self.stage[r]
            self.dp_group[r] = tuple(q for q in range(self.R) if self.stage[q] == s and self.loc[q] % c.tp == lo % c.tp)
            self.pp_group[r] = tuple(q for q in range(self.R)
                                     if self.host[q] % self.hps == h % self.hps and self.loc[q] == lo)
        # process groups, numbered like torch.distributed creates them
        self.pgs: dict[tuple[int, ...], tuple[str, str]] = {}
        names = {"tp": "TENSOR_MODEL_PARALLEL_GROUP", "dp": "DATA_PARALLEL_GROUP", "pp": "PIPELINE_MODEL_PARALLEL_GROUP"}
        n = 1
        for kind, gd in (("tp", self.tp_group), ("dp", self.dp_group), ("pp", self.pp_group)):
            for g in sorted(set(gd.values())):
                if len(g) > 1:
                    self.pgs[g] = (str(n), names[kind] if c.pg_desc_style == "megatron" else "undefined")
                    n += 1

    def prev(self, r: int) -> int | None:
        g = self.pp_group[r]
        i = g.index(r)
        return g[i - 1] if i > 0 else None

    def next(self, r: int) -> int | None:
        g = self.pp_group[r]
        i = g.index(r)
        return g[i + 1] if i + 1 < len(g) else None


def group_bw(c: Cfg, L: Layout, grp: tuple[int, ...], host_bw: np.ndarray, n_share: int) -> float:
    hs = sorted(set(L.host[m] for m in grp))
    if len(hs) == 1:
        return c.nvl_bw
    return min(host_bw[h] for h in hs) / n_share


def build_programs(c: Cfg, L: Layout, host_bw: np.ndarray) -> dict[int, list[tuple[Any, ...]]]:
    """Per-rank op lists.

    ``("k", kernel, ms, cpu_op, waits)``: a kernel that first waits for the comm keys ``waits``.
    ``("comm", key, coll, nelem, dtype, stream, group, dep, xfer_us, thread)``: a collective or
    send/recv matched across ranks by ``key``; ``dep`` makes it wait for the compute stream.
    """
    progs: dict[int, list[tuple[Any, ...]]] = {r: [] for r in range(L.R)}
    S = c.pp
    for r in range(L.R):
        P = progs[r]
        s = L.stage[r]
        tpg = L.tp_group[r]
        dpg = L.dp_group[r]
        work = 1.0 if c.stage_work is None else c.stage_work[s]
        if s == S - 1:
            work *= 1.0 + c.last_stage_extra
        work *= c.kscale
        seq: dict[tuple[int, ...], int] = {}

        def ckey(grp: tuple[int, ...]) -> tuple[Any, ...]:
            seq[grp] = seq.get(grp, 0) + 1
            return ("c", grp, seq[grp])

        def tp_ar() -> tuple[Any, ...] | None:
            if len(tpg) < 2:
                return None
            k = ckey(tpg)
            xfer = c.tp_bytes * 2 * (len(tpg) - 1) / len(tpg) / c.nvl_bw * 1e6 + 15
            P.append(("comm", k, "allreduce", c.tp_bytes // 2, "BFloat16", 21, tpg, True, xfer, "fwd"))
            return k

        def layer_fwd() -> None:
            P.append(("k", GEMM, 0.45 * work, "aten::linear", []))
            P.append(("k", FLASH_F, 0.40 * work, "FlashAttnFunc", []))
            P.append(("k", GEMM, 0.20 * work, "aten::linear", []))
            k = tp_ar()
            P.append(("k", LN, 0.05, "aten::native_layer_norm", [k] if k else []))
            P.append(("k", GEMM, 0.55 * work, "aten::linear", []))
            P.append(("k", GELU, 0.08 * work, "aten::gelu", []))
            P.append(("k", GEMM, 0.55 * work, "aten::linear", []))
            k = tp_ar()
            P.append(("k", LN, 0.05, "aten::native_layer_norm", [k] if k else []))

        def layer_bwd() -> None:
            P.append(("k", GEMM_B, 1.0 * work, MM_BWD, []))
            P.append(("k", GELU, 0.12 * work, "autograd::engine::evaluate_function: GeluBackward0", []))
            P.append(("k", GEMM_B, 1.0 * work, MM_BWD, []))
            k = tp_ar()
            P.append(("k", LN_B, 0.08, LN_BWD_OP, [k] if k else []))
            P.append(("k", FLASH_B, 0.9 * work, "autograd::engine::evaluate_function: FlashAttnFuncBackward", []))
            P.append(("k", GEMM_B, 0.7 * work, MM_BWD, []))
            k = tp_ar()
            P.append(("k", LN_B, 0.08, LN_BWD_OP, [k] if k else []))

        prv, nxt = L.prev(r), L.next(r)
        ppg = L.pp_group[r]
        # link speed to the next / previous stage (unused where there is none)
        p2p_bw = group_bw(c, L, (r, nxt), host_bw, c.gpn) if nxt is not None else 0.0
        p2p_bwp = group_bw(c, L, (r, prv), host_bw, c.gpn) if prv is not None else 0.0

        def fwd(step: int, mb: int) -> None:
            waits = []
            if prv is not None:
                k = ("p", step, "a", mb, prv, r)
                xfer = c.act_bytes / p2p_bwp * 1e6 + 20
                P.append(("comm", k, "recv", c.act_bytes // 2, "BFloat16", 31, ppg, False, xfer, "fwd"))
                waits = [k]
            else:
                P.append(("k", EMB, 0.15, "aten::embedding", []))
            for layer in range(c.layers):
                if layer == 0 and waits:
                    P.append(("k", LN, 0.05, "aten::native_layer_norm", waits))
                layer_fwd()
            if nxt is not None:
                k = ("p", step, "a", mb, r, nxt)
                xfer = c.act_bytes / p2p_bw * 1e6 + 20
                P.append(("comm", k, "send", c.act_bytes // 2, "BFloat16", 32, ppg, True, xfer, "fwd"))
            else:
                P.append(("k", GEMM, 1.2 * work, "aten::linear", []))
                P.append(("k", XENT, 0.3 * work, "aten::_log_softmax", []))

        def bwd(step: int, mb: int) -> None:
            if nxt is not None:
                k = ("p", step, "g", mb, nxt, r)
                xfer = c.act_bytes / p2p_bw * 1e6 + 20
                P.append(("comm", k, "recv", c.act_bytes // 2, "BFloat16", 33, ppg, False, xfer, "bwd"))
                P.append(("k", LN_B, 0.05, LN_BWD_OP, [k]))
            else:
                P.append(("k", GEMM_B, 2.0 * work, MM_BWD, []))
            for _ in range(c.layers):
                layer_bwd()
            if prv is not None:
                k = ("p", step, "g", mb, r, prv)
                xfer = c.act_bytes / p2p_bwp * 1e6 + 20
                P.append(("comm", k, "send", c.act_bytes // 2, "BFloat16", 34, ppg, True, xfer, "bwd"))

        for st in range(c.steps):
            step = c.first_step + st
            P.append(("step_begin", step))
            do_stall = c.fault in ("stall", "intermittent") and r == c.culprit_rank and st in c.stall_steps
            if do_stall and c.stall_where == "start":
                P.append(("stall", c.stall_ms))
            P.append(("cpu", "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "dl"))
            M = c.micro if S > 1 else 1
            if S == 1:
                fwd(step, 0)
                if do_stall and c.stall_where == "mid":
                    P.append(("stall", c.stall_ms))
                P.append(("bwd_begin",))
                bwd(step, 0)
            else:
                if c.sched == "gpipe":
                    order = [("F", m) for m in range(M)] + [("B", m) for m in range(M)]
                else:                                                # 1F1B: warm-up, steady state, cool-down
                    w = min(S - 1 - L.stage[r], M)
                    order = [("F", m) for m in range(w)]
                    for i in range(M - w):
                        order += [("F", w + i), ("B", i)]
                    order += [("B", m) for m in range(M - w, M)]
                for oi, (kind, m) in enumerate(order):
                    if do_stall and c.stall_where == "mid" and oi == len(order) // 2:
                        P.append(("stall", c.stall_ms))
                    if kind == "F":
                        fwd(step, m)
                    else:
                        P.append(("bwd_begin",))
                        bwd(step, m)
            dks = []                                                 # DP gradient all-reduce after backward
            if len(dpg) > 1:
                bw = group_bw(c, L, dpg, host_bw, c.gpn)
                n = len(dpg)
                for _ in range(c.dp_buckets):
                    k = ckey(dpg)
                    xfer = c.dp_bucket_bytes * 2 * (n - 1) / n / bw * 1e6 + 30
                    P.append(("comm", k, "allreduce", c.dp_bucket_bytes // 4, "Float", 41, dpg, True, xfer, "bwd"))
                    dks.append(k)
            P.append(("bwd_end",))
            P.append(("wait", dks))
            P.append(("opt_begin",))
            for _ in range(4):
                P.append(("k", ADAM, 0.3, "aten::_fused_adam_", []))
            P.append(("opt_end",))
            P.append(("sync",))
            P.append(("step_end", step))
    return progs


def simulate(c: Cfg, fault_on: bool = True) -> tuple[list[list[tuple[Any, ...]]], Layout, float]:
    """Run the job (or its healthy twin); return per-rank events, the layout and the makespan (us)."""
    L = Layout(c)
    R = L.R
    rng0 = np.random.default_rng(c.seed)
    host_bw = np.full(c.nodes, c.host_bw) * rng0.uniform(0.95, 1.05, c.nodes)
    slow = np.ones(R)
    if fault_on:
        if c.fault == "fabric":
            host_bw = np.full(c.nodes, c.fabric_bw) * rng0.uniform(0.9, 1.1, c.nodes)
        if c.fault == "straggler":
            slow[c.culprit_rank] = 1 + c.slow
        if c.fault == "slow_host":
            for r in range(R):
                if L.host[r] == c.culprit_host:
                    slow[r] = 1 + c.slow
    cc = c if fault_on or c.fault not in ("stall", "intermittent") else dataclasses.replace(c, fault=None)
    progs = build_programs(cc, L, host_bw)
    rngs = [np.random.default_rng([c.seed, r]) for r in range(R)]
    comms: dict[Any, dict[str, Any]] = {}   # key -> arr {rank: start}, n, xfer, end {rank: end}, jit
    events: list[list[tuple[Any, ...]]] = [[] for _ in range(R)]

    def proc(r: int) -> Generator[Any, None, None]:
        """Walk rank r's program; yield a comm key whenever its end time is not known yet."""
        rng = rngs[r]
        cpu = float(rng.uniform(0, 300))
        gpu = 0.0
        stream_tail: dict[int, Any] = {}     # NCCL stream -> last comm key on it
        ev = events[r]
        step_ts = opt_ts = 0.0

        def end_of(key: Any) -> Generator[Any, None, float]:
            e = comms[key]["end"].get(r)
            while e is None:
                yield key
                e = comms[key]["end"].get(r)
            return e

        for op in progs[r]:
            kind = op[0]
            if kind == "step_begin":
                step_ts = cpu
            elif kind == "step_end":
                ev.append(("step", op[1], step_ts, cpu))
                cpu += 25
            elif kind == "stall":
                ev.append(("cpu", "gc.collect", "python_function", cpu, op[1] * 1000 - 5, "main"))
                cpu += op[1] * 1000
            elif kind == "cpu":
                d = float(rng.uniform(0.8, 2.0)) * 1000
                ev.append(("cpu", op[1], "user_annotation", cpu, d, "main"))
                cpu += d + 20
            elif kind == "k":
                _, kn, base, cpuop, waits = op
                ov = float(rng.uniform(20, 40))
                noise = float(rng.lognormal(0, 0.02))
                th = "bwd" if cpuop.startswith("autograd") else "main"
                for _ in waits:
                    ev.append(("cpu", "cudaStreamWaitEvent", "cuda_runtime", cpu, 3, th))
                    cpu += 5
                lt = cpu + ov * 0.4
                st = max(lt + 6, gpu)
                for w in waits:
                    st = max(st, (yield from end_of(w)))
                d = base * 1000 * slow[r] * noise
                ev.append(("kernel", kn, cpuop, cpu, ov, lt, st, d, th, 7))
                gpu = st + d
                cpu += ov
            elif kind == "comm":
                _, key, coll, nelem, dtype, stream, grp, dep, xfer, th = op
                th = "bwd" if th == "bwd" else "main"
                lt = cpu + 30
                jit = float(rng.uniform(0, 8))
                start = lt + 8
                if dep:
                    start = max(start, gpu)
                pk = stream_tail.get(stream)
                if pk is not None:                                   # in order on its stream
                    start = max(start, (yield from end_of(pk)))
                n = 2 if coll in ("send", "recv") else len(grp)
                cm = comms.setdefault(key, dict(arr={}, n=n, xfer=xfer, end={}, jit={}))
                cm["arr"][r] = start
                cm["jit"][r] = jit
                if coll in ("send", "recv"):
                    cm["xfer"] = max(cm["xfer"], xfer)
                if len(cm["arr"]) == cm["n"]:                        # last member arrived: everyone's end is known
                    last = max(cm["arr"].values())
                    for m in cm["arr"]:
                        cm["end"][m] = last + cm["xfer"] + cm["jit"][m]
                ev.append(("comm", key, coll, nelem, dtype, stream, grp, cpu, lt, th))
                stream_tail[stream] = key
                cpu += 90
                if c.pp_sync and coll == "recv":
                    e = yield from end_of(key)
                    if e > cpu:
                        ev.append(("cpu", "cudaDeviceSynchronize", "cuda_runtime", cpu, e - cpu + 4, th))
                        cpu = e + 6
            elif kind == "wait":
                for w in op[1]:
                    gpu = max(gpu, (yield from end_of(w)))
                ev.append(("cpu", "cudaStreamWaitEvent", "cuda_runtime", cpu, 3, "main"))
                cpu += 10
            elif kind == "bwd_begin":
                pass
            elif kind == "bwd_end":
                ev.append(("cpu", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", "cpu_op",
                           cpu - 15, 10, "bwd"))
            elif kind == "opt_begin":
                opt_ts = cpu
            elif kind == "opt_end":
                ev.append(("cpu", "Optimizer.step#DistributedOptimizer.step", "user_annotation", opt_ts, cpu - opt_ts,
                           "main"))
            elif kind == "sync":
                t0 = cpu
                done = max(gpu, t0)
                for pk in stream_tail.values():
                    done = max(done, (yield from end_of(pk)))
                done += 10
                ev.append(("sync", t0, done - t0))
                cpu = done + 15

    # scheduler: run ranks until they block; wake them when the comm they wait on is resolved
    gens = {r: proc(r) for r in range(R)}
    waiting: dict[Any, list[int]] = {}
    ready = list(range(R))
    done = set()
    while ready:
        r = ready.pop()
        try:
            key = next(gens[r])
            waiting.setdefault(key, []).append(r)
        except StopIteration:
            done.add(r)
        if not ready:
            for key in list(waiting):
                still = []
                for q in waiting[key]:
                    if q in comms[key]["end"]:
                        ready.append(q)
                    else:
                        still.append(q)
                if still:
                    waiting[key] = still
                else:
                    del waiting[key]
    if len(done) != R:
        raise RuntimeError("deadlock: %d ranks done; waiting on %s" % (len(done), list(waiting)[:5]))
    out = []                                                         # resolve comm timings into events
    for r in range(R):
        ev2: list[tuple[Any, ...]] = []
        for e in events[r]:
            if e[0] == "comm":
                key = e[1]
                d = comms[key]
                st = d["arr"][r]
                en = d["end"][r]
                peer = None
                if key[0] == "p":
                    peer = key[5] if key[4] == r else key[4]
                ev2.append(("comm",) + e[2:] + (st, en - st, peer))
            else:
                ev2.append(e)
        out.append(ev2)
    t0 = min(e[2] for ev in out for e in ev if e[0] == "step")
    t1 = max(e[3] for ev in out for e in ev if e[0] == "step")
    return out, L, t1 - t0


def nccl_name(c: Cfg, coll: str, dtype: str) -> str:
    dn = {"Float": "f32", "BFloat16": "bf16"}[dtype]
    do = {"Float": "float", "BFloat16": "__nv_bfloat16"}[dtype]
    if coll in ("send", "recv"):
        return ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)" if c.new_names
                else "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)")
    if c.new_names:
        return "ncclDevKernel_AllReduce_Sum_%s_RING_LL(ncclDevKernelArgsStorage<4096ul>)" % dn
    return "ncclKernel_AllReduce_RING_LL_Sum_%s(ncclDevComm*, unsigned long, ncclWork*)" % do


def write_bundle(c: Cfg, outdir: str) -> dict[str, Any]:
    """Simulate ``c`` (and its healthy twin), write one Kineto trace per rank into ``outdir`` (replaced).

    Returns ``paths``, ``makespan_fault_us``, ``makespan_healthy_us`` and ``lost_frac``.
    """
    events, L, T = simulate(c, True)
    _, _, T0 = simulate(c, False)
    info: dict[str, Any] = {"makespan_fault_us": T, "makespan_healthy_us": T0, "lost_frac": (T - T0) / T, "paths": []}
    rng = np.random.default_rng(c.seed + 1000)
    R = L.R
    hosts = [c.hostfmt.format(i + 1) for i in range(c.nodes)]
    if os.path.exists(outdir):
        shutil.rmtree(outdir)
    os.makedirs(outdir)
    host_off = rng.uniform(min(1.0, c.clock_ms), c.clock_ms, c.nodes) * rng.choice([-1, 1], c.nodes) * 1000.0
    mono0 = float(rng.integers(3_000_000, 6_000_000)) * 1e6
    base_ns = 1_722_000_000_000_000_000 + int(rng.integers(0, 10**6)) * 10**9
    nccl_ver = "2.21.5" if c.new_names else "2.18.1"
    for r in range(R):
        h = L.host[r]
        lr = L.loc[r]
        pid = int(rng.integers(10000, 4000000))
        tid_main = pid
        tid_bwd = pid + int(rng.integers(10, 9000))
        off = mono0 + host_off[h]
        if c.float_ts:
            def fmt(x: float, off: float = off) -> float | int:
                return round(float(x) + off, 3)

            def fdur(x: float) -> float | int:
                return round(float(x), 3)
        else:
            def fmt(x: float, off: float = off) -> float | int:
                return int(round(float(x) + off))

            def fdur(x: float) -> float | int:
                return max(1, int(round(float(x))))
        ext = [1]
        corr = [1000 + r]
        out: list[dict[str, Any]] = []
        streams = {7}

        def tid_of(th: str) -> int:
            return tid_main if th == "main" else tid_bwd

        def cpu_ev(name: str, cat: str, ts: float, dur: float, th: str, args: dict[str, Any] | None = None) -> int:
            a = {"External id": ext[0], "Record function id": ext[0], "Ev Idx": ext[0] - 1}
            if args:
                a.update(args)
            ext[0] += 1
            out.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid_of(th), "ts": fmt(ts),
                        "dur": fdur(dur), "args": a})
            return a["External id"]

        def launch(name: str, ts: float, dur: float, th: str, extid: int) -> int:
            cc = corr[0]
            corr[0] += 7
            out.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": tid_of(th),
                        "ts": fmt(ts), "dur": fdur(dur),
                        "args": {"External id": extid, "cbid": 211 if name == "cudaLaunchKernel" else 430,
                                 "correlation": cc}})
            out.append({"ph": "s", "id": cc, "pid": pid, "tid": tid_of(th), "ts": fmt(ts), "cat": "ac2g", "name": "ac2g"})
            return cc

        def gpu_ev(name: str, ts: float, dur: float, stream: int, extid: int, cc: int,
                   extra: dict[str, Any] | None = None) -> None:
            streams.add(stream)
            a = {"External id": extid, "queued": 0, "device": lr, "context": 1, "stream": stream, "correlation": cc,
                 "registers per thread": 96, "shared memory": 0, "blocks per SM": 1.0, "warps per SM": 4.0,
                 "grid": [132, 1, 1], "block": [256, 1, 1], "est. achieved occupancy %": 25}
            if extra:
                a.update(extra)
            out.append({"ph": "X", "cat": "kernel", "name": name, "pid": lr, "tid": stream, "ts": fmt(ts),
                        "dur": fdur(dur), "args": a})
            out.append({"ph": "f", "id": cc, "pid": lr, "tid": stream, "ts": fmt(ts), "cat": "ac2g", "name": "ac2g",
                        "bp": "e"})

        t_first: float | None = None
        t_last = 0.0
        for e in events[r]:
            k = e[0]
            if k == "step":
                _, n, ts, te = e
                cpu_ev("ProfilerStep#%d" % n, "user_annotation", ts, te - ts, "main")
                t_first = ts if t_first is None else t_first
                t_last = te
            elif k == "cpu":
                _, name, cat, ts, dur, th = e
                if cat == "cuda_runtime":
                    out.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": tid_of(th),
                                "ts": fmt(ts), "dur": fdur(dur),
                                "args": {"External id": 0, "cbid": 147, "correlation": corr[0]}})
                    corr[0] += 1
                else:
                    cpu_ev(name, cat, ts, dur, th)
            elif k == "kernel":
                _, kn, cpuop, cts, cdur, lt, st, d, th, stream = e
                x = cpu_ev(cpuop, "cpu_op", cts, cdur - 2, th)
                cc = launch("cudaLaunchKernel", lt, 5, th, x)
                gpu_ev(kn, st, d, stream, x, cc)
            elif k == "comm":
                _, coll, nelem, dtype, stream, grp, cts, lt, th, st, d, e_peer = e
                ann = ANNOT[coll]
                if c.p2p_peer_ann and coll in ("send", "recv"):
                    ann = "nccl:send %d->%d" % (r, e_peer) if coll == "send" else "nccl:recv %d<-%d" % (r, e_peer)
                x_ann = cpu_ev(ann, "user_annotation", cts, 85, th)
                cargs: dict[str, Any] = {}
                if c.with_args:
                    pgn, pgd = L.pgs.get(tuple(grp), ("0", "default_pg"))
                    cargs = {"Collective name": coll, "In msg nelems": nelem, "Out msg nelems": nelem,
                             "Group size": len(grp), "dtype": dtype, "In split size": "[]", "Out split size": "[]",
                             "Process Group Name": pgn, "Process Group Description": pgd,
                             "Process Group Ranks": "[" + ", ".join(str(i) for i in grp) + "]"}
                    x = cpu_ev("record_param_comms", "cpu_op", cts + 2, 80, th,
                               dict(cargs, **{"Global rank start": 0, "Global rank stride": 1}))
                else:
                    x = cpu_ev("record_param_comms", "cpu_op", cts + 2, 80, th)
                cc = launch("cudaLaunchKernelExC" if c.new_names else "cudaLaunchKernel", lt, 12, th, x)
                gpu_ev(nccl_name(c, coll, dtype), st, d, stream, x, cc, cargs)
                out.append({"ph": "X", "cat": "gpu_user_annotation", "name": ann, "pid": lr, "tid": stream,
                            "ts": fmt(st - 1), "dur": fdur(d + 1.5), "args": {"External id": x_ann}})
            elif k == "sync":
                _, ts, dur = e
                x = cpu_ev("aten::item", "cpu_op", ts, dur + 5, "main")
                out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": pid,
                            "tid": tid_main, "ts": fmt(ts + 2), "dur": fdur(dur),
                            "args": {"External id": x, "cbid": 131, "correlation": corr[0]}})
                corr[0] += 1
        assert t_first is not None
        mts = fmt(t_first - 500)
        meta: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "ts": mts, "pid": pid, "tid": 0, "args": {"name": "python3.11"}},
            {"name": "process_labels", "ph": "M", "ts": mts, "pid": pid, "tid": 0, "args": {"labels": "CPU"}},
            {"name": "process_name", "ph": "M", "ts": mts, "pid": lr, "tid": 0, "args": {"name": "python3.11"}},
            {"name": "process_labels", "ph": "M", "ts": mts, "pid": lr, "tid": 0, "args": {"labels": "GPU %d" % lr}}]
        for st in sorted(streams):
            meta.append({"name": "thread_name", "ph": "M", "ts": mts, "pid": lr, "tid": st,
                         "args": {"name": "stream %d " % st}})
        meta.append({"name": "thread_name", "ph": "M", "ts": mts, "pid": pid, "tid": tid_main,
                     "args": {"name": "thread %d (python3)" % tid_main}})
        meta.append({"name": "thread_name", "ph": "M", "ts": mts, "pid": pid, "tid": tid_bwd,
                     "args": {"name": "thread %d (pt_autograd_0)" % tid_bwd}})
        out.sort(key=lambda e: (e["ts"], e.get("ph") != "X"))
        trace: dict[str, Any] = {
            "schemaVersion": 1,
            "deviceProperties": [{"id": g, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912,
                                  "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
                                  "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
                                  "sharedMemPerBlock": 49152, "numSms": 132, "regsPerMultiprocessor": 65536,
                                  "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472}
                                 for g in range(c.gpn)]}
        if c.dist_info:
            pgc = [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": R,
                    "ranks": list(range(R))}]
            for g, (pn, pd) in sorted(L.pgs.items(), key=lambda x: int(x[1][0])):
                if r in g:
                    pgc.append({"pg_name": pn, "pg_desc": pd, "backend_config": "cuda:nccl", "pg_size": len(g),
                                "ranks": list(g)})
            trace["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": R, "pg_count": len(pgc),
                                        "pg_config": pgc, "nccl_version": nccl_ver}
        trace.update({"record_shapes": 0, "trace_id": "%032X" % int(rng.integers(0, 2**62)),
                      "traceEvents": meta + out + [
                          {"ph": "X", "cat": "Trace", "ts": fmt(t_first - 1000), "dur": fdur(t_last - t_first + 2000),
                           "pid": "Spans", "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)",
                           "args": {"Op count": 0}},
                          {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": fmt(t_last + 1000)}],
                      "displayTimeUnit": "ms", "baseTimeNanoseconds": base_ns,
                      "traceName": "/tmp/tmp%06x.json" % int(rng.integers(0, 2**24))})
        if c.naming == "rank":
            trace["host_name"] = hosts[h]
            fn = "rank%d.pt.trace.json" % r
        else:
            wall_ms = base_ns // 10**6 + int((t_last + off) / 1000) % 10**6 + int(rng.integers(0, 50))
            fn = "%s_%d.%d.pt.trace.json" % (hosts[h], pid, wall_ms)
        text = json.dumps(trace)
        if c.truncate_rank == r:
            text = text[: int(len(text) * c.truncate_frac)]
        info["paths"].append(write_text(os.path.join(outdir, fn), text, c.gz))
    return info
