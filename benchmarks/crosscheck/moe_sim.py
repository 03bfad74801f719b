"""Independent simulator #4: Mixture-of-Experts training with expert parallelism, as Kineto traces.

Written by a fourth reviewer who read neither ``stallscope/`` nor its samples nor the physics of
the other three simulators (it only borrows ``ddp_sim.write_text``, the plumbing that writes a
file plain or gzipped with header time 0).  numpy only.

The job
-------
``nodes`` hosts x ``gpn`` GPUs.  Expert-parallel (EP) groups are made of whole hosts
(``ep_hosts`` consecutive hosts each, 0 = every host: one EP group = the world); each rank
holds ``experts_per_rank`` experts of its group.  Dense parameters (attention, router) are
replicated on every rank and all-reduced over the world (the default process group "0"); when
there is more than one EP group, expert gradients are all-reduced across the EP replicas (ranks
with the same index inside their EP group).  Per micro-step every rank runs:

* a DataLoader fetch on the CPU (0.6-1.2 ms) and a host-to-device copy;
* forward, per layer: LayerNorm, QKV GEMM, flash attention, out-projection, router GEMM, top-k;
  an all-to-all of the per-expert token counts (int64), then ``.tolist()`` of the received
  counts (a device-to-host copy and a ``cudaStreamSynchronize``: the CPU cannot run ahead of the
  GPU past a MoE layer, as in dropless MoE implementations that need the split sizes on the host);
  permute, the dispatch all-to-all (``all_to_all_single`` with split sizes, bf16 tokens), the
  expert GEMMs (fc1, activation, fc2; their time is proportional to the tokens the rank
  received), the combine all-to-all (the transpose), unpermute + residual;
* backward (on the autograd thread), per layer in reverse: the combine-gradient all-to-all, the
  expert backward (2x forward), the dispatch-gradient all-to-all, the attention backward (2x);
  on the last micro-step of an optimizer step the dense gradient all-reduce of that layer is
  launched right there on its own stream (``overlap=True``) or all of them after backward
  (``overlap=False``), plus the expert-gradient all-reduce across EP replicas;
* on the last micro-step: the compute stream waits for the gradient streams, the optimizer
  (``Optimizer.step#AdamW.step``, multi-tensor-apply kernels);
* ``loss.item()`` (a D2H copy and ``cudaStreamSynchronize``) ends every micro-step.

Gradient accumulation (``accum`` micro-steps per optimizer step) skips the gradient
all-reduces on all but the last micro-step.  ``ProfilerStep#N`` spans one optimizer step, or one
micro-step with ``prof_per_micro=True`` (then only every ``accum``-th ProfilerStep holds the
gradient collectives).  Steps are numbered from ``first_step`` (a profiler schedule with
wait/warmup), not 0.

Physics (true time in microseconds, one clock)
----------------------------------------------
Each rank has a CPU clock (a kernel launch costs 3-8 us of Python/ATen plus a 4-9 us runtime
call, a collective 20-40 us) and in-order streams: compute (7), one NCCL stream per process group
it uses (EP group, default group, EP-replica group), as ``ProcessGroupNCCL`` gives each
communicator its own stream.  A collective's NCCL stream first waits for the compute stream (the
data is produced there); a rank *arrives* at a collective at ``max(launch, its NCCL stream
free, compute work queued before it)``.

* **All-to-all** (grouped send/recv, ``ncclDevKernel_SendRecv``): the transfer i -> j starts at
  ``max(arrival_i, arrival_j)`` and lasts ``latency + bytes_ij / rate_ij`` (latency 8 us inside a
  host, 15 us across hosts, 3 % log-normal noise per pair and instance).  Inside a host every
  GPU's NVLink egress (``nvl_gbs``) is split evenly between its peers in the group; across hosts
  a host's NIC bandwidth (``gpn x nic_gbs``) is split evenly between that host's concurrent
  inter-host flows, and a flow gets the smaller of its sender's and its receiver's share.  A
  rank's kernel ends when the last of its sends and receives is done: early ranks spin in the
  kernel waiting for late peers, so their all-to-all kernels are long.
* **Routing**: ``E = ep_size x experts_per_rank`` experts; every (step, micro-step, layer) draws
  expert popularities from a Dirichlet(150) (natural imbalance of a router with a load-balancing
  loss: per-expert load varies ~8 %), and each source rank's counts deviate a further 5 %
  (normal).  Token counts per pair therefore vary per step; the combine is the transpose of
  the dispatch.  Dropless (no capacity factor): an expert that gets 2x the tokens computes 2x
  longer.
* **Ring all-reduce**: ends on every member at ``max(arrivals) + 40 us + 2(n-1)/n x bytes /
  busbw`` (+- 3 %), ``busbw`` the slowest link of the ring: ``nic_gbs`` per GPU when the group
  spans hosts, NVLink or SHM inside a host.
* **Kernels**: durations from FLOPs at ``tflops`` (attention and experts) or fixed small costs,
  2 % log-normal noise.

Scenarios (``scenario``)
------------------------
``healthy``; ``imbalance`` (every (step, layer) one random expert of each EP group gets
``1 + imbalance`` x its share: load imbalance that moves between experts); ``hot_expert`` (the
experts of ``hot_ranks`` always get ``hot_mult`` x the share); ``straggler`` (``culprit_rank``'s
compute kernels ``factor`` x longer); ``host_stall`` (``culprit_rank``'s DataLoader fetch
``stall_ms`` longer at the start of every optimizer step); ``nic_degraded`` (host
``culprit_host``'s NIC bandwidth x ``factor``); ``fabric`` (every NIC x ``factor``);
``p2p_off`` (host ``culprit_host``'s intra-host links run over SHM at ``factor`` x NVLink);
``jitter`` (every rank's DataLoader fetch gets an exponential delay of mean ``jitter_ms`` every
micro-step).  Every random number is drawn whatever the scenario, so the same job simulated with
the fault off (the *healthy twin*) differs only by the fault: ``lost_frac = (makespan - twin
makespan) / makespan`` is exact.  The twin of ``imbalance`` and ``hot_expert`` is the job with
the natural (balanced) routing.

Trace format
------------
One Kineto JSON per rank, named like ``tensorboard_trace_handler``:
``<host>_<pid>.<time_ns>.pt.trace.json`` (``gz`` = "all" | "none" | "odd": gzip every file,
none, or odd ranks').  ``distributedInfo`` (rank, world size, NCCL version and, with
``with_args``, ``pg_config`` of the groups this rank belongs to), ``deviceProperties`` (H100),
``ProfilerStep#N`` on the main thread, backward ``cpu_op``s on the autograd thread,
``cudaLaunchKernel`` (cbid 211) / ``cudaLaunchKernelExC`` (cbid 430, NCCL) / ``cudaMemcpyAsync``
(41) / ``cudaStreamSynchronize`` (131) / ``cudaEventRecord`` (135) / ``cudaStreamWaitEvent``
(147) runtime events with ``ac2g`` flows to the kernels, ``c10d::alltoall_base_`` >
``record_param_comms`` > ``nccl:all_to_all`` as torch 2.x nests them, a ``gpu_user_annotation``
``nccl:*`` over each NCCL kernel.  With ``with_args`` the ``record_param_comms`` and NCCL kernels
carry ``Collective name`` (``all_to_allv`` for the split all-to-alls, ``all_to_all`` for the
counts, ``allreduce``), ``In/Out msg nelems``, ``In/Out split size`` (rows per peer), ``dtype``,
``Group size``, ``Process Group Name/Description/Ranks``; without it they carry only ids (as
older traces do).  ``new_names``: ``ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)``
and ``ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...)`` (NCCL >= 2.19, here 2.21.5) or
``ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)`` and
``ncclKernel_AllReduce_RING_LL_Sum___nv_bfloat16(...)`` (2.18.3).  Timestamps are the true times
plus a base (a monotonic-clock value for float timestamps with ns digits, epoch microseconds for
integers, ``float_ts``) and one offset per host (uniform +- ``clock_ms``).

Randomness: ``default_rng(seed)`` drives the simulation (identical draws in the twin),
``default_rng(seed + 1000)`` the clocks, pids and file names.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ddp_sim import write_text  # noqa: E402  (plumbing only)

__all__ = ["Cfg", "simulate", "write_bundle"]

COMPUTE = 7


@dataclass
class Cfg:
    name: str = "m"
    scenario: str = "healthy"   # healthy|imbalance|hot_expert|straggler|host_stall|nic_degraded|fabric|p2p_off|jitter
    nodes: int = 2
    gpn: int = 8
    ep_hosts: int = 0           # hosts per EP group (0: all hosts)
    layers: int = 4
    steps: int = 6
    first_step: int = 5
    accum: int = 1
    prof_per_micro: bool = False
    overlap: bool = True
    tokens: int = 4096          # tokens per rank per micro-step
    hidden: int = 2048
    ffn: int = 4096
    topk: int = 2
    experts_per_rank: int = 2
    seq: int = 2048
    nic_gbs: float = 45.0       # per GPU (400 Gb/s NIC at ~90 %)
    nvl_gbs: float = 300.0      # per GPU NVLink egress
    tflops: float = 400.0       # effective bf16 throughput
    seed: int = 0
    culprit_rank: int = -1
    culprit_host: int = -1
    factor: float = 1.0
    stall_ms: float = 0.0
    hot_ranks: list[int] = field(default_factory=list)
    hot_mult: float = 1.0
    imbalance: float = 0.0
    jitter_ms: float = 0.0
    clock_ms: float = 5.0
    gz: str = "none"            # none | all | odd
    with_args: bool = True
    new_names: bool = True
    float_ts: bool = True
    hostfmt: str = "moe-node{:02d}"


# ----------------------------------------------------------------------------------------------
# simulation


class _Sim:
    def __init__(self, cfg: Cfg, fault: bool):
        self.c = cfg
        self.fault = fault
        self.rng = np.random.default_rng(cfg.seed)
        R = cfg.nodes * cfg.gpn
        self.R = R
        self.host_of = np.arange(R) // cfg.gpn
        eh = cfg.ep_hosts or cfg.nodes
        assert cfg.nodes % eh == 0
        self.ep_size = eh * cfg.gpn
        self.n_ep = R // self.ep_size
        self.ep_groups = [np.arange(g * self.ep_size, (g + 1) * self.ep_size) for g in range(self.n_ep)]
        self.rep_groups = [np.arange(i, R, self.ep_size) for i in range(self.ep_size)] if self.n_ep > 1 else []
        sc = cfg.scenario if fault else "healthy"
        self.sc = sc
        self.bnic = np.full(cfg.nodes, cfg.nic_gbs * cfg.gpn)    # GB/s per host
        self.nvl = np.full(cfg.nodes, cfg.nvl_gbs)                # GB/s per GPU
        if sc == "nic_degraded":
            self.bnic[cfg.culprit_host] *= cfg.factor
        elif sc == "fabric":
            self.bnic *= cfg.factor
        elif sc == "p2p_off":
            self.nvl[cfg.culprit_host] *= cfg.factor
        self.slow = np.ones(R)
        if sc == "straggler":
            self.slow[cfg.culprit_rank] = cfg.factor
        self.cpu = self.rng.uniform(0, 300, R)
        self.sf: dict[int, np.ndarray] = {}
        self.rec: list[tuple] = []
        self.steps: list[tuple[int, np.ndarray, np.ndarray]] = []

    # -- primitives -----------------------------------------------------------------------------
    def stream(self, s: int) -> np.ndarray:
        if s not in self.sf:
            self.sf[s] = np.zeros(self.R)
        return self.sf[s]

    def noise(self, sd: float = 0.02) -> np.ndarray:
        return self.rng.lognormal(0.0, sd, self.R)

    def cpu_op(self, name: str, thread: str, dur: np.ndarray) -> None:
        cs = self.cpu.copy()
        self.cpu = cs + dur
        self.rec.append(("cpu", name, thread, cs, self.cpu.copy()))

    def kernel(self, name: str, base_us: float | np.ndarray, thread: str, cpuname: str, kind: str = "kernel",
               nbytes: int = 0, compute: bool = True) -> None:
        pre = self.rng.uniform(3, 8, self.R)
        rt = self.rng.uniform(4, 9, self.R)
        nz = self.noise()
        dur = base_us * nz * (self.slow if compute else 1.0)
        cs = self.cpu.copy()
        ls = cs + pre
        le = ls + rt
        ce = le + 2.0
        st = self.stream(COMPUTE)
        gs = np.maximum(ls + 3.0, st)
        ge = gs + dur
        self.sf[COMPUTE] = ge
        self.cpu = ce
        self.rec.append(("k", name, cpuname, thread, COMPUTE, cs, ce, ls, le, gs, ge, kind, nbytes))

    def sync(self, thread: str, what: str) -> None:
        """D2H copy + cudaStreamSynchronize: ``.tolist()`` / ``.item()``."""
        self.kernel("Memcpy DtoH (Device -> Pageable)", 4.0, thread, what, kind="memcpy", nbytes=8, compute=False)
        s = self.cpu.copy()
        e = np.maximum(s + self.rng.uniform(3, 6, self.R), self.sf[COMPUTE] + 4.0)
        self.cpu = e + 2.0
        self.rec.append(("sync", thread, s, e))

    def _arrive(self, stream: int, thread: str, pre_lo: float, pre_hi: float):
        pre = self.rng.uniform(pre_lo, pre_hi, self.R)
        rt = self.rng.uniform(8, 14, self.R)
        cs = self.cpu.copy()
        ls = cs + pre
        le = ls + rt
        ce = le + 3.0
        ready = np.maximum(self.stream(stream), self.stream(COMPUTE))  # cudaStreamWaitEvent on compute
        a = np.maximum(ls + 4.0, ready)
        self.cpu = ce
        return cs, ce, ls, le, a

    def a2a(self, label: str, mats: list[np.ndarray], elem_bytes: int, row_elems: int, dtype: str,
            thread: str, coll_name: str) -> None:
        """All-to-all in every EP group; ``mats[g][i, j]`` = rows rank i sends to rank j."""
        stream = 20
        cs, ce, ls, le, a = self._arrive(stream, thread, 20, 40)
        R = self.R
        end = np.zeros(R)
        pair_noise = self.rng.lognormal(0.0, 0.03, (self.n_ep, self.ep_size, self.ep_size))
        for g, M in enumerate(self.ep_groups):
            rows = mats[g]
            B = rows * float(row_elems * elem_bytes)
            hosts = self.host_of[M]
            same = hosts[:, None] == hosts[None, :]
            k_h = np.bincount(hosts, minlength=self.c.nodes)
            rate_intra = (self.nvl[hosts] / np.maximum(k_h[hosts] - 1, 1))[:, None] * np.ones((1, len(M)))
            pos = (B > 0) & ~same
            fout = np.bincount(hosts, weights=pos.sum(1), minlength=self.c.nodes)
            fin = np.bincount(hosts, weights=pos.sum(0), minlength=self.c.nodes)
            sh_out = self.bnic / np.maximum(fout, 1)
            sh_in = self.bnic / np.maximum(fin, 1)
            rate_inter = np.minimum(sh_out[hosts][:, None], sh_in[hosts][None, :])
            rate = np.where(same, rate_intra, rate_inter) * 1e3           # bytes / us
            lat = np.where(same, 8.0, 15.0)
            t = (lat + B / rate) * pair_noise[g]
            aa = a[M]
            fin_t = np.maximum(aa[:, None], aa[None, :]) + t
            np.fill_diagonal(fin_t, -np.inf)
            selfcopy = aa + 6.0 + np.diag(B) / 2.0e6                         # own rows: HBM copy at ~2 TB/s
            end[M] = np.maximum(np.maximum(fin_t.max(1), fin_t.max(0)), selfcopy)
        self.sf[stream] = end
        self.sf[COMPUTE] = np.maximum(self.sf[COMPUTE], end)  # work.wait()
        self.rec.append(("coll", label, coll_name, "ep", thread, stream, cs, ce, ls, le, a, end,
                         [m.copy() for m in mats], row_elems, dtype))

    def allreduce(self, label: str, pg: str, nbytes: float, thread: str) -> None:
        stream = 24 if pg == "world" else 28
        groups = [np.arange(self.R)] if pg == "world" else self.rep_groups
        cs, ce, ls, le, a = self._arrive(stream, thread, 15, 25)
        jit = self.rng.lognormal(0.0, 0.03, len(groups))
        end = np.zeros(self.R)
        for gi, M in enumerate(groups):
            n = len(M)
            hosts = self.host_of[M]
            k_h = np.bincount(hosts, minlength=self.c.nodes)
            bws = []
            used = np.unique(hosts)
            if len(used) > 1:
                bws += [self.bnic[h] / self.c.gpn for h in used]
            bws += [self.nvl[h] for h in used if k_h[h] > 1]
            busbw = min(bws) * 1e3
            end[M] = a[M].max() + (40.0 + 2.0 * (n - 1) / n * nbytes / busbw) * jit[gi]
        self.sf[stream] = end
        self.rec.append(("coll", label, "allreduce", pg, thread, stream, cs, ce, ls, le, a, end, None,
                         int(nbytes // 2), "BFloat16"))

    def wait_streams(self, streams: list[int], thread: str) -> None:
        t = self.cpu.copy()
        for s in streams:
            if s in self.sf:
                self.sf[COMPUTE] = np.maximum(self.sf[COMPUTE], self.sf[s])
        self.cpu = t + 3.0
        self.rec.append(("wait", thread, t))

    # -- routing ----------------------------------------------------------------------------------
    def routing(self) -> list[np.ndarray]:
        c = self.c
        E = self.ep_size * c.experts_per_rank
        mats = []
        for M in self.ep_groups:
            p = self.rng.dirichlet(np.full(E, 150.0))
            hot = int(self.rng.integers(E))
            z = self.rng.standard_normal((len(M), E))
            mult = np.ones(E)
            if self.sc == "imbalance":
                mult[hot] += c.imbalance
            elif self.sc == "hot_expert":
                for r in c.hot_ranks:
                    if r in M:
                        li = int(np.where(M == r)[0][0])
                        mult[li * c.experts_per_rank:(li + 1) * c.experts_per_rank] = c.hot_mult
            p = p * mult
            p /= p.sum()
            w = np.clip(p[None, :] * (1.0 + 0.05 * z), 1e-9, None)
            w /= w.sum(1, keepdims=True)
            x = w * c.tokens * c.topk
            n_ie = np.floor(x)
            # largest remainder: the tokens lost to flooring go to the experts with the largest
            # fractions (first version gave them all to expert 0, a hidden hot expert on rank 0)
            short = (c.tokens * c.topk - n_ie.sum(1)).astype(int)
            order = np.argsort(-(x - n_ie), axis=1, kind="stable")
            for i in range(len(M)):
                n_ie[i, order[i, :short[i]]] += 1
            rows = n_ie.reshape(len(M), len(M), c.experts_per_rank).sum(2)
            mats.append(rows)
        return mats

    # -- program ---------------------------------------------------------------------------------
    def run(self) -> None:
        c = self.c
        R = self.R
        T, H, F = c.tokens, c.hidden, c.ffn
        attn_flops = 8.0 * T * H * H + 4.0 * T * c.seq * H
        attn_us = attn_flops / (c.tflops * 1e6)
        exp_flops_tok = 4.0 * H * F
        E_all = self.ep_size * c.experts_per_rank
        dense_bytes = (4.0 * H * H + H * E_all + 2 * H) * 2.0
        exp_bytes = c.experts_per_rank * 2.0 * H * F * 2.0
        gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
        gemm_nn = gemm.replace("_tn_n_", "_nn_n_")
        step_no = c.first_step
        for s in range(c.steps):
            for m in range(c.accum):
                last = m == c.accum - 1
                if m == 0 or c.prof_per_micro:
                    st_start = self.cpu.copy()
                # DataLoader
                fetch = self.rng.uniform(600, 1200, R)
                stall = self.rng.uniform(0.8, 1.2, R)
                jit = self.rng.exponential(1.0, R)
                if self.sc == "host_stall" and m == 0:
                    fetch[c.culprit_rank] += c.stall_ms * 1000.0 * stall[c.culprit_rank]
                if self.sc == "jitter":
                    fetch = fetch + c.jitter_ms * 1000.0 * jit
                self.cpu_op("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "main", fetch)
                self.kernel("Memcpy HtoD (Pinned -> Device)", 18.0, "main", "aten::copy_", kind="memcpy",
                            nbytes=T * 8, compute=False)
                routes = [self.routing() for _ in range(c.layers)]
                recv = [np.zeros(R) for _ in range(c.layers)]
                for li in range(c.layers):
                    for g, M in enumerate(self.ep_groups):
                        recv[li][M] = routes[li][g].sum(0)
                # forward
                for li in range(c.layers):
                    self.kernel("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)", 28.0, "main", "aten::native_layer_norm")
                    self.kernel(gemm, attn_us * 0.42, "main", "aten::mm")
                    self.kernel("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, true, false, false, false, true, true, false>(flash::Flash_fwd_params)", attn_us * 0.43, "main", "FlashAttnFunc")
                    self.kernel(gemm, attn_us * 0.15, "main", "aten::mm")
                    self.kernel(gemm, 14.0, "main", "aten::mm")
                    self.kernel("void at::native::sbtopk::gatherTopK<c10::BFloat16, unsigned int, 2, false>(at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, unsigned int, unsigned int, bool, unsigned int, unsigned int, at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, unsigned int, at::cuda::detail::TensorInfo<long, unsigned int>, unsigned int)", 12.0, "main", "aten::topk")
                    cnt = [np.full((len(M), len(M)), float(c.experts_per_rank)) for M in self.ep_groups]
                    self.a2a(f"counts{li}", cnt, 8, 1, "Long", "main", "all_to_all")
                    self.sync("main", "aten::_local_scalar_dense")
                    self.kernel("void at::native::index_elementwise_kernel<128, 4>(long, at::native::gpu_index_kernel)", 32.0, "main", "aten::index_select")
                    self.a2a(f"dispatch{li}", routes[li], 2, H, "BFloat16", "main", "all_to_allv")
                    eu = exp_flops_tok * recv[li] / (c.tflops * 1e6)
                    self.kernel(gemm, eu * 0.5, "main", "aten::mm")
                    self.kernel("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)", eu * 0.05, "main", "aten::gelu")
                    self.kernel(gemm, eu * 0.45, "main", "aten::mm")
                    self.a2a(f"combine{li}", [x.T.copy() for x in routes[li]], 2, H, "BFloat16", "main", "all_to_allv")
                    self.kernel("void at::native::index_elementwise_kernel<128, 4>(long, at::native::gpu_index_kernel)", 34.0, "main", "aten::index_add_")
                self.kernel("void at::native::cunn_SoftMaxForward<4, c10::BFloat16, float, float, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, c10::BFloat16 const*, int)", 60.0, "main", "aten::_log_softmax")
                # backward
                self.cpu_op("autograd::engine::evaluate_function: NllLossBackward0", "bwd", self.rng.uniform(15, 30, R))
                buckets = []
                for li in reversed(range(c.layers)):
                    self.kernel("void at::native::index_elementwise_kernel<128, 4>(long, at::native::gpu_index_kernel)", 34.0, "bwd", "autograd::engine::evaluate_function: IndexAddBackward0")
                    self.a2a(f"combine_bwd{li}", routes[li], 2, H, "BFloat16", "bwd", "all_to_allv")
                    eu = exp_flops_tok * recv[li] / (c.tflops * 1e6)
                    self.kernel(gemm_nn, eu * 0.45, "bwd", "autograd::engine::evaluate_function: MmBackward0")
                    self.kernel(gemm, eu * 0.45, "bwd", "autograd::engine::evaluate_function: MmBackward0")
                    self.kernel("void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, at::detail::Array<char*, 3> >(int, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, at::detail::Array<char*, 3>)", eu * 0.1, "bwd", "autograd::engine::evaluate_function: GeluBackward0")
                    self.kernel(gemm_nn, eu * 0.5, "bwd", "autograd::engine::evaluate_function: MmBackward0")
                    self.kernel(gemm, eu * 0.5, "bwd", "autograd::engine::evaluate_function: MmBackward0")
                    self.a2a(f"dispatch_bwd{li}", [x.T.copy() for x in routes[li]], 2, H, "BFloat16", "bwd", "all_to_allv")
                    self.kernel("void at::native::index_elementwise_kernel<128, 4>(long, at::native::gpu_index_kernel)", 40.0, "bwd", "autograd::engine::evaluate_function: IndexSelectBackward0")
                    self.kernel(gemm_nn, 28.0, "bwd", "autograd::engine::evaluate_function: MmBackward0")
                    self.kernel(gemm_nn, attn_us * 0.30, "bwd", "autograd::engine::evaluate_function: MmBackward0")
                    self.kernel("void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t>, true, false, false, false, false, true, false>(flash::Flash_bwd_params)", attn_us * 0.95, "bwd", "autograd::engine::evaluate_function: FlashAttnFuncBackward")
                    self.kernel(gemm_nn, attn_us * 0.75, "bwd", "autograd::engine::evaluate_function: MmBackward0")
                    self.kernel("void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, c10::BFloat16*, int)", 45.0, "bwd", "autograd::engine::evaluate_function: NativeLayerNormBackward0")
                    if last:
                        if c.overlap:
                            self.allreduce(f"dense{li}", "world", dense_bytes, "bwd")
                            if self.rep_groups:
                                self.allreduce(f"expert{li}", "rep", exp_bytes, "bwd")
                        else:
                            buckets.append(li)
                if last:
                    for li in buckets:
                        self.allreduce(f"dense{li}", "world", dense_bytes, "main")
                        if self.rep_groups:
                            self.allreduce(f"expert{li}", "rep", exp_bytes, "main")
                    self.wait_streams([24, 28], "main")
                    opt0 = self.cpu.copy()
                    for _ in range(4):
                        self.kernel("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, double*, double*>(at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, double*, double*)", 150.0, "main", "aten::_fused_adamw_")
                    self.rec.append(("ann", "Optimizer.step#AdamW.step", "main", opt0, self.cpu.copy()))
                self.sync("main", "aten::_local_scalar_dense")
                if last or c.prof_per_micro:
                    self.steps.append((step_no, st_start, self.cpu.copy()))
                    step_no += 1

    def makespan(self) -> float:
        return float(max(e.max() for _, _, e in self.steps) - min(s.min() for _, s, _ in self.steps))


def simulate(cfg: Cfg) -> tuple[_Sim, float]:
    """Simulate the job and its healthy twin; return the job and the true lost fraction."""
    job = _Sim(cfg, fault=True)
    job.run()
    if cfg.scenario == "healthy":
        return job, 0.0
    twin = _Sim(cfg, fault=False)
    twin.run()
    mk, mk0 = job.makespan(), twin.makespan()
    return job, (mk - mk0) / mk


# ----------------------------------------------------------------------------------------------
# trace writing


def _kname(kind: str, new: bool) -> str:
    if kind == "all_to_all":
        return ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)" if new else
                "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)")
    return ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)" if new else
            "ncclKernel_AllReduce_RING_LL_Sum___nv_bfloat16(ncclDevComm*, unsigned long, ncclWork*)")


def _rank_trace(sim: _Sim, r: int, cfg: Cfg, pid: int, base_us: float, off_us: float, pg_names: dict) -> str:
    R = sim.R
    local = r % cfg.gpn
    tid_main = pid
    tid_bwd = pid + 57
    tids = {"main": tid_main, "bwd": tid_bwd}
    ev: list[str] = []
    fts = cfg.float_ts
    ext = [0]
    corr = [sim.R * 0 + 1000 + r * 7]

    def T(t: float) -> str:
        v = base_us + off_us + t
        return f"{v:.3f}" if fts else str(int(round(v)))

    def D(d: float) -> str:
        return f"{max(d, 0.0):.3f}" if fts else str(max(int(round(d)), 0))

    def X(cat: str, name: str, pid_: Any, tid: Any, s: float, e: float, args: dict) -> None:
        ev.append('{"ph": "X", "cat": "%s", "name": %s, "pid": %s, "tid": %s, "ts": %s, "dur": %s, "args": %s}'
                  % (cat, json.dumps(name), json.dumps(pid_), json.dumps(tid), T(s), D(e - s), json.dumps(args)))

    def new_ext() -> int:
        ext[0] += 1
        return ext[0]

    def new_corr() -> int:
        corr[0] += 1
        return corr[0]

    def runtime(name: str, cbid: int, tid: int, s: float, e: float, ex: int, flow: bool) -> int:
        cid = new_corr()
        X("cuda_runtime", name, pid, tid, s, e, {"External id": ex, "cbid": cbid, "correlation": cid})
        if flow:
            ev.append('{"ph": "s", "id": %d, "pid": %d, "tid": %d, "ts": %s, "cat": "ac2g", "name": "ac2g"}'
                      % (cid, pid, tid, T(s)))
        return cid

    def gpu(cat: str, name: str, stream: int, s: float, e: float, ex: int, cid: int, extra: dict) -> None:
        args = {"External id": ex, "queued": 0, "device": local, "context": 1, "stream": stream, "correlation": cid}
        args.update(extra)
        X(cat, name, local, stream, s, e, args)
        ev.append('{"ph": "f", "id": %d, "pid": %d, "tid": %d, "ts": %s, "cat": "ac2g", "name": "ac2g", "bp": "e"}'
                  % (cid, local, stream, T(s)))

    ep_g = r // sim.ep_size
    ep_members = sim.ep_groups[ep_g]
    pos_in_ep = r - ep_members[0]
    rep_members = sim.rep_groups[pos_in_ep] if sim.rep_groups else None

    for step_no, s0, e0 in sim.steps:
        X("user_annotation", f"ProfilerStep#{step_no}", pid, tid_main, s0[r], e0[r], {"External id": new_ext(), "Record function id": 0})
    for rec in sim.rec:
        kind = rec[0]
        if kind == "cpu":
            _, name, th, cs, ce = rec
            X("cpu_op", name, pid, tids[th], cs[r], ce[r], {"External id": new_ext(), "Record function id": 0})
        elif kind == "ann":
            _, name, th, cs, ce = rec
            X("user_annotation", name, pid, tids[th], cs[r], ce[r], {"External id": new_ext(), "Record function id": 0})
        elif kind == "wait":
            _, th, t = rec
            runtime("cudaStreamWaitEvent", 147, tids[th], t[r], t[r] + 1.2, 0, False)
        elif kind == "sync":
            _, th, s, e = rec
            runtime("cudaStreamSynchronize", 131, tids[th], s[r], e[r], 0, False)
        elif kind == "k":
            _, name, cpuname, th, stream, cs, ce, ls, le, gs, ge, kk, nb = rec
            ex = new_ext()
            tid = tids[th]
            X("cpu_op", cpuname, pid, tid, cs[r], ce[r], {"External id": ex, "Record function id": 0, "Sequence number": ex})
            if kk == "memcpy":
                cid = runtime("cudaMemcpyAsync", 41, tid, ls[r], le[r], ex, True)
                gpu("gpu_memcpy", name, stream, gs[r], ge[r], ex, cid, {"bytes": nb, "memory bandwidth (GB/s)": round(nb / max(ge[r] - gs[r], 0.1) / 1e3, 6)})
            else:
                cid = runtime("cudaLaunchKernel", 211, tid, ls[r], le[r], ex, True)
                gpu("kernel", name, stream, gs[r], ge[r], ex, cid,
                    {"registers per thread": 128, "shared memory": 49152, "blocks per SM": 1.0, "warps per SM": 8.0,
                     "grid": [132, 1, 1], "block": [256, 1, 1], "est. achieved occupancy %": 12})
        elif kind == "coll":
            _, label, cname, pg, th, stream, cs, ce, ls, le, a, end, mats, row_elems, dtype = rec
            tid = tids[th]
            if pg == "ep":
                members = ep_members
                rows = mats[ep_g]
                li = pos_in_ep
                in_split = [int(x) for x in rows[li]]
                out_split = [int(x) for x in rows[:, li]]
                in_n = int(sum(in_split)) * row_elems
                out_n = int(sum(out_split)) * row_elems
                if cname == "all_to_all":
                    in_split, out_split = [], []
                pgname = pg_names["ep"][ep_g]
                desc = "undefined"
                op_cpu, ann, kk = "c10d::alltoall_base_", "nccl:all_to_all", "all_to_all"
            elif pg == "world":
                members = np.arange(R)
                in_n = out_n = row_elems
                in_split = out_split = []
                pgname, desc = "0", "default_pg"
                op_cpu, ann, kk = "c10d::allreduce_", "nccl:all_reduce", "allreduce"
            else:
                members = rep_members
                in_n = out_n = row_elems
                in_split = out_split = []
                pgname = pg_names["rep"][pos_in_ep]
                desc = "undefined"
                op_cpu, ann, kk = "c10d::allreduce_", "nccl:all_reduce", "allreduce"
            meta = {"Collective name": cname, "In msg nelems": in_n, "Out msg nelems": out_n,
                    "Group size": len(members), "dtype": dtype, "In split size": json.dumps(in_split),
                    "Out split size": json.dumps(out_split), "Global rank start": int(members[0]),
                    "Global rank stride": int(members[1] - members[0]) if len(members) > 1 else 1,
                    "Process Group Name": pgname, "Process Group Description": desc,
                    "Process Group Ranks": json.dumps([int(x) for x in members])}
            ex0 = new_ext()
            X("cpu_op", op_cpu, pid, tid, cs[r], ce[r], {"External id": ex0, "Record function id": 0})
            ex = new_ext()
            rp_args = {"External id": ex, "Record function id": 0}
            if cfg.with_args:
                rp_args.update(meta)
            X("cpu_op", "record_param_comms", pid, tid, cs[r] + 1.0, ce[r] - 1.0, rp_args)
            ex2 = new_ext()
            X("user_annotation", ann, pid, tid, cs[r] + 2.0, ce[r] - 2.0, {"External id": ex2, "Record function id": 0})
            runtime("cudaEventRecord", 135, tid, ls[r] - 3.0, ls[r] - 2.2, ex, False)
            runtime("cudaStreamWaitEvent", 147, tid, ls[r] - 2.0, ls[r] - 1.0, ex, False)
            cid = runtime("cudaLaunchKernelExC", 430, tid, ls[r], le[r], ex, True)
            kargs = {"registers per thread": 96, "shared memory": 41744 if kk == "all_to_all" else 87568,
                     "blocks per SM": 0.242424, "warps per SM": 4.848485,
                     "grid": [32, 1, 1], "block": [640 if kk == "all_to_all" else 544, 1, 1],
                     "est. achieved occupancy %": 0}
            if cfg.with_args:
                kargs.update(meta)
            gpu("kernel", _kname(kk, cfg.new_names), stream, a[r], end[r], ex, cid, kargs)
            X("gpu_user_annotation", ann, local, stream, a[r], end[r], {"External id": ex2})
            runtime("cudaEventRecord", 135, tid, le[r] + 0.5, le[r] + 1.2, ex, False)
    # metadata
    t0 = base_us + off_us + min(s.min() for _, s, _ in sim.steps) - 50.0
    meta_ev = []

    def M(name: str, p: Any, t: Any, args: dict) -> None:
        meta_ev.append('{"name": "%s", "ph": "M", "ts": %s, "pid": %s, "tid": %s, "args": %s}'
                       % (name, f"{t0:.3f}" if fts else str(int(t0)), json.dumps(p), json.dumps(t), json.dumps(args)))

    M("process_name", pid, 0, {"name": "python3.11"})
    M("process_labels", pid, 0, {"labels": "CPU"})
    M("process_sort_index", pid, 0, {"sort_index": pid})
    M("process_name", local, 0, {"name": "python3.11"})
    M("process_labels", local, 0, {"labels": f"GPU {local}"})
    M("process_sort_index", local, 0, {"sort_index": 16777216 + local})
    for st in sorted(sim.sf):
        M("thread_name", local, st, {"name": f"stream {st} "})
        M("thread_sort_index", local, st, {"sort_index": st})
    M("thread_name", pid, tid_main, {"name": f"thread {tid_main} (pt_main_thread)"})
    M("thread_sort_index", pid, tid_main, {"sort_index": tid_main})
    M("thread_name", pid, tid_bwd, {"name": f"thread {tid_bwd} (pt_autograd_0)"})
    M("thread_sort_index", pid, tid_bwd, {"sort_index": tid_bwd})

    dev = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912, "computeMajor": 9,
           "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
           "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132,
           "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472}
    devs = [dict(dev, id=i) for i in range(cfg.gpn)]
    dist: dict[str, Any] = {"backend": "nccl", "rank": r, "world_size": R}
    if cfg.with_args:
        pgc = [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": R,
                "ranks": list(range(R))},
               {"pg_name": pg_names["ep"][ep_g], "pg_desc": "undefined", "backend_config": "cuda:nccl",
                "pg_size": len(ep_members), "ranks": [int(x) for x in ep_members]}]
        if rep_members is not None:
            pgc.append({"pg_name": pg_names["rep"][pos_in_ep], "pg_desc": "undefined", "backend_config": "cuda:nccl",
                        "pg_size": len(rep_members), "ranks": [int(x) for x in rep_members]})
        dist.update({"pg_count": len(pgc), "pg_config": pgc})
    dist["nccl_version"] = "2.21.5" if cfg.new_names else "2.18.3"
    head = {"schemaVersion": 1, "deviceProperties": devs, "distributedInfo": dist, "record_shapes": 0,
            "with_stack": 0, "profile_memory": 0}
    hj = json.dumps(head)[:-1]
    return (hj + ', "traceEvents": [\n' + ",\n".join(meta_ev + ev) +
            '\n], "traceName": "trace", "displayTimeUnit": "ms"}')


def write_bundle(cfg: Cfg, outdir: str) -> dict[str, Any]:
    """Simulate ``cfg`` (and its healthy twin) and write one trace per rank into ``outdir`` (replaced)."""
    sim, lost = simulate(cfg)
    rng = np.random.default_rng(cfg.seed + 1000)
    if os.path.exists(outdir):
        shutil.rmtree(outdir)
    os.makedirs(outdir)
    offs = rng.uniform(-cfg.clock_ms, cfg.clock_ms, cfg.nodes) * 1000.0
    # float timestamps on a monotonic-clock base (as Kineto's ns-resolution export), integers on epoch us
    mono = float(rng.integers(2_000_000, 6_000_000)) * 1e6
    epoch = 1_716_000_000_000_000.0 + float(rng.integers(0, 10**9))
    base_us = mono if cfg.float_ts else epoch
    pids = rng.integers(20_000, 400_000, sim.R)
    stamp = 1_716_000_100_000_000_000 + int(rng.integers(0, 10**12))
    # process group names: torch numbers new_group() calls in creation order after the default "0"
    pg_names = {"ep": [str(1 + g) for g in range(sim.n_ep)],
                "rep": [str(1 + sim.n_ep + i) for i in range(len(sim.rep_groups))]}
    paths = []
    for r in range(sim.R):
        h = int(sim.host_of[r])
        host = cfg.hostfmt.format(h + 1)
        txt = _rank_trace(sim, r, cfg, int(pids[r]), base_us, float(offs[h]), pg_names)
        fname = f"{host}_{int(pids[r])}.{stamp + r * 1_234_567 + int(rng.integers(0, 10**6))}.pt.trace.json"
        gz = cfg.gz == "all" or (cfg.gz == "odd" and r % 2 == 1)
        paths.append(write_text(os.path.join(outdir, fname), txt, gz))
    return {"paths": paths, "lost_frac": lost}


if __name__ == "__main__":  # quick look: python moe_sim.py scenario [key=value ...]
    kw: dict[str, Any] = {}
    for a in sys.argv[2:]:
        k, v = a.split("=", 1)
        try:
            kw[k] = json.loads(v)
        except ValueError:
            kw[k] = v
    c = Cfg(scenario=sys.argv[1] if len(sys.argv) > 1 else "healthy", **kw)
    job, lf = simulate(c)
    st = [(n, float((e - s).mean()) / 1000) for n, s, e in job.steps]
    print(f"R={job.R} steps(ms)={[round(x, 2) for _, x in st]} makespan={job.makespan() / 1000:.1f} ms lost={lf:.4f}")
