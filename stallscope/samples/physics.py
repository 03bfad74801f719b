"""The timing model: links, collectives, streams, and the engine that runs all ranks together.

Model (all times in ns of *true* time; clocks are applied only when files are written):

* **CPU.** Each rank has one CPU timeline (the main thread and the autograd thread take turns,
  as they do in ``loss.backward()``). Spans and busy time advance it; a kernel launch costs the
  launch call's duration. A stream synchronization blocks it until the stream drains.
* **Streams.** A kernel starts at ``max(launch call end + 0.8 µs, previous kernel end on its
  stream, every event it waits on)``. A ``cudaStreamWaitEvent`` makes a stream's next kernels wait for
  the current end of another stream.
* **Collectives.** One instance per (communicator, call index). A member *arrives* when its
  NCCL kernel can start: ``max(launch, NCCL stream free, waited-on compute)``. Every member's
  kernel ends at ``max(arrivals) + T`` (+ 0-2 µs per member), so an early member's kernel
  contains its wait. ``T = latency + bytes × factor / busbw`` with the nccl-tests factors
  (all-reduce ``2(n-1)/n``; all-gather, reduce-scatter ``(n-1)/n``; broadcast, send/recv 1)
  and ``busbw`` the slowest link the ring crosses:

  - all members on one host: that host's NVLink bus bandwidth, or shared memory (10-20 GB/s)
    when its P2P is off;
  - across hosts: ``min over hosts h of inter(h) × k_h / G`` (a group with ``k_h`` of the host's
    ``G`` GPUs gets that share of the host's NICs), and the intra-node bandwidth of every host
    holding more than one member; ``inter(h)`` is NICs × per-NIC bandwidth (IB/RoCE), or
    1-3 GB/s for TCP sockets, times the host's fault factor.

  ``T`` gets a small log-normal jitter keyed by (communicator, index), so a run with and without
  a fault sees the same jitter.

Simplifications: collectives on different communicators do not share bandwidth (except through
the ``k_h / G`` rule); no congestion, no protocol switch-over, no CUDA-graph replay; the CPU can
run arbitrarily far ahead of the GPU (no launch-queue limit).
"""

from __future__ import annotations

import math
import zlib
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stallscope.samples.faults import Effects
from stallscope.samples.model import Job, ProcessGroup
from stallscope.samples.schedule import CLOSE, COLL, COMPUTE, CPU, KERN, OPEN, STEP, SYNC, WAITS, CollSpec

KERNEL_LATENCY = 800  #: ns from the end of a launch call to the earliest kernel start
_FACTOR = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
           "reducescatter": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0, "send": lambda n: 1.0,
           "recv": lambda n: 1.0}


def nominal_bandwidths(job: Job) -> tuple[float, float]:
    """(intra-node, inter-node per host) bus bandwidth in GB/s of the healthy machines."""
    return job.gpu.nvlink_busbw, min(job.network.host_busbw, job.gpu.nvlink_busbw)


class Links:
    """Bus bandwidth and latency of each communicator, given the job and its faults."""

    def __init__(self, job: Job, eff: Effects, rng: np.random.Generator, noise: float):
        self.job, self.eff = job, eff
        self.shm = float(rng.uniform(10.0, 20.0))
        self.socket = float(rng.uniform(1.0, 3.0))
        self.noise = noise
        intra, inter = nominal_bandwidths(job)
        self.intra = intra
        self.inter = inter
        self._cache: dict[str, tuple[float, float, str]] = {}

    def intra_bw(self, host: int) -> float:
        return self.intra if self.eff.p2p.get(host, True) else self.shm

    def inter_bw(self, host: int) -> float:
        sock = self.eff.socket_bw if self.eff.socket_bw is not None else self.socket
        base = min(sock, self.inter) if self.eff.net == "Socket" else self.inter
        return base * self.eff.inter_bw.get(host, 1.0)

    def params(self, g: ProcessGroup) -> tuple[float, float, str]:
        """(busbw GB/s, latency ns, path) of a communicator."""
        got = self._cache.get(g.name)
        if got is not None:
            return got
        job = self.job
        G = job.gpus_per_node
        hosts = Counter(job.ranks[r].host for r in g.ranks)
        n = len(g.ranks)
        if len(hosts) == 1:
            (h,) = hosts
            bw = self.intra_bw(h)
            lat = 8000 + 1500 * math.log2(max(n, 2))
            path = "P2P" if self.eff.p2p.get(h, True) else "SHM"
        else:
            bw = min(self.inter_bw(h) * k / G for h, k in hosts.items())
            for h, k in hosts.items():
                if k > 1:
                    bw = min(bw, self.intra_bw(h))
            lat = 15000 + 4000 * math.log2(n) + (40000 if self.eff.net == "Socket" else 0)
            path = "NET"
        out = (bw, lat, path)
        self._cache[g.name] = out
        return out

    def duration(self, g: ProcessGroup, cs: CollSpec, key: int) -> tuple[int, float]:
        """Transfer time T (ns) of one instance and the bus bandwidth it ran at."""
        bw, lat, _ = self.params(g)
        n = len(g.ranks)
        t = lat + _FACTOR[cs.op](n) * cs.nbytes / bw  # bytes / (GB/s) = ns
        return int(t * (1.0 + self.noise * _gauss(key))), bw


def _gauss(key: int) -> float:
    """A deterministic, roughly standard-normal number from an integer key."""
    x = key & 0xFFFFFFFF
    s = 0.0
    for _ in range(3):
        x = (1103515245 * x + 12345) & 0x7FFFFFFF
        s += x / 0x7FFFFFFF
    return (s - 1.5) * 2.0


class Coll:
    """One collective instance: members, arrivals, transfer time, per-member end."""

    __slots__ = ("group", "idx", "spec", "n", "arr", "ends", "end", "T", "bw", "waiters", "step", "key")

    def __init__(self, group: ProcessGroup, idx: int, spec: CollSpec, step: int, seed: int):
        self.group, self.idx, self.spec, self.step = group, idx, spec, step
        self.n = len(group.ranks)
        self.arr: dict[int, int] = {}
        self.ends: dict[int, int] = {}
        self.end: int | None = None
        self.T = 0
        self.bw = 0.0
        self.waiters: list[int] = []
        self.key = zlib.crc32(f"{seed}/{group.name}/{idx}".encode())


@dataclass
class RankRecord:
    """What one rank did, in true time (filled only when recording)."""

    cpu: list[tuple] = field(default_factory=list)  #: (cat, name, thread, t0, t1, ext, args)
    runtime: list[tuple] = field(default_factory=list)  #: (name, cat, thread, t0, dur, corr, ext, cbid)
    gpu: list[tuple] = field(default_factory=list)  #: (name, stream, t0, dur, corr, ext, kind, info)
    colls: list[tuple] = field(default_factory=list)  #: (Coll, seq, ext, corr, kernel index)
    steps: list[tuple[int, int, int]] = field(default_factory=list)  #: (step, start, External id)
    end: int = 0


@dataclass
class SimResult:
    job: Job
    records: list[RankRecord]
    colls: list[Coll]
    step_start: np.ndarray  #: [rank, step] true ns
    step_end: np.ndarray
    t0: int

    def makespan(self) -> int:
        return int(self.step_end[:, -1].max() - self.step_start[:, 0].min())

    def step_times(self) -> np.ndarray:
        """Job step time per step: from the latest start to the latest end (ns)."""
        return self.step_end.max(axis=0) - self.step_start.max(axis=0)

    def per_rank_step(self) -> dict[str, np.ndarray]:
        """Physics-side truth per [rank, step], summed over the rank's collectives of that step:
        ``wait_ns`` time inside group collectives waiting for the last member (``wait_p2p_ns`` the
        same for send/recv), ``late_ns`` arrival after the first member, ``transfer_ns`` the
        transfer time T; ``max_wait_ns``/``max_late_ns`` the largest single wait/lateness at a
        group collective in the step (a planted stall of D shows up as ``max_late`` ≈ D on the
        straggler and ``max_wait`` ≈ D on the others)."""
        R, S = self.step_start.shape
        wait = np.zeros((R, S), np.int64)
        wait_p2p = np.zeros((R, S), np.int64)
        late = np.zeros((R, S), np.int64)
        xfer = np.zeros((R, S), np.int64)
        max_wait = np.zeros((R, S), np.int64)
        max_late = np.zeros((R, S), np.int64)
        for c in self.colls:
            if c.end is None:
                continue
            amax = max(c.arr.values())
            amin = min(c.arr.values())
            p2p = c.spec.op in ("send", "recv")
            for r, a in c.arr.items():
                if p2p:
                    wait_p2p[r, c.step] += amax - a
                else:
                    wait[r, c.step] += amax - a
                    if amax - a > max_wait[r, c.step]:
                        max_wait[r, c.step] = amax - a
                    if a - amin > max_late[r, c.step]:
                        max_late[r, c.step] = a - amin
                late[r, c.step] += a - amin
                xfer[r, c.step] += c.T
        return {"wait_ns": wait, "wait_p2p_ns": wait_p2p, "late_ns": late, "transfer_ns": xfer,
                "max_wait_ns": max_wait, "max_late_ns": max_late}


class Engine:
    """Runs every rank's program; ranks block only when they need a collective's end."""

    def __init__(self, job: Job, programs: list[list[tuple]], links: Links, *, seed: int, t0: int,
                 start_skew: np.ndarray, record: bool, nccl_launch: tuple[str, str, int]):
        self.job, self.programs, self.links, self.seed = job, programs, links, seed
        self.t0 = t0
        self.skew = start_skew
        self.record = record
        self.launch = nccl_launch
        self.instances: dict[tuple[str, int], Coll] = {}
        self.ready: deque[int] = deque()
        self.records = [RankRecord() for _ in range(job.world)]
        steps = sum(1 for op in programs[0] if op[0] == STEP)
        self.step_start = np.zeros((job.world, steps), np.int64)
        self.step_end = np.zeros((job.world, steps), np.int64)

    def run(self) -> SimResult:
        gens = [self._rank(r) for r in range(self.job.world)]
        self.ready.extend(range(self.job.world))
        done = 0
        while self.ready:
            r = self.ready.popleft()
            try:
                c = next(gens[r])
            except StopIteration:
                done += 1
                continue
            if c.end is not None:
                self.ready.append(r)
            else:
                c.waiters.append(r)
        if done != self.job.world:
            stuck = [k for k, c in self.instances.items() if c.end is None]
            raise RuntimeError(f"simulation deadlock: {self.job.world - done} ranks blocked; open collectives {stuck[:5]}")
        colls = list(self.instances.values())
        return SimResult(self.job, self.records, colls, self.step_start, self.step_end, self.t0)

    def _resolve(self, c: Coll) -> None:
        g = c.group
        T, bw = self.links.duration(g, c.spec, c.key)
        c.T, c.bw = T, bw
        amax = max(c.arr.values())
        x = c.key
        for r in g.ranks:
            x = (1103515245 * x + 12345) & 0x7FFFFFFF
            c.ends[r] = amax + T + (x % 2000)
        c.end = amax + T
        self.ready.extend(c.waiters)
        c.waiters.clear()

    def _rank(self, r: int):  # noqa: C901 - one interpreter loop, kept flat for speed
        job, rec, record = self.job, self.records[r], self.record
        rank_pid = job.ranks[r].pid
        cpu = self.t0 + int(self.skew[r])
        stack: list[list[Any]] = []
        streams: dict[int, Any] = {}
        ext = 0
        corr = 0
        calls: dict[str, int] = {}
        seqs: dict[str, int] = {}
        p2p_seqs: dict[str, int] = {}
        step = -1
        cur_ext = [0, 0]  # innermost cpu_op External id per thread
        launch_name, launch_cat, launch_cbid = self.launch
        groups = job.groups
        for op in self.programs[r]:
            code = op[0]
            if code == OPEN:
                ext += 1
                stack.append([op[1], op[2], op[3], cpu, ext, op[4], cur_ext[op[3]]])
                if op[1] == "cpu_op":
                    cur_ext[op[3]] = ext
                cpu += op[5]
            elif code == CLOSE:
                cpu += op[1]
                cat, name, thread, t0, e, args, prev = stack.pop()
                if cat == "cpu_op":
                    cur_ext[thread] = prev
                if record:
                    rec.cpu.append((cat, name, thread, t0, cpu, e, args))
            elif code == CPU:
                cpu += op[1]
            elif code == KERN:
                _, name, stream, dur, kind, info, waits, launch = op
                start = cpu + launch + KERNEL_LATENCY
                prev = streams.get(stream, 0)
                if prev.__class__ is Coll:
                    if prev.end is None:
                        yield prev
                    prev = prev.ends[r]
                if prev > start:
                    start = prev
                for w in waits:
                    v = streams.get(w, 0)
                    if v.__class__ is Coll:
                        if v.end is None:
                            yield v
                        v = v.ends[r]
                    if v > start:
                        start = v
                streams[stream] = start + dur
                corr += 1
                thread = stack[-1][2] if stack else 0
                if record:
                    e = cur_ext[thread]
                    if kind == "memcpy":
                        rec.runtime.append(("cudaMemcpyAsync", "cuda_runtime", thread, cpu, launch, corr, e, 41))
                    else:
                        rec.runtime.append(("cudaLaunchKernel", "cuda_runtime", thread, cpu, launch, corr, e, 211))
                    rec.gpu.append((name, stream, start, dur, corr, e, kind, info))
                cpu += launch
            elif code == COLL:
                _, gname, cs, stream, waits, thread, annot, launch = op
                g = groups[gname]
                e = cur_ext[thread]
                # ProcessGroupNCCL: record an event on the current stream, make the NCCL stream wait on it
                if record and waits:
                    corr += 1
                    rec.runtime.append(("cudaEventRecord", "cuda_runtime", thread, cpu, 1600, corr, e, 135))
                    corr += 1
                    rec.runtime.append(("cudaStreamWaitEvent", "cuda_runtime", thread, cpu + 2100, 1400, corr, e, 147))
                else:
                    corr += 2
                cpu += 4200
                ext += 1
                a_t0 = cpu
                cpu += 6000
                start = cpu + launch + KERNEL_LATENCY
                prev = streams.get(stream, 0)
                if prev.__class__ is Coll:
                    if prev.end is None:
                        yield prev
                    prev = prev.ends[r]
                if prev > start:
                    start = prev
                for w in waits:
                    v = streams.get(w, 0)
                    if v.__class__ is Coll:
                        if v.end is None:
                            yield v
                        v = v.ends[r]
                    if v > start:
                        start = v
                idx = calls.get(gname, 0)
                calls[gname] = idx + 1
                key = (gname, idx)
                c = self.instances.get(key)
                if c is None:
                    c = Coll(g, idx, cs, step, self.seed)
                    self.instances[key] = c
                c.arr[r] = start
                streams[stream] = c
                corr += 1
                # sequence numbers as ProcessGroupNCCL counts them: collectives per group,
                # point-to-point ops per parent group (both directions, every peer)
                if cs.op in ("send", "recv"):
                    pg = g.parent or gname
                    sq = p2p_seqs.get(pg, 0) + 1
                    p2p_seqs[pg] = sq
                else:
                    sq = seqs.get(gname, 0) + 1
                    seqs[gname] = sq
                if record:
                    rec.runtime.append((launch_name, launch_cat, thread, cpu, launch, corr, e, launch_cbid))
                    rec.gpu.append((None, stream, start, None, corr, e, "nccl", (c, cs)))
                    rec.colls.append((c, sq, e, corr, len(rec.gpu) - 1))
                cpu += launch + 1500
                if record:
                    rec.cpu.append(("user_annotation", annot, thread, a_t0, cpu, ext, None))
                if len(c.arr) == c.n:
                    self._resolve(c)
            elif code == WAITS:
                _, stream, on, thread = op
                v0 = streams.get(stream, 0)
                if v0.__class__ is Coll:
                    if v0.end is None:
                        yield v0
                    v0 = v0.ends[r]
                for w in on:
                    v = streams.get(w, 0)
                    if v.__class__ is Coll:
                        if v.end is None:
                            yield v
                        v = v.ends[r]
                    if v > v0:
                        v0 = v
                streams[stream] = v0
                if record:
                    e = cur_ext[thread]
                    corr += 1
                    rec.runtime.append(("cudaEventRecord", "cuda_runtime", thread, cpu, 1500, corr, e, 135))
                    corr += 1
                    rec.runtime.append(("cudaStreamWaitEvent", "cuda_runtime", thread, cpu + 2000, 1300, corr, e, 147))
                else:
                    corr += 2
                cpu += 3800
            elif code == SYNC:
                _, stream, thread = op
                v = streams.get(stream, 0)
                if v.__class__ is Coll:
                    if v.end is None:
                        yield v
                    v = v.ends[r]
                t_call = cpu
                cpu = max(cpu + 3000, v + 2500)
                corr += 1
                if record:
                    rec.runtime.append(("cudaStreamSynchronize", "cuda_runtime", thread, t_call, cpu - t_call, corr, cur_ext[thread], 131))
                cpu += 1200
            elif code == STEP:
                if step >= 0:
                    self.step_end[r, step] = cpu
                step = op[1]
                self.step_start[r, step] = cpu
                ext += 1
                if record:
                    rec.steps.append((step, cpu, ext))
                cpu += 2000
        if step >= 0:
            self.step_end[r, step] = cpu
        rec.end = cpu
        _ = rank_pid


def simulate(job: Job, programs: list[list[tuple]], eff: Effects, *, seed: int, t0: int, noise: float,
             record: bool, nccl_launch: tuple[str, str, int]) -> SimResult:
    """Run the programs. Link parameters and start skews come from ``seed`` only, so runs with
    different faults share them."""
    rng = np.random.default_rng([seed, 4242])
    links = Links(job, eff, rng, noise)
    skew = rng.uniform(0, 150_000, job.world).astype(np.int64)
    eng = Engine(job, programs, links, seed=seed, t0=t0, start_skew=skew, record=record, nccl_launch=nccl_launch)
    res = eng.run()
    res.links = links  # type: ignore[attr-defined]
    return res
