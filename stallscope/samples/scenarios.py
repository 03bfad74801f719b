"""The named scenarios, their ground truth, and the difficulty knobs.

Each :class:`Scenario` says which cause the ground truth names, which parallelism plans it can
run on, and how to draw its faults for a given severity. Severity sets the *injected* magnitude;
the time the fault actually cost is measured afterwards by the physics what-if (the same
schedule re-run without the fault) and written to the truth file.

==========================  ===============  ===========================================================
scenario                    cause            what is injected
==========================  ===============  ===========================================================
healthy                     none             nothing (noise only)
healthy_imbalanced          none             pipeline stages with uneven work and bubbles, or one rank's
                                             extra host work hidden behind its GPU queue
socket_fallback             fabric           NCCL net = Socket on every host (1-3 GB/s per host)
degraded_nic                fabric           one host's inter-node bandwidth x 0.1-0.85, IB port WARNs
compute_straggler           synchronization  one rank's compute kernels x 1.04-2.0
host_stall_straggler        synchronization  one rank's CPU stalls every step (data loader, GC, sync calls)
intermittent_straggler      synchronization  one or two ranks stall in some steps only
jitter_amplification        synchronization  every rank, every step: a random host delay (log-normal)
p2p_disabled_one_host       locality         one host's intra-node traffic over SHM (10-20 GB/s); with the
                                             knob p2p_hosts=all, every host's (never drawn by a suite)
cross_socket_nic_one_host   locality         one host: NIC across the socket (bw x 0.35-0.7, no GDR),
                                             processes on the far NUMA node (host work x 1.15-2.5)
two_faults                  (dominant)       two of the above at once; the truth is the one that costs
                                             more time (at least twice the other), the other is listed
==========================  ===============  ===========================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable

import numpy as np

from stallscope.errors import UsageError
from stallscope.samples import faults as F
from stallscope.samples.model import PARALLELISMS, Job
from stallscope.samples.versions import NCCL_RELEASES, TORCH_VARIANTS

SEVERITIES = ("subtle", "moderate", "severe")


@dataclass
class Knobs:
    """Everything that varies between bundles. ``None`` means "draw it from the seed"."""

    nodes: int | None = None
    gpus: int | None = None
    steps: int | None = None
    parallelism: str | None = None
    severity: str | None = None
    magnitude: float | None = None  #: overrides the severity draw (meaning depends on the scenario)
    noise: str | None = None  #: low | medium | high
    nccl_version: str | None = None
    torch_variant: str | None = None  #: kineto_2022 | kineto_2024 | kineto_2025
    metadata: bool | None = None  #: collective metadata in traces (forced off for kineto_2022)
    seq: bool | None = None  #: ``Seq`` in the metadata (only kineto_2025 writes it by default)
    naming: str | None = None  #: tensorboard | rank | arbitrary
    gzip: bool | None = None
    archive: str | None = None  #: dir | tar.gz | zip
    logs: str | None = None  #: all | some | none
    log_style: str | None = None  #: debug_file | torchrun
    detail: str | None = None  #: full | lean | sparse
    clock_offset_ms: float | None = None  #: max |offset| between hosts
    drift: bool | None = None  #: linear clock drift of a few µs/s per host
    red_herrings: bool | None = None
    graph_subsys: bool | None = None
    truncate: int | None = None  #: traces cut mid-file (killed job), never a culprit's
    drop: int | None = None  #: ranks whose trace is missing (lost, never written), never a culprit's unless all are
    windows: int | None = None  #: 1: every trace in two profiling windows (schedule repeat), a step recorded in neither
    step_marks: bool | None = None  #: False: profiled without ``prof.step()``, no ``ProfilerStep#N`` marks (not with windows)
    gpu: str | None = None  #: A100-80 | A100-40 | H100
    network: str | None = None  #: IB | RoCE
    step_ms: float | None = None
    culprit_rank: int | None = None
    culprit_host: int | None = None
    secondary: str | None = None  #: two_faults: the secondary scenario
    primary: str | None = None  #: two_faults: the dominant scenario
    p2p_hosts: str | None = None  #: p2p_disabled_one_host: "one" (default) or "all" (never drawn: a job-wide NCCL_P2P_DISABLE)

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def resolved(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class Ctx:
    """What a scenario's fault builder may look at."""

    job: Job
    steps: int
    severity: str
    magnitude: float | None
    rng: np.random.Generator
    step_ns: float  #: nominal step time
    knobs: Knobs
    culprit_rank: int
    culprit_host: int


@dataclass(frozen=True)
class Scenario:
    name: str
    cause: str
    summary: str
    plans: tuple[str, ...]
    make: Callable[[Ctx], list[F.Fault]]
    host_level: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _mag(ctx: Ctx, ranges: dict[str, tuple[float, float]]) -> float:
    if ctx.magnitude is not None:
        return float(ctx.magnitude)
    lo, hi = ranges[ctx.severity]
    return float(ctx.rng.uniform(lo, hi))


def _healthy(ctx: Ctx) -> list[F.Fault]:
    return []


def _imbalanced(ctx: Ctx) -> list[F.Fault]:
    if ctx.job.parallelism == "pipeline":
        return []  # the imbalance is in the stage costs (see build_spec(imbalance=...))
    work = np.full(ctx.steps, ctx.step_ns * float(ctx.rng.uniform(0.08, 0.25)), dtype=np.int64)
    return [F.HiddenHostWork(rank=0, work=work)]


def _socket(ctx: Ctx) -> list[F.Fault]:
    reason = str(ctx.rng.choice(["ib_disabled", "no_verbs", "net_env"], p=[0.5, 0.3, 0.2]))
    bw = _mag(ctx, {"subtle": (12.0, 20.0), "moderate": (4.0, 8.0), "severe": (0.8, 3.0)})
    return [F.SocketFallback(reason=reason, socket_bw=bw)]


def _degraded(ctx: Ctx) -> list[F.Fault]:
    factor = _mag(ctx, {"subtle": (0.65, 0.8), "moderate": (0.35, 0.55), "severe": (0.1, 0.25)})
    return [F.DegradedNic(host=ctx.culprit_host, factor=factor, warns=bool(ctx.rng.random() < 0.75))]


def _compute(ctx: Ctx) -> list[F.Fault]:
    slow = _mag(ctx, {"subtle": (0.05, 0.09), "moderate": (0.15, 0.3), "severe": (0.5, 1.0)})
    return [F.ComputeStraggler(rank=ctx.culprit_rank, slowdown=slow)]


def _stall(ctx: Ctx) -> list[F.Fault]:
    frac = _mag(ctx, {"subtle": (0.03, 0.06), "moderate": (0.1, 0.2), "severe": (0.35, 0.7)})
    d = ctx.step_ns * frac * ctx.rng.uniform(0.8, 1.2, ctx.steps)
    kind = str(ctx.rng.choice(["dataloader", "gc", "sync"], p=[0.55, 0.25, 0.2]))
    return [F.HostStall(delays={ctx.culprit_rank: d.astype(np.int64)}, stall_kind=kind)]


def _intermittent(ctx: Ctx) -> list[F.Fault]:
    frac = _mag(ctx, {"subtle": (0.06, 0.1), "moderate": (0.2, 0.4), "severe": (0.6, 1.2)})
    S = ctx.steps
    ranks = [ctx.culprit_rank]
    if ctx.rng.random() < 0.3 and ctx.job.world > 2:
        other = int(ctx.rng.integers(0, ctx.job.world))
        if other != ctx.culprit_rank:
            ranks.append(other)
    delays: dict[int, np.ndarray] = {}
    for r in ranks:
        k = max(1, int(round(S * float(ctx.rng.uniform(0.25, 0.5)))))
        if S >= 2:
            k = min(k, S - 1)
        hit = ctx.rng.choice(S, k, replace=False)
        d = np.zeros(S)
        d[hit] = ctx.step_ns * frac * ctx.rng.uniform(0.8, 1.25, k)
        delays[r] = d.astype(np.int64)
    kind = str(ctx.rng.choice(["dataloader", "gc"], p=[0.6, 0.4]))
    return [F.HostStall(delays=delays, stall_kind=kind, intermittent=True)]


def _jitter(ctx: Ctx) -> list[F.Fault]:
    mean = _mag(ctx, {"subtle": (0.012, 0.02), "moderate": (0.03, 0.06), "severe": (0.08, 0.15)})
    sigma = float(ctx.rng.uniform(0.5, 0.8))
    mu = np.log(ctx.step_ns * mean) - sigma**2 / 2
    W, S = ctx.job.world, ctx.steps
    for _ in range(20):
        d = ctx.rng.lognormal(mu, sigma, (W, S))
        # "none dominant": no rank may be the slowest in more than half the steps (from 4 steps)
        top = np.bincount(d.argmax(axis=0), minlength=W)
        if S < 4 or top.max() <= S // 2:
            break
    delays = {r: d[r].astype(np.int64) for r in range(W)}
    return [F.Jitter(delays=delays, magnitude=mean)]


def _p2p(ctx: Ctx) -> list[F.Fault]:
    return [F.P2PDisabled(host=ctx.culprit_host, via_env=bool(ctx.rng.random() < 0.7), every_host=ctx.knobs.p2p_hosts == "all")]


def _cross(ctx: Ctx) -> list[F.Fault]:
    cpu = _mag(ctx, {"subtle": (2.5, 3.5), "moderate": (5.0, 8.0), "severe": (10.0, 16.0)})
    bw = {"subtle": 0.8, "moderate": 0.65, "severe": 0.5}[ctx.severity]
    return [F.CrossSocketNic(host=ctx.culprit_host, bw_factor=bw, cpu_factor=cpu)]


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("healthy", "none", "a healthy job: noise only", PARALLELISMS, _healthy),
    Scenario("healthy_imbalanced", "none", "uneven but healthy: pipeline stages with different work and bubbles, or one rank's extra host work hidden behind its GPU queue; nobody waits beyond noise at group collectives",
             ("pipeline", "ddp", "fsdp"), _imbalanced),
    Scenario("socket_fallback", "fabric", "NCCL fell back to TCP sockets between nodes", PARALLELISMS, _socket),
    Scenario("degraded_nic", "fabric", "one host's NIC runs at a fraction of its rate", ("ddp", "fsdp", "hsdp", "tp_dp"), _degraded, host_level=True),
    Scenario("compute_straggler", "synchronization", "one GPU computes slower; the others wait for it", PARALLELISMS, _compute),
    Scenario("host_stall_straggler", "synchronization", "one rank's CPU stalls every step (data loading, GC, or host-synchronizing calls); its GPU idles", PARALLELISMS, _stall),
    Scenario("intermittent_straggler", "synchronization", "one or two ranks stall in some steps only", PARALLELISMS, _intermittent),
    Scenario("jitter_amplification", "synchronization", "every rank has small random delays; each step waits for the slowest", ("ddp", "fsdp", "hsdp", "tp_dp"), _jitter),
    Scenario("p2p_disabled_one_host", "locality", "one host's intra-node traffic goes through shared memory", ("tp_dp", "hsdp"), _p2p, host_level=True),
    Scenario("cross_socket_nic_one_host", "locality", "one host's GPUs reach their NICs across the CPU socket and run on the far NUMA node", ("ddp", "fsdp", "tp_dp"), _cross, host_level=True),
)}
SCENARIOS["two_faults"] = Scenario("two_faults", "dominant", "two faults at once; the truth is the dominant one", PARALLELISMS, _healthy)

#: (dominant, secondary) pairs two_faults draws from
TWO_FAULT_PAIRS: tuple[tuple[str, str], ...] = (
    ("compute_straggler", "degraded_nic"),
    ("degraded_nic", "intermittent_straggler"),
    ("socket_fallback", "host_stall_straggler"),
    ("host_stall_straggler", "degraded_nic"),
    ("p2p_disabled_one_host", "degraded_nic"),
    ("p2p_disabled_one_host", "intermittent_straggler"),
    ("cross_socket_nic_one_host", "intermittent_straggler"),
    ("compute_straggler", "jitter_amplification"),
    ("host_stall_straggler", "compute_straggler"),
)
#: secondaries that act on one rank: with a synchronization or locality primary they are put on
#: the primary's culprit (rank, or a rank of its host), where their cost adds up instead of being
#: absorbed by the time everyone already waits for the primary
RANK_LEVEL = ("compute_straggler", "host_stall_straggler", "intermittent_straggler")


def resolve_knobs(scenario: str, knobs: Knobs, rng: np.random.Generator) -> Knobs:
    """Fill every ``None`` knob from ``rng`` (in a fixed order, so a seed always resolves the same)."""
    if scenario not in SCENARIOS:
        raise UsageError(f"unknown scenario {scenario!r}; choose one of: {', '.join(SCENARIOS)}")
    k = Knobs(**knobs.resolved())
    sc = SCENARIOS[scenario]
    if scenario == "two_faults":
        if k.primary is None or k.secondary is None:
            pairs = [p for p in TWO_FAULT_PAIRS if (k.primary in (None, p[0])) and (k.secondary in (None, p[1]))]
            if not pairs:
                raise UsageError(f"two_faults: no pair with primary={k.primary} secondary={k.secondary}")
            p = pairs[int(rng.integers(len(pairs)))]
            k.primary, k.secondary = p
        for s in (k.primary, k.secondary):
            if s not in SCENARIOS or s in ("two_faults", "healthy", "healthy_imbalanced"):
                raise UsageError(f"two_faults: {s!r} cannot be a component fault")
        plans = tuple(x for x in SCENARIOS[k.primary].plans if x in SCENARIOS[k.secondary].plans)
    else:
        plans = sc.plans
    draw = {
        "nodes": lambda: int(rng.choice([2, 2, 3, 4, 4, 6, 8, 16], p=[0.2, 0.1, 0.1, 0.2, 0.1, 0.1, 0.15, 0.05])),
        "gpus": lambda: int(rng.choice([4, 8])),
        "steps": lambda: int(rng.choice([2, 3, 4, 6, 8, 10, 12], p=[0.06, 0.1, 0.14, 0.25, 0.25, 0.12, 0.08])),
        "severity": lambda: str(rng.choice(SEVERITIES, p=[0.3, 0.4, 0.3])),
        "noise": lambda: str(rng.choice(["low", "medium", "high"], p=[0.3, 0.5, 0.2])),
        "torch_variant": lambda: str(rng.choice(list(TORCH_VARIANTS), p=[0.2, 0.4, 0.4])),
    }
    for name, fn in draw.items():
        if getattr(k, name) is None:
            setattr(k, name, fn())
    if k.parallelism is None:
        p_ok = [p for p in plans if _plan_ok(p, k)]
        if not p_ok:
            raise UsageError(f"{scenario}: no parallelism plan fits nodes={k.nodes} gpus={k.gpus}")
        k.parallelism = str(rng.choice(p_ok))
    elif k.parallelism not in PARALLELISMS:
        raise UsageError(f"unknown parallelism {k.parallelism!r}; choose one of: {', '.join(PARALLELISMS)}")
    if k.torch_variant not in TORCH_VARIANTS:
        raise UsageError(f"unknown torch_variant {k.torch_variant!r}; choose one of: {', '.join(TORCH_VARIANTS)}")
    if k.nccl_version is None:
        k.nccl_version = str(rng.choice(TORCH_VARIANTS[k.torch_variant]))
    elif k.nccl_version.split("+")[0] not in NCCL_RELEASES:
        raise UsageError(f"unsupported NCCL version {k.nccl_version!r}; choose one of: {', '.join(NCCL_RELEASES)}")
    if k.metadata is None:
        k.metadata = k.torch_variant != "kineto_2022" and bool(rng.random() < 0.95)
    if k.seq is None:
        k.seq = k.torch_variant == "kineto_2025"
    if k.naming is None:
        k.naming = str(rng.choice(["tensorboard", "rank", "arbitrary"], p=[0.5, 0.3, 0.2]))
    if k.gzip is None:
        k.gzip = bool(rng.random() < 0.6)
    if k.archive is None:
        k.archive = str(rng.choice(["dir", "tar.gz", "zip"], p=[0.4, 0.4, 0.2]))
    if k.logs is None:
        k.logs = str(rng.choice(["all", "some", "none"], p=[0.4, 0.25, 0.35]))
    if k.log_style is None:
        k.log_style = str(rng.choice(["debug_file", "torchrun"], p=[0.75, 0.25]))
    world = k.nodes * k.gpus  # type: ignore[operator]
    if k.detail is None:
        k.detail = "full" if world <= 8 else ("lean" if world <= 32 else "sparse")
    if k.clock_offset_ms is None:
        k.clock_offset_ms = float(rng.choice([0.0, 5.0, 30.0, 80.0], p=[0.1, 0.2, 0.3, 0.4]))
    if k.drift is None:
        k.drift = bool(rng.random() < 0.25)
    if k.red_herrings is None:
        k.red_herrings = bool(rng.random() < 0.8)
    if k.truncate is None:
        k.truncate = 1 if rng.random() < 0.05 else 0
    if k.graph_subsys is None:
        k.graph_subsys = bool(rng.random() < 0.35)
    if k.culprit_host is None:
        k.culprit_host = int(rng.integers(0, k.nodes))  # type: ignore[arg-type]
    if k.culprit_rank is None:
        k.culprit_rank = int(k.culprit_host * k.gpus + rng.integers(0, k.gpus))  # type: ignore[operator]
    if not 0 <= k.culprit_host < k.nodes or not 0 <= k.culprit_rank < world:  # type: ignore[operator]
        raise UsageError(f"culprit rank {k.culprit_rank} / host {k.culprit_host} out of range")
    if k.p2p_hosts not in (None, "one", "all"):
        raise UsageError(f"p2p_hosts must be 'one' or 'all' (got {k.p2p_hosts!r})")
    if k.torch_variant == "kineto_2022":
        k.metadata = False
        k.seq = False
    return k


def _plan_ok(p: str, k: Knobs) -> bool:
    if p == "pipeline":
        return (k.nodes or 0) >= 2
    if p == "hsdp":
        return (k.nodes or 0) >= 2
    return True
