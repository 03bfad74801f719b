"""Faults: what goes wrong, as changes to the physics, plus the evidence each leaves in logs.

A fault never edits a timeline. It edits :class:`Effects`, the small set of knobs the schedule
builder and the physics engine read (per-rank compute speed, per-rank host delays per step,
per-host link speeds and transports, ...). Removing a fault and re-running the same schedule
with the same noise is therefore an honest what-if: the difference in step time is the time the
fault cost.

Each fault also says which cause and culprits the ground truth blames
(``cause`` / ``ranks`` / ``hosts``) and which lines it adds to NCCL logs (``log_hints``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stallscope.samples.model import Job


@dataclass
class Effects:
    """Physics knobs. Neutral values mean "healthy"."""

    steps: int
    #: rank -> per-step multiplier on compute-kernel durations (1.0 = nominal)
    compute_scale: dict[int, np.ndarray] = field(default_factory=dict)
    #: rank -> per-step extra host time at the start of the step (ns)
    host_delay: dict[int, np.ndarray] = field(default_factory=dict)
    #: rank -> how that host delay shows up: "dataloader" (a long ``__next__``), "gc" (a gap with
    #: no events) or "sync" (``aten::nonzero`` syncs in the forward, each followed by host work)
    host_delay_kind: dict[int, str] = field(default_factory=dict)
    #: rank -> multiplier on host-side work at the step start (data loading, collation): NUMA
    cpu_scale: dict[int, float] = field(default_factory=dict)
    #: rank -> multiplier on host-to-device copy time (pinned memory on the far socket)
    h2d_scale: dict[int, float] = field(default_factory=dict)
    #: rank -> per-step host-side work after the optimizer launch that the GPU queue hides (ns)
    hidden_cpu: dict[int, np.ndarray] = field(default_factory=dict)
    #: host -> multiplier on its inter-node bandwidth
    inter_bw: dict[int, float] = field(default_factory=dict)
    #: host -> GPUDirect RDMA on its NET connections
    gdr: dict[int, bool] = field(default_factory=dict)
    #: host -> False when intra-node traffic goes through shared memory instead of P2P/NVLink
    p2p: dict[int, bool] = field(default_factory=dict)
    #: job-wide inter-node transport override ("Socket") and why it happened
    net: str | None = None
    socket_reason: str = ""
    #: bus bandwidth one host gets over TCP sockets (GB/s); None = drawn with the links
    socket_bw: float | None = None

    def compute(self, rank: int, step: int) -> float:
        a = self.compute_scale.get(rank)
        return 1.0 if a is None else float(a[step])

    def delay(self, rank: int, step: int) -> int:
        a = self.host_delay.get(rank)
        return 0 if a is None else int(a[step])

    def hidden(self, rank: int, step: int) -> int:
        a = self.hidden_cpu.get(rank)
        return 0 if a is None else int(a[step])

    def add_delay(self, rank: int, delays: np.ndarray, kind: str) -> None:
        cur = self.host_delay.get(rank)
        self.host_delay[rank] = delays.astype(np.int64) if cur is None else cur + delays.astype(np.int64)
        self.host_delay_kind.setdefault(rank, kind)

    def scale_compute(self, rank: int, factors: np.ndarray) -> None:
        cur = self.compute_scale.get(rank)
        self.compute_scale[rank] = factors.astype(float) if cur is None else cur * factors


@dataclass
class Fault(ABC):
    """Base class. Subclasses fill the fields and implement :meth:`apply`."""

    kind: str = ""
    cause: str = "none"
    ranks: list[int] = field(default_factory=list)
    hosts: list[int] = field(default_factory=list)
    magnitude: float = 0.0
    #: evidence for the NCCL log writer: host index -> list of hint names
    log_hints: dict[int, list[str]] = field(default_factory=dict)
    #: job-wide evidence (e.g. "socket")
    job_hints: list[str] = field(default_factory=list)

    @abstractmethod
    def apply(self, eff: Effects, job: Job) -> None:
        """Change the job's physics (``eff``) the way this fault does."""

    def plan(self) -> dict[str, Any]:
        """What was injected, for the ground truth (subclasses add their parameters)."""
        return {"kind": self.kind, "cause": self.cause, "magnitude": self.magnitude}


@dataclass
class ComputeStraggler(Fault):
    """One GPU runs its compute kernels slower (thermal or power throttling, a bad clock, a
    noisy neighbour on a shared GPU). It reaches every collective late; the others wait."""

    rank: int = 0
    slowdown: float = 0.2  #: kernels take (1 + slowdown) times as long
    steps_mask: np.ndarray | None = None  #: per step: True where the slowdown applies (None = all)

    def __post_init__(self) -> None:
        self.kind, self.cause, self.ranks, self.magnitude = "compute_straggler", "synchronization", [self.rank], self.slowdown

    def apply(self, eff: Effects, job: Job) -> None:
        mask = np.ones(eff.steps, bool) if self.steps_mask is None else self.steps_mask
        eff.scale_compute(self.rank, np.where(mask, 1.0 + self.slowdown, 1.0))

    def plan(self) -> dict[str, Any]:
        return super().plan() | {"rank": self.rank, "compute_slowdown": self.slowdown}


@dataclass
class HostStall(Fault):
    """A rank's CPU stalls in some steps (data loading, garbage collection, host-synchronizing
    calls in the forward), so its GPU idles and it reaches the step's collectives late by about
    the stall."""

    delays: dict[int, np.ndarray] = field(default_factory=dict)  #: rank -> per-step stall (ns)
    stall_kind: str = "dataloader"
    intermittent: bool = False

    def __post_init__(self) -> None:
        self.kind = "intermittent_straggler" if self.intermittent else "host_stall_straggler"
        self.cause = "synchronization"
        self.ranks = sorted(self.delays)

    def apply(self, eff: Effects, job: Job) -> None:
        for r, d in self.delays.items():
            eff.add_delay(r, d, self.stall_kind)

    def plan(self) -> dict[str, Any]:
        return super().plan() | {"stall_kind": self.stall_kind,
                                 "delay_ns": {str(r): [int(x) for x in d] for r, d in self.delays.items()}}


@dataclass
class Jitter(Fault):
    """Every rank loses a random bit of host time in every step (OS noise, input pipeline
    variance). No rank dominates, but each synchronous step waits for the slowest one, so the
    job pays the expected maximum over all ranks, every step."""

    delays: dict[int, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.kind, self.cause = "jitter_amplification", "synchronization"
        self.ranks = sorted(self.delays)

    def apply(self, eff: Effects, job: Job) -> None:
        for r, d in self.delays.items():
            eff.add_delay(r, d, "dataloader")

    def plan(self) -> dict[str, Any]:
        return super().plan() | {"delay_ns": {str(r): [int(x) for x in d] for r, d in self.delays.items()}}


@dataclass
class SocketFallback(Fault):
    """NCCL uses TCP sockets between nodes instead of IB/RoCE: inter-node bandwidth collapses
    for every collective that crosses hosts. Ranks arrive on time; transfers are slow."""

    reason: str = "ib_disabled"  #: ib_disabled (NCCL_IB_DISABLE=1) | no_verbs (libibverbs missing) | net_env (NCCL_NET=Socket)
    #: what TCP sockets deliver per host (GB/s): ~1-3 on one untuned 25-40 GbE interface, up to
    #: ~15-20 with several sockets per thread on 100-200 GbE
    socket_bw: float = 2.0

    def __post_init__(self) -> None:
        self.kind, self.cause = "socket_fallback", "fabric"
        self.job_hints = ["socket:" + self.reason]
        self.magnitude = self.socket_bw

    def apply(self, eff: Effects, job: Job) -> None:
        eff.net = "Socket"
        eff.socket_reason = self.reason
        eff.socket_bw = self.socket_bw
        self.ranks = list(range(job.world))
        self.hosts = list(range(job.n_nodes))

    def plan(self) -> dict[str, Any]:
        return super().plan() | {"reason": self.reason, "socket_busbw_gbs": self.socket_bw}


@dataclass
class DegradedNic(Fault):
    """One host's NIC(s) run at a fraction of their rate (link trained down, flapping port,
    bad cable). Every ring/tree crossing that host is as slow as its slowest link, so every
    inter-node collective slows down for everyone; ranks still arrive on time."""

    host: int = 0
    factor: float = 0.5  #: remaining fraction of the host's inter-node bandwidth
    warns: bool = True  #: IB port-error WARN lines in that host's log

    def __post_init__(self) -> None:
        self.kind, self.cause, self.hosts, self.magnitude = "degraded_nic", "fabric", [self.host], 1.0 - self.factor
        self.log_hints = {self.host: ["degraded_nic"] + (["ib_port_warn"] if self.warns else [])}

    def apply(self, eff: Effects, job: Job) -> None:
        eff.inter_bw[self.host] = eff.inter_bw.get(self.host, 1.0) * self.factor
        self.ranks = job.ranks_of_host(self.host)

    def plan(self) -> dict[str, Any]:
        return super().plan() | {"host": self.host, "bandwidth_factor": self.factor}


@dataclass
class P2PDisabled(Fault):
    """One host moves intra-node traffic through host shared memory (``NCCL_P2P_DISABLE=1``, or
    P2P unavailable: IOMMU/ACS, container isolation). Its intra-node collectives slow down by an
    order of magnitude, so its ranks fall behind together. With ``every_host`` the setting is the
    job's (a launcher or container image that exports it): every host's intra-node traffic, and
    every ring's intra-node hops, run at host-memory speed, and no host stands apart."""

    host: int = 0
    via_env: bool = True  #: the log echoes NCCL_P2P_DISABLE=1 (else P2P is silently unavailable)
    every_host: bool = False  #: P2P off on every host (a job-wide setting), not on ``host`` alone

    def __post_init__(self) -> None:
        self.kind, self.cause, self.hosts = "p2p_disabled_one_host", "locality", [self.host]
        self._hint([self.host])

    def _hint(self, hosts: list[int]) -> None:
        self.log_hints = {h: ["shm"] + (["p2p_disable_env"] if self.via_env else []) for h in hosts}

    def apply(self, eff: Effects, job: Job) -> None:
        hosts = list(range(job.n_nodes)) if self.every_host else [self.host]
        for h in hosts:
            eff.p2p[h] = False
        self.hosts = hosts
        self._hint(hosts)
        self.ranks = [r for h in hosts for r in job.ranks_of_host(h)]

    def plan(self) -> dict[str, Any]:
        return super().plan() | {"host": self.host, "via_env": self.via_env, "every_host": self.every_host}


@dataclass
class CrossSocketNic(Fault):
    """On one host the GPUs talk to NICs on the other CPU socket (path SYS): GPUDirect RDMA is
    off, NET traffic crosses the inter-socket link at a fraction of the rate, and the processes
    are pinned to the far NUMA node so host-side work (data loading, pinned copies) is slower.
    That host's ranks arrive late together and its inter-node links are slow."""

    host: int = 0
    bw_factor: float = 0.5
    cpu_factor: float = 1.5  #: host-side step-start work takes this many times as long

    def __post_init__(self) -> None:
        self.kind, self.cause, self.hosts, self.magnitude = "cross_socket_nic_one_host", "locality", [self.host], self.cpu_factor - 1.0
        self.log_hints = {self.host: ["cross_socket"]}

    def apply(self, eff: Effects, job: Job) -> None:
        eff.inter_bw[self.host] = eff.inter_bw.get(self.host, 1.0) * self.bw_factor
        eff.gdr[self.host] = False
        self.ranks = job.ranks_of_host(self.host)
        for r in self.ranks:
            eff.cpu_scale[r] = eff.cpu_scale.get(r, 1.0) * self.cpu_factor
            eff.h2d_scale[r] = eff.h2d_scale.get(r, 1.0) * 2.0  # pinned buffers on the far node

    def plan(self) -> dict[str, Any]:
        return super().plan() | {"host": self.host, "bandwidth_factor": self.bw_factor, "host_cpu_factor": self.cpu_factor}


@dataclass
class HiddenHostWork(Fault):
    """Not a fault: one rank does extra host-side work (metrics logging, checkpoint
    bookkeeping) while its GPU queue is still long, so the GPU never notices. A red herring for
    any analysis that reads CPU spans alone."""

    rank: int = 0
    work: np.ndarray | None = None  #: per-step host work (ns)

    def __post_init__(self) -> None:
        self.kind, self.cause, self.ranks = "hidden_host_work", "none", [self.rank]

    def apply(self, eff: Effects, job: Job) -> None:
        if self.work is not None:
            eff.hidden_cpu[self.rank] = self.work.astype(np.int64)

    def plan(self) -> dict[str, Any]:
        return super().plan() | {"rank": self.rank, "work_ns": [int(x) for x in (self.work if self.work is not None else [])]}


def effects_for(job: Job, steps: int, faults: list[Fault]) -> Effects:
    """Fresh effects with ``faults`` applied in order."""
    eff = Effects(steps=steps)
    for f in faults:
        f.apply(eff, job)
    return eff
