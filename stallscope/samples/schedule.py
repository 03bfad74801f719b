"""Per-rank programs: what each process does, step by step, for each parallelism plan.

A program is a flat list of small tuples (opcodes below) in the order the process issues them:
CPU spans (``cpu_op`` / ``user_annotation``), CPU busy time, kernel launches, collective calls,
stream-to-stream waits, stream synchronizations and step boundaries. The physics engine
(:mod:`stallscope.samples.physics`) executes the programs of all ranks together and turns them
into timed events.

Programs carry *durations*, never absolute times. All random variation (kernel-duration noise,
CPU-cost noise) is drawn here from per-rank RNG streams that faults never touch, and faults
only scale or add durations, so the program of the same job without a fault differs from the
faulty one only where the fault acts (the what-if stays honest).

The plans (all in bf16 with fp32 or bf16 gradients):

``ddp``       forward; backward with gradient buckets all-reduced over the world as soon as
              they are ready (overlapping backward); the optimizer waits for the last bucket.
``fsdp``      full sharding over the world: per layer an all-gather of parameters before its
              forward and again before its backward (prefetched one layer ahead), and a
              reduce-scatter of its gradients after its backward.
``hsdp``      hybrid sharding: the FSDP collectives inside each host (``mesh_shard``) and an
              all-reduce of each gradient shard across hosts (``mesh_replicate``).
``tp_dp``     tensor parallel inside a host (two blocking all-reduces per layer in forward and
              two in backward) and data parallel across hosts (bucketed all-reduce).
``pipeline``  stages across hosts, GPipe schedule: all micro-batch forwards (recv activation,
              compute, send activation), then all backwards (recv gradient, compute, send
              gradient), then a data-parallel all-reduce inside each stage. Stages legitimately
              differ in work (embedding on the first, head and loss on the last).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stallscope.samples import kernels as K
from stallscope.samples.faults import Effects
from stallscope.samples.model import Job, stage_of

# opcodes
OPEN, CLOSE, CPU, KERN, COLL, WAITS, SYNC, STEP = range(8)

COMPUTE = 7  #: the default CUDA stream id in Kineto traces
MAIN, AUTOGRAD = 0, 1  #: CPU threads

_DTYPE_BYTES = {"Float": 4, "BFloat16": 2, "Half": 2, "Long": 8, "Byte": 1}


@dataclass
class ModelSpec:
    """The model and its costs, shared by every rank (derived from the healthy network so that
    communication and computation are of comparable size)."""

    layers: int
    detail: str
    fwd: tuple[K.KernelKind, ...]
    bwd: tuple[K.KernelKind, ...]
    t_fwd_layer: float  #: ns of forward GPU time per layer (per rank)
    bwd_ratio: float
    t_loss: float
    t_opt: float
    t_dataloader: float  #: ns of host work in ``__next__``
    t_h2d: float  #: ns of the batch copy
    h2d_bytes: int
    grad_dtype: str
    grad_bytes_layer: int  #: bytes of gradients per layer to all-reduce (ddp, tp_dp dp-part)
    bucket_layers: int  #: layers per DDP bucket
    ag_bytes_layer: int  #: fsdp/hsdp: bytes of one layer's full parameters (all-gather output)
    tp_bytes: int  #: tp_dp: bytes of one activation all-reduce
    pp_bytes: int  #: pipeline: bytes of one activation send per micro-batch
    stage_scale: list[float] = field(default_factory=list)  #: pipeline: compute per stage (relative)
    cpu_op_ns: float = 9000.0  #: typical self time of a cpu op
    launch_ns: float = 5000.0  #: typical cudaLaunchKernel duration
    noise: float = 0.02  #: sigma of the log-normal kernel-duration noise
    cpu_noise: float = 0.15  #: sigma of the log-normal CPU-cost noise
    host_noise: float = 0.05  #: sigma of the log-normal noise on data-loading time
    hidden_log_name: str = "log_metrics"

    def plan(self) -> dict[str, Any]:
        return {"layers": self.layers, "detail": self.detail, "fwd_layer_ms": self.t_fwd_layer / 1e6,
                "bwd_ratio": self.bwd_ratio, "grad_dtype": self.grad_dtype, "grad_bytes_per_layer": self.grad_bytes_layer,
                "bucket_layers": self.bucket_layers, "allgather_bytes_per_layer": self.ag_bytes_layer,
                "tp_allreduce_bytes": self.tp_bytes, "pp_activation_bytes": self.pp_bytes,
                "stage_scale": self.stage_scale, "dataloader_ms": self.t_dataloader / 1e6,
                "noise_sigma": self.noise}


# -- sizing ----------------------------------------------------------------------------------

def build_spec(job: Job, rng: np.random.Generator, *, detail: str, noise: str, step_ms: float | None = None,
               imbalance: float = 0.0) -> ModelSpec:
    """Draw the model size and costs. Communication sizes are chosen so that, on the *healthy*
    network, the collectives take a sizeable but hideable share of compute (as in real tuned
    jobs); a fault then shows up as lost time rather than vanishing in the overlap."""
    from stallscope.samples.physics import nominal_bandwidths

    fwd, bwd = K.DETAIL[detail]
    p = job.parallelism
    layers = {"full": int(rng.integers(4, 7)), "lean": int(rng.integers(4, 9)), "sparse": int(rng.integers(3, 6))}[detail]
    if p == "pipeline":
        layers = int(rng.integers(2, 4))
    step_ms = step_ms or float(rng.uniform(90, 260))
    bwd_ratio = float(rng.uniform(1.8, 2.2))
    t_opt = step_ms * 1e6 * float(rng.uniform(0.03, 0.06))
    t_loss = step_ms * 1e6 * 0.01
    if p == "pipeline":
        # per stage compute; the micro-batches split it
        t_layer = (step_ms * 1e6 * 0.55) / (layers * (1 + bwd_ratio))
    else:
        t_layer = (step_ms * 1e6 - t_opt - 2 * t_loss) / (layers * (1 + bwd_ratio))
    sigma = {"low": 0.01, "medium": 0.025, "high": 0.05}[noise]
    intra, inter = nominal_bandwidths(job)
    n, G, N = job.world, job.gpus_per_node, job.n_nodes
    t_bwd = t_layer * bwd_ratio * layers
    grad_dtype = str(rng.choice(["Float", "BFloat16"], p=[0.6, 0.4]))
    # ddp: all-reduce time of all gradients ~ ratio x backward time
    ratio = float(rng.uniform(0.45, 0.8))
    eff = min(intra, inter) if N > 1 else intra
    total = ratio * (t_bwd / 1e9) * eff * 1e9 / (2 * (n - 1) / n)
    tp_bytes = 0
    pp_bytes = 0
    ag_bytes = 0
    if p == "tp_dp":
        dp = n // job.tp
        share = inter / job.tp  # a dp group has G/tp members per host: that share of the host's NICs
        total = ratio * (t_bwd / 1e9) * share * 1e9 / (2 * (dp - 1) / dp) if dp > 1 else 0
        # one activation all-reduce ~ 8-15% of a layer's forward on NVLink
        tp_bytes = int(float(rng.uniform(0.08, 0.15)) * (t_layer / 1e9) * intra * 1e9 / (2 * (job.tp - 1) / job.tp))
    if p in ("fsdp", "hsdp"):
        m = G if p == "hsdp" else n
        bw = intra if p == "hsdp" else eff
        # one layer's all-gather ~ 40-75% of its forward
        ag_bytes = int(float(rng.uniform(0.4, 0.75)) * (t_layer / 1e9) * bw * 1e9 / ((m - 1) / m))
        if p == "hsdp" and N > 1:
            # and the all-reduce of its gradient shard across hosts (one member per host, so 1/G of
            # the host's NICs) ~ 30-60% of the layer's backward
            cap = float(rng.uniform(0.3, 0.6)) * (t_layer * bwd_ratio / 1e9) * inter * 1e9 / (2 * (N - 1) / N)
            ag_bytes = int(min(ag_bytes, cap))
    if p == "pipeline":
        # one activation send per micro-batch ~ 5-15% of the micro-batch's stage forward
        per_mb = t_layer * layers / job.microbatches
        pp_bytes = int(float(rng.uniform(0.05, 0.15)) * (per_mb / 1e9) * inter / G * 1e9)
        dp = n // job.pp
        total = (ratio * 0.5 * (t_bwd / 1e9) * intra * 1e9 / (2 * (dp - 1) / dp)) if dp > 1 else 0
    grad_layer = int(total / layers) if total else 0
    esize = _DTYPE_BYTES[grad_dtype]
    grad_layer -= grad_layer % (esize * 64)
    ag_bytes -= ag_bytes % (2 * 64 * max(n, 1))
    tp_bytes -= tp_bytes % 128
    pp_bytes -= pp_bytes % 128
    # DDP buckets of about 25 MB, at layer granularity
    bucket_layers = max(1, min(layers, int(round(25e6 / grad_layer)) if grad_layer else layers))
    stage_scale: list[float] = []
    if p == "pipeline":
        stage_scale = [1.0] * job.pp
        stage_scale[0] = 1.0 + float(rng.uniform(0.05, 0.12))  # embedding
        stage_scale[-1] = 1.0 + float(rng.uniform(0.12, 0.3))  # head + loss
        if imbalance:
            for s in range(job.pp):
                stage_scale[s] *= 1.0 + imbalance * float(rng.uniform(-1, 1))
    batch = int(rng.choice([4, 8, 16]))
    return ModelSpec(
        layers=layers, detail=detail, fwd=fwd, bwd=bwd, t_fwd_layer=t_layer, bwd_ratio=bwd_ratio, t_loss=t_loss,
        t_opt=t_opt, t_dataloader=step_ms * 1e6 * float(rng.uniform(0.008, 0.02)),
        t_h2d=float(rng.uniform(150e3, 400e3)), h2d_bytes=batch * 2048 * 8, grad_dtype=grad_dtype,
        grad_bytes_layer=grad_layer, bucket_layers=bucket_layers, ag_bytes_layer=ag_bytes, tp_bytes=tp_bytes,
        pp_bytes=pp_bytes, stage_scale=stage_scale, cpu_op_ns=float(rng.uniform(6e3, 14e3)),
        launch_ns=float(rng.uniform(4e3, 7e3)), noise=sigma, cpu_noise={"low": 0.1, "medium": 0.2, "high": 0.35}[noise],
        host_noise={"low": 0.03, "medium": 0.08, "high": 0.15}[noise],
        hidden_log_name=str(rng.choice(["log_metrics", "wandb.log", "Trainer._log_step", "checkpoint.async_save"])),
    )


# -- the builder -----------------------------------------------------------------------------

@dataclass
class CollSpec:
    """What a collective call carries (besides the group and the sequence number)."""

    op: str  #: allreduce | allgather | reducescatter | broadcast | send | recv
    cname: str  #: ``Collective name`` as record_param_comms writes it
    dtype: str
    in_nelems: int
    out_nelems: int
    nbytes: int  #: size in the nccl-tests convention (what the bandwidth model moves)
    peer: int | None = None  #: global rank of the other side (send/recv)


_C10D = {"allreduce": "c10d::allreduce_", "_allgather_base": "c10d::_allgather_base_",
         "_reduce_scatter_base": "c10d::_reduce_scatter_base_", "send": "c10d::send", "recv": "c10d::recv_",
         "broadcast": "c10d::broadcast_"}
_ANNOT = {"allreduce": "nccl:all_reduce", "_allgather_base": "nccl:_all_gather_base",
          "_reduce_scatter_base": "nccl:_reduce_scatter_base", "broadcast": "nccl:broadcast"}


class Builder:
    """Appends one rank's ops. Noise comes from this rank's own RNG streams, consumed in a fixed
    order that does not depend on faults."""

    def __init__(self, job: Job, spec: ModelSpec, eff: Effects, rank: int, seed: int, streams: dict[str, int]):
        self.job, self.spec, self.eff, self.rank = job, spec, eff, rank
        self.ops: list[tuple] = []
        self.streams = streams
        rng = np.random.default_rng([seed, 7919, rank])
        self._kn = rng.lognormal(0.0, spec.noise, 1 << 14)
        self._cn = rng.lognormal(0.0, spec.cpu_noise, 1 << 14)
        self._hn = rng.lognormal(0.0, spec.host_noise, 1 << 10)
        self._ki = self._ci = self._hi = 0
        self.step = 0
        self.seq = 0  #: autograd sequence numbers of forward ops
        self._bwd_seen = 0
        self._sync_left = 0
        self._sync_each = 0.0
        self.gpu_speed = job.gpu.speed

    # noise draws (cyclic, fixed order)
    def kn(self) -> float:
        self._ki = (self._ki + 1) & 0x3FFF
        return float(self._kn[self._ki])

    def cn(self) -> float:
        self._ci = (self._ci + 1) & 0x3FFF
        return float(self._cn[self._ci])

    def hn(self) -> float:
        self._hi = (self._hi + 1) & 0x3FF
        return float(self._hn[self._hi])

    # -- primitives --------------------------------------------------------------------------
    def open(self, cat: str, name: str, thread: int = MAIN, args: dict[str, Any] | None = None, pre: float | None = None,
             noisy: bool = True) -> None:
        """Open a CPU span. ``noisy=False`` for spans only a fault adds (they must not consume
        noise draws, or the what-if without the fault would see different noise)."""
        pre = pre if pre is not None else self.spec.cpu_op_ns * 0.6
        self.ops.append((OPEN, cat, name, thread, args, int(pre * self.cn() if noisy else pre)))

    def close(self, post: float | None = None, noisy: bool = True) -> None:
        post = post if post is not None else self.spec.cpu_op_ns * 0.3
        self.ops.append((CLOSE, int(post * self.cn() if noisy else post)))

    def cpu(self, ns: float) -> None:
        if ns > 0:
            self.ops.append((CPU, int(ns)))

    def kernel(self, kk: K.KernelKind, dur: float, thread: int = MAIN, *, stream: int = COMPUTE,
               waits: tuple[int, ...] = (), wrap: str | None = None, shapes: bool = True) -> None:
        """Launch one compute kernel inside its cpu_op chain (optionally wrapped in an autograd
        ``evaluate_function`` span)."""
        if wrap:
            self.open("cpu_op", "autograd::engine::evaluate_function: " + wrap, thread)
        last = len(kk.ops) - 1
        for i, name in enumerate(kk.ops):
            args: dict[str, Any] | None = {"dims": kk.input_dims} if shapes else None
            if i == last and shapes:
                # the op that records the autograd node gets a sequence number
                self.seq += 1
                args = {"dims": kk.input_dims, "seq": self.seq}
            self.open("cpu_op", name, thread, args)
        d = dur * self.kn() * self.eff.compute(self.rank, self.step) / self.gpu_speed
        self.ops.append((KERN, kk.name(self.job.gpu.arch), stream, int(d), "kernel", kk.geom, waits,
                         int(self.spec.launch_ns * self.cn())))
        for _ in kk.ops:
            self.close()
        if wrap:
            self.close()

    def memcpy(self, direction: str, nbytes: int, dur: float, thread: int = MAIN) -> None:
        self.ops.append((KERN, direction, COMPUTE, int(dur), "memcpy", nbytes, (), int(self.spec.launch_ns * 1.5 * self.cn())))

    def coll(self, group: str, cs: CollSpec, *, waits: tuple[int, ...] = (COMPUTE,), thread: int = MAIN) -> None:
        """A collective call the way ProcessGroupNCCL records it: ``c10d::<op>`` >
        ``record_param_comms`` > (event record, stream wait, ``nccl:<op>`` > kernel launch)."""
        stream = self.streams[group]
        annot = _ANNOT.get(cs.cname) or (f"nccl:send {self.rank}->{cs.peer}" if cs.op == "send" else f"nccl:recv {self.rank}<-{cs.peer}")
        self.open("cpu_op", _C10D.get(cs.cname, "c10d::" + cs.cname), thread, pre=self.spec.cpu_op_ns * 2)
        self.open("cpu_op", "record_param_comms", thread, {"coll": cs, "group": group}, pre=self.spec.cpu_op_ns)
        self.ops.append((COLL, group, cs, stream, waits, thread, annot, int(self.spec.launch_ns * 2.2 * self.cn())))
        self.close(self.spec.cpu_op_ns * 1.5)
        self.close()

    def wait_streams(self, stream: int, on: tuple[int, ...], thread: int = MAIN) -> None:
        self.ops.append((WAITS, stream, on, thread))

    def sync(self, thread: int = MAIN) -> None:
        """``loss.item()``: a tiny device-to-host copy and a stream synchronization."""
        self.open("cpu_op", "aten::item", thread)
        self.open("cpu_op", "aten::_local_scalar_dense", thread)
        self.ops.append((KERN, "Memcpy DtoH (Device -> Pageable)", COMPUTE, 1400, "memcpy", 4, (), int(self.spec.launch_ns * 1.4 * self.cn())))
        self.ops.append((SYNC, COMPUTE, thread))
        self.close()
        self.close()

    # -- composite pieces --------------------------------------------------------------------
    def step_start(self, step: int) -> None:
        """ProfilerStep boundary, then data loading, the host-to-device copy and zero_grad."""
        self.step = step
        self._bwd_seen = 0
        self.ops.append((STEP, step))
        r, eff, sp = self.rank, self.eff, self.spec
        scale = eff.cpu_scale.get(r, 1.0)
        delay = eff.delay(r, step)
        kind = eff.host_delay_kind.get(r, "dataloader")
        dl = sp.t_dataloader * self.hn() * scale + (delay if kind == "dataloader" else 0)
        self.open("user_annotation", "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", pre=0)
        self.cpu(dl)
        self.close(0)
        if kind == "gc" and delay:
            self.cpu(delay)  # a pause with no events at all: Python's garbage collector
        # "sync": host-synchronizing calls in the forward (data-dependent shapes, .item()), each
        # draining the GPU queue and then doing host work while the GPU idles
        self._sync_left = self.spec.layers if kind == "sync" and delay else 0
        self._sync_each = delay / max(1, self.spec.layers) if kind == "sync" else 0.0
        self.open("cpu_op", "aten::to")
        self.open("cpu_op", "aten::_to_copy")
        self.open("cpu_op", "aten::copy_")
        self.memcpy("Memcpy HtoD (Pinned -> Device)", sp.h2d_bytes, sp.t_h2d * eff.h2d_scale.get(r, 1.0) * self.kn())
        self.close()
        self.close()
        self.close()
        self.open("user_annotation", "Optimizer.zero_grad#AdamW.zero_grad")
        self.cpu(sp.cpu_op_ns * 8)
        self.close()

    def forward_layer(self, scale: float, kinds: tuple[K.KernelKind, ...] | None = None) -> None:
        kinds = kinds or self.spec.fwd
        for kk in kinds:
            self.kernel(kk, self.spec.t_fwd_layer * kk.share * scale)
        if self._sync_left:
            self._sync_left -= 1
            self.open("cpu_op", "aten::nonzero", noisy=False, pre=4000)
            self.ops.append((KERN, "Memcpy DtoH (Device -> Pageable)", COMPUTE, 1500, "memcpy", 8, (), 5000))
            self.ops.append((SYNC, COMPUTE, MAIN))
            self.close(noisy=False, post=3000)
            self.cpu(self._sync_each)

    def backward_layer(self, scale: float, kinds: tuple[K.KernelKind, ...] | None = None) -> None:
        kinds = kinds or self.spec.bwd
        sp = self.spec
        for kk in kinds:
            self._bwd_kernel(kk, sp.t_fwd_layer * sp.bwd_ratio * kk.share * scale)

    def _bwd_kernel(self, kk: K.KernelKind, dur: float) -> None:
        # backward ops: evaluate_function wrapper > XxxBackward0 > aten op > launch; the first two
        # carry the sequence number of the forward op that made the node (counted down)
        seq = max(1, self.seq - self._bwd_seen)
        self._bwd_seen += 1
        self.open("cpu_op", "autograd::engine::evaluate_function: " + kk.ops[0], AUTOGRAD, {"seq": seq, "bwd": True})
        for i, name in enumerate(kk.ops):
            self.open("cpu_op", name, AUTOGRAD, {"seq": seq, "bwd": True} if i == 0 else None)
        d = dur * self.kn() * self.eff.compute(self.rank, self.step) / self.gpu_speed
        self.ops.append((KERN, kk.name(self.job.gpu.arch), COMPUTE, int(d), "kernel", kk.geom, (), int(self.spec.launch_ns * self.cn())))
        for _ in kk.ops:
            self.close()
        self.close()

    def loss(self) -> None:
        self.kernel(K.LOSS_FWD, self.spec.t_loss)

    def loss_backward(self) -> None:
        self._bwd_kernel(K.LOSS_BWD, self.spec.t_loss)

    def optimizer(self, wait_on: tuple[int, ...]) -> None:
        if wait_on:
            self.wait_streams(COMPUTE, wait_on)
        self.open("user_annotation", "Optimizer.step#AdamW.step")
        self.kernel(K.OPT_NORM, self.spec.t_opt * K.OPT_NORM.share, shapes=False)
        self.kernel(K.OPT_ADAM, self.spec.t_opt * K.OPT_ADAM.share, shapes=False)
        self.close()
        work = self.eff.hidden(self.rank, self.step)
        if work:
            self.open("user_annotation", self.spec.hidden_log_name)
            self.cpu(work)
            self.close()

    def step_end(self) -> None:
        self.sync()


# -- plans -----------------------------------------------------------------------------------

def nccl_streams(job: Job, rank: int) -> dict[str, int]:
    """CUDA stream ids of the NCCL streams of a rank, one per communicator, in creation order
    (ids as Kineto shows them: small integers above the default stream)."""
    out: dict[str, int] = {}
    sid = 20
    for g in job.groups.values():
        if rank in g.ranks:
            out[g.name] = sid
            sid += 4
    return out


def _split(kinds: tuple[K.KernelKind, ...]) -> tuple[tuple[K.KernelKind, ...], tuple[K.KernelKind, ...]]:
    h = max(1, len(kinds) // 2) if len(kinds) > 1 else 1
    return kinds[:h], kinds[h:]


def _nelems(nbytes: int, dtype: str) -> int:
    return max(1, nbytes // _DTYPE_BYTES[dtype])


def rank_signature(eff: Effects, r: int) -> tuple:
    """Everything in ``eff`` a rank's program depends on (programs with equal signatures are equal)."""
    def arr(d: dict[int, np.ndarray]) -> tuple | None:
        a = d.get(r)
        return None if a is None else tuple(a.tolist())
    return (arr(eff.compute_scale), arr(eff.host_delay), eff.host_delay_kind.get(r), eff.cpu_scale.get(r),
            eff.h2d_scale.get(r), arr(eff.hidden_cpu))


def build_programs(job: Job, spec: ModelSpec, eff: Effects, *, steps: int, seed: int,
                   cache: dict[tuple, list[tuple]] | None = None) -> list[list[tuple]]:
    """One program per rank. ``cache`` (keyed by rank and :func:`rank_signature`) lets what-if runs
    rebuild only the ranks a fault touches."""
    fn = {"ddp": _ddp, "fsdp": _fsdp, "hsdp": _hsdp, "tp_dp": _tp_dp, "pipeline": _pipeline}[job.parallelism]
    progs = []
    for r in range(job.world):
        key = (r, rank_signature(eff, r))
        if cache is not None and key in cache:
            progs.append(cache[key])
            continue
        b = Builder(job, spec, eff, r, seed, nccl_streams(job, r))
        for s in range(steps):
            b.step_start(s)
            fn(b, job, spec, r)
            b.step_end()
        progs.append(b.ops)
        if cache is not None:
            cache[key] = b.ops
    return progs


def _bucketed_allreduce(b: Builder, group: str, spec: ModelSpec, layer_index: int, n_layers: int, scale: float = 1.0) -> None:
    """After the backward of layer ``layer_index`` (counting down): all-reduce the bucket it
    completes, from the autograd thread, waiting on the compute stream."""
    done = n_layers - layer_index
    if spec.grad_bytes_layer and (done % spec.bucket_layers == 0 or layer_index == 0):
        nl = spec.bucket_layers if done % spec.bucket_layers == 0 else done % spec.bucket_layers
        nbytes = int(spec.grad_bytes_layer * nl * scale)
        n = _nelems(nbytes, spec.grad_dtype)
        b.coll(group, CollSpec("allreduce", "allreduce", spec.grad_dtype, n, n, nbytes), thread=AUTOGRAD)


def _ddp(b: Builder, job: Job, spec: ModelSpec, r: int) -> None:
    g = job.roles[r]["dp"]
    b.open("user_annotation", "DistributedDataParallel.forward")
    for _ in range(spec.layers):
        b.forward_layer(1.0)
    b.loss()
    b.close()
    b.loss_backward()
    for i in reversed(range(spec.layers)):
        b.backward_layer(1.0)
        _bucketed_allreduce(b, g, spec, i, spec.layers)
    b.optimizer((b.streams[g],))


def _fsdp_common(b: Builder, spec: ModelSpec, shard: str, m: int, after_rs: Any = None) -> None:
    st = b.streams[shard]
    full = spec.ag_bytes_layer
    shard_n = _nelems(full // m, "BFloat16")

    def ag() -> None:
        b.coll(shard, CollSpec("allgather", "_allgather_base", "BFloat16", shard_n, shard_n * m, shard_n * m * 2), waits=(COMPUTE,))

    def rs() -> None:
        cs = CollSpec("reducescatter", "_reduce_scatter_base", "BFloat16", shard_n * m, shard_n, shard_n * m * 2)
        b.coll(shard, cs, waits=(COMPUTE,), thread=AUTOGRAD)

    L = spec.layers
    b.open("user_annotation", "FullyShardedDataParallel.forward")
    ag()
    for i in range(L):
        b.wait_streams(COMPUTE, (st,))
        if i + 1 < L:
            ag()
        b.forward_layer(1.0)
    b.loss()
    b.close()
    b.loss_backward()
    ag()  # the last layer is re-gathered for its backward
    for i in reversed(range(L)):
        b.wait_streams(COMPUTE, (st,), AUTOGRAD)
        if i > 0:
            ag()
        b.backward_layer(1.0)
        rs()
        if after_rs is not None:
            after_rs(i)


def _fsdp(b: Builder, job: Job, spec: ModelSpec, r: int) -> None:
    g = job.roles[r]["dp"]
    _fsdp_common(b, spec, g, job.world)
    b.optimizer((b.streams[g],))


def _hsdp(b: Builder, job: Job, spec: ModelSpec, r: int) -> None:
    shard, rep = job.roles[r]["shard"], job.roles[r]["replicate"]
    G = job.gpus_per_node
    n = _nelems(spec.ag_bytes_layer // G, "BFloat16")

    def replicate(i: int) -> None:
        if job.n_nodes > 1:
            b.coll(rep, CollSpec("allreduce", "allreduce", "BFloat16", n, n, n * 2), waits=(b.streams[shard],), thread=AUTOGRAD)

    _fsdp_common(b, spec, shard, G, after_rs=replicate)
    b.optimizer((b.streams[shard], b.streams[rep]))


def _tp_dp(b: Builder, job: Job, spec: ModelSpec, r: int) -> None:
    tp, dp = job.roles[r]["tp"], job.roles[r]["dp"]
    st = b.streams[tp]
    n = _nelems(spec.tp_bytes, "BFloat16")
    cs = CollSpec("allreduce", "allreduce", "BFloat16", n, n, n * 2)
    f1, f2 = _split(spec.fwd)
    b1, b2 = _split(spec.bwd)

    def tp_allreduce(thread: int) -> None:
        b.coll(tp, cs, waits=(COMPUTE,), thread=thread)
        b.wait_streams(COMPUTE, (st,), thread)

    b.open("user_annotation", "Megatron.forward")
    for _ in range(spec.layers):
        b.forward_layer(1.0, f1)
        tp_allreduce(MAIN)
        if f2:
            b.forward_layer(1.0, f2)
        tp_allreduce(MAIN)
    b.loss()
    b.close()
    b.loss_backward()
    dp_size = job.world // job.tp
    for i in reversed(range(spec.layers)):
        b.backward_layer(1.0, b1)
        tp_allreduce(AUTOGRAD)
        if b2:
            b.backward_layer(1.0, b2)
        tp_allreduce(AUTOGRAD)
        if dp_size > 1:
            _bucketed_allreduce(b, dp, spec, i, spec.layers)
    b.optimizer((b.streams[dp],) if dp_size > 1 else ())


def _pipeline(b: Builder, job: Job, spec: ModelSpec, r: int) -> None:
    P, M = job.pp, job.microbatches
    s = stage_of(job, r)
    per_stage = job.world // P
    prev_rank = r - per_stage if s > 0 else None
    next_rank = r + per_stage if s < P - 1 else None
    pp = job.roles[r]["pp"]
    prev_key = f"{pp}@{prev_rank}:{r}" if prev_rank is not None else None
    next_key = f"{pp}@{r}:{next_rank}" if next_rank is not None else None
    scale = spec.stage_scale[s] / M
    n = _nelems(spec.pp_bytes, "BFloat16")
    kinds_f = spec.fwd if spec.detail != "full" else K.FWD_LEAN
    kinds_b = spec.bwd if spec.detail != "full" else K.BWD_LEAN

    def p2p(key: str, op: str, peer: int, waits: tuple[int, ...], thread: int) -> None:
        b.coll(key, CollSpec(op, op, "BFloat16", n, n, n * 2, peer=peer), waits=waits, thread=thread)

    b.open("user_annotation", "PipelineSchedule.step")
    for mb in range(M):
        if prev_key is not None:
            p2p(prev_key, "recv", prev_rank, (), MAIN)  # type: ignore[arg-type]
            b.wait_streams(COMPUTE, (b.streams[prev_key],))
        for _ in range(spec.layers):
            b.forward_layer(scale, kinds_f)
        if next_key is not None:
            p2p(next_key, "send", next_rank, (COMPUTE,), MAIN)  # type: ignore[arg-type]
        else:
            b.loss()
    dp = job.roles[r]["dp"]
    dp_size = per_stage
    for mb in reversed(range(M)):
        if next_key is not None:
            p2p(next_key, "recv", next_rank, (), AUTOGRAD)  # type: ignore[arg-type]
            b.wait_streams(COMPUTE, (b.streams[next_key],), AUTOGRAD)
        else:
            b.loss_backward()
        for i in reversed(range(spec.layers)):
            b.backward_layer(scale, kinds_b)
            if mb == 0 and dp_size > 1:
                _bucketed_allreduce(b, dp, spec, i, spec.layers)
        if prev_key is not None:
            p2p(prev_key, "send", prev_rank, (COMPUTE,), AUTOGRAD)  # type: ignore[arg-type]
    b.close()
    b.optimizer((b.streams[dp],) if dp_size > 1 else ())


def expected_counts(job: Job, spec: ModelSpec, rank: int) -> dict[str, int]:
    """Collective calls per step a rank makes (for tests and the truth file)."""
    L, p = spec.layers, job.parallelism
    buckets = math.ceil(L / spec.bucket_layers) if spec.grad_bytes_layer else 0
    if p == "ddp":
        return {"allreduce": buckets}
    if p == "fsdp":
        return {"allgather": 2 * L, "reducescatter": L}
    if p == "hsdp":
        return {"allgather": 2 * L, "reducescatter": L, "allreduce": L if job.n_nodes > 1 else 0}
    if p == "tp_dp":
        dp = job.world // job.tp
        return {"allreduce": 4 * L + (buckets if dp > 1 else 0)}
    s = stage_of(job, rank)
    M = job.microbatches
    nb = 2 * M * ((s > 0) + (s < job.pp - 1))
    dp = job.world // job.pp
    return {"send": nb // 2, "recv": nb // 2, "allreduce": buckets if dp > 1 else 0}
