"""The job being simulated: hardware, hosts, ranks, network and process groups.

A :class:`Job` is pure data. It is drawn once per bundle from a seeded RNG (:func:`build_job`)
and then read by the schedule builder, the physics engine and both writers, so every file of a
bundle describes the same machines.

Assumptions (kept deliberately simple, stated here once):

* one process per GPU (torchrun): ``rank = node * gpus_per_node + local_rank`` and
  ``cudaDev = local_rank`` (each process sees all GPUs of its host);
* two CPU sockets per host; GPUs ``0 .. G/2-1`` hang off socket 0, the rest off socket 1; NIC
  ``i`` of ``n`` sits next to GPUs ``i*G/n .. (i+1)*G/n - 1`` (same PCIe switch, path PIX);
* the inter-node network is the same kind on every host (IB or RoCE) unless a fault changes it;
* every rank creates every process group in the same order (as ``torch.distributed.new_group``
  requires), so group names are the same on every member.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

Parallelism = Literal["ddp", "fsdp", "hsdp", "tp_dp", "pipeline"]
PARALLELISMS: tuple[str, ...] = ("ddp", "fsdp", "hsdp", "tp_dp", "pipeline")


@dataclass(frozen=True)
class GPUModel:
    """What ``deviceProperties`` reports, plus the NVLink all-reduce bus bandwidth we assume."""

    key: str
    name: str
    total_mem: int
    major: int
    minor: int
    sms: int
    smem_optin: int
    smem_per_mp: int
    nvlink_busbw: float  #: GB/s, intra-node all-reduce bus bandwidth over NVLink/NVSwitch (nccl-tests)
    speed: float  #: relative compute speed (A100 = 1.0); scales kernel durations
    arch: str  #: kernel-name prefix (sm80, sm90)

    def properties(self, device_id: int) -> dict[str, int | str]:
        """One ``deviceProperties`` entry, with the keys and order Kineto writes."""
        return {
            "id": device_id, "name": self.name, "totalGlobalMem": self.total_mem,
            "computeMajor": self.major, "computeMinor": self.minor, "maxThreadsPerBlock": 1024,
            "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
            "sharedMemPerBlock": 49152, "numSms": self.sms, "regsPerMultiprocessor": 65536,
            "sharedMemPerBlockOptin": self.smem_optin, "sharedMemPerMultiprocessor": self.smem_per_mp,
        }


GPUS: dict[str, GPUModel] = {
    "A100-80": GPUModel("A100-80", "NVIDIA A100-SXM4-80GB", 85100068864, 8, 0, 108, 166912, 167936, 215.0, 1.0, "sm80"),
    "A100-40": GPUModel("A100-40", "NVIDIA A100-SXM4-40GB", 42297524224, 8, 0, 108, 166912, 167936, 200.0, 1.0, "sm80"),
    "H100": GPUModel("H100", "NVIDIA H100 80GB HBM3", 84942979072, 9, 0, 132, 232448, 233472, 360.0, 2.2, "sm90"),
}

#: PCI bus ids (hex, as NCCL prints them) of the GPUs of common 8- and 4-GPU boards
BUS_IDS: dict[tuple[str, int], tuple[str, ...]] = {
    ("A100", 8): ("7000", "b000", "48000", "4c000", "88000", "8b000", "c8000", "cb000"),
    ("A100", 4): ("7000", "48000", "88000", "c8000"),
    ("H100", 8): ("18000", "2a000", "3a000", "5d000", "9a000", "ab000", "ba000", "db000"),
    ("H100", 4): ("18000", "3a000", "9a000", "ba000"),
}


@dataclass
class Host:
    """One machine."""

    index: int
    name: str
    ip: str
    socket_if: str  #: interface NCCL's bootstrap (and NET/Socket) uses
    nics: list[str]  #: HCA names, e.g. mlx5_0
    cores_per_socket: int
    boot_offset_s: int  #: how long the host has been up at the trace start (for realism only)


@dataclass
class Rank:
    """One process (= one GPU)."""

    rank: int
    host: int  #: index into ``Job.hosts``
    local: int  #: local rank = cudaDev
    pid: int
    autograd_tid: int  #: thread id of ``pt_autograd_<dev>`` (backward ops run there)
    bus_id: str


@dataclass
class ProcessGroup:
    """A ``torch.distributed`` process group (and, behind it, one NCCL communicator per member).

    ``kind`` says what it is for: world, dp, tp, pp, shard, replicate, or p2p (a two-rank
    communicator that ProcessGroupNCCL creates lazily for send/recv between a pair of ranks of
    ``parent``).
    """

    name: str
    desc: str
    ranks: tuple[int, ...]
    kind: str
    parent: str | None = None  #: for p2p communicators: the group the send/recv was called on
    comm_id: int = 0  #: NCCL ``commId`` hash printed in logs

    @property
    def size(self) -> int:
        return len(self.ranks)

    def group_rank(self, rank: int) -> int:
        return self.ranks.index(rank)


@dataclass
class Network:
    """Inter-node network as NCCL will use it (before faults)."""

    kind: Literal["IB", "RoCE"]
    nics_per_host: int
    per_nic_busbw: float  #: GB/s of all-reduce bus bandwidth one NIC sustains (nccl-tests)
    link_gbps: int  #: nominal link rate (100/200/400 Gb/s)

    @property
    def host_busbw(self) -> float:
        """Aggregate inter-node bus bandwidth of one host (GB/s)."""
        return self.nics_per_host * self.per_nic_busbw


@dataclass
class Job:
    """Everything that describes the machines and the process groups of one simulated job."""

    hosts: list[Host]
    ranks: list[Rank]
    gpu: GPUModel
    gpus_per_node: int
    network: Network
    parallelism: str
    groups: dict[str, ProcessGroup] = field(default_factory=dict)
    #: for tp_dp: tensor-parallel degree; for pipeline: number of stages
    tp: int = 1
    pp: int = 1
    microbatches: int = 1
    #: per rank: name of the group used for each role (dp, tp, pp, shard, replicate, world)
    roles: dict[int, dict[str, str]] = field(default_factory=dict)

    @property
    def world(self) -> int:
        return len(self.ranks)

    @property
    def n_nodes(self) -> int:
        return len(self.hosts)

    def host_of(self, rank: int) -> Host:
        return self.hosts[self.ranks[rank].host]

    def ranks_of_host(self, host: int) -> list[int]:
        g = self.gpus_per_node
        return list(range(host * g, (host + 1) * g))

    def socket_of_gpu(self, local: int) -> int:
        return 0 if local < self.gpus_per_node // 2 else 1

    def nic_of_gpu(self, local: int) -> int:
        n = self.network.nics_per_host
        return min(n - 1, local * n // self.gpus_per_node)

    def groups_of(self, rank: int) -> list[ProcessGroup]:
        """Groups the rank is a member of, in creation order."""
        return [g for g in self.groups.values() if rank in g.ranks]

    def cpu_mask(self, host: int, socket: int) -> str:
        """Linux CPU mask (comma-separated 32-bit words, high word first) of one socket with
        hyper-threads, as NCCL prints it in ``Setting affinity for GPU d to <mask>``."""
        c = self.hosts[host].cores_per_socket
        bits = 0
        for cpu in range(socket * c, (socket + 1) * c):
            bits |= 1 << cpu
            bits |= 1 << (cpu + 2 * c)
        words = []
        while bits:
            words.append(bits & 0xFFFFFFFF)
            bits >>= 32
        out = [format(words[-1], "x")] + [format(w, "08x") for w in reversed(words[:-1])]
        return ",".join(out)


# -- drawing a job ----------------------------------------------------------------------------

_HOST_STYLES = ("node", "gpu", "ip", "dgx", "k8s", "hgx")


def host_names(n: int, style: str, rng: np.random.Generator, gpu_tag: str = "h100") -> list[str]:
    """Realistic host names in one of a few naming styles."""
    if style == "node":
        return [f"node-{i:02d}" for i in range(n)]
    if style == "gpu":
        base = int(rng.integers(1, 60))
        return [f"gpu-a{base + i:03d}" for i in range(n)]
    if style == "ip":
        third = int(rng.integers(0, 200))
        return [f"ip-10-0-{third}-{int(x)}" for x in rng.choice(np.arange(10, 250), n, replace=False)]
    if style == "dgx":
        start = int(rng.integers(1, 40))
        return [f"dgx{start + i:02d}" for i in range(n)]
    if style == "k8s":
        job = "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz0123456789"), 5))
        return [f"trainjob-{job}-worker-{i}" for i in range(n)]
    start = int(rng.integers(1, 90))
    return [f"hgx-{gpu_tag}-{start + i:03d}" for i in range(n)]


def _comm_id(seed: int, name: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}/{name}".encode()).digest()[:8], "big")


#: RDMA NICs per host drawn for a job (with their probabilities), for 8-GPU and 4-GPU hosts
NIC_COUNTS: dict[int, tuple[list[int], list[float]]] = {8: ([1, 2, 4, 8], [0.2, 0.3, 0.3, 0.2]), 4: ([1, 2, 4], [0.3, 0.4, 0.3])}
#: share of its line rate one NIC at 100/200/400 Gb/s sustains as all-reduce bus bandwidth (nccl-tests)
NIC_EFFICIENCY = (0.85, 0.92)


def _links(gpu_key: str) -> list[int]:
    """Line rates (Gb/s) drawn for the NICs of hosts with this GPU."""
    return [200, 400] if gpu_key == "H100" else [100, 200]


def healthy_host_busbw_floor(device_name: str, gpus_per_node: int) -> float:
    """The lowest inter-node bus bandwidth (GB/s) a healthy host with these GPUs can get in a
    generated job (its fewest NICs at the slowest line rate and efficiency): a fabric fault that
    leaves a host this much or more moves bytes as fast as some healthy job does, so its traces
    alone cannot show it (``benchmarks/attribution_eval.py`` counts such bundles apart)."""
    key = "H100" if "H100" in device_name else "A100"
    counts, _ = NIC_COUNTS[8 if gpus_per_node == 8 else 4]
    return min(counts) * min(_links(key)) / 8 * NIC_EFFICIENCY[0]


def build_job(*, rng: np.random.Generator, seed: int, nodes: int, gpus_per_node: int, parallelism: str,
              gpu: str | None = None, network: str | None = None, host_style: str | None = None,
              hashed_group_names: bool = False) -> Job:
    """Draw the machines and create the process groups for ``parallelism``.

    Group creation follows what the frameworks do: ``default_pg`` first, then (DeviceMesh or
    ``new_group``) every sub-group in the same order on every rank.
    """
    if gpu is None:
        gpu = str(rng.choice(["A100-80", "A100-40", "H100"], p=[0.4, 0.2, 0.4]))
    gm = GPUS[gpu]
    style = host_style or str(rng.choice(_HOST_STYLES))
    names = host_names(nodes, style, rng, "h100" if gm.key == "H100" else "a100")
    if network is None:
        network = str(rng.choice(["IB", "RoCE"], p=[0.65, 0.35]))
    counts, p = NIC_COUNTS[8 if gpus_per_node == 8 else 4]
    nics = int(rng.choice(counts, p=p))
    link = int(rng.choice(_links(gm.key)))
    per_nic = link / 8 * float(rng.uniform(*NIC_EFFICIENCY))
    net = Network(kind=network, nics_per_host=nics, per_nic_busbw=per_nic, link_gbps=link)  # type: ignore[arg-type]
    if_name = str(rng.choice(["eth0", "ens5", "bond0", "enp220s0np0", "ibp25s0"]))
    third = int(rng.integers(0, 250))
    hosts: list[Host] = []
    for i, name in enumerate(names):
        nic_names = [f"mlx5_bond_{k}" if network == "RoCE" and if_name == "bond0" else f"mlx5_{k}" for k in range(nics)]
        hosts.append(Host(index=i, name=name, ip=f"10.{third}.{i // 250}.{10 + i % 240}", socket_if=if_name,
                          nics=nic_names, cores_per_socket=int(rng.choice([16, 24, 32, 48])),
                          boot_offset_s=int(rng.integers(3 * 86400, 90 * 86400))))
    ranks: list[Rank] = []
    bus = BUS_IDS[("H100" if gm.key == "H100" else "A100", gpus_per_node)]
    for h in range(nodes):
        pid = int(rng.integers(1000, 3_000_000))
        for local in range(gpus_per_node):
            # launchers fork the local ranks one after another: increasing pids, never one twice
            # on a host (each gap drawn as before, so every other draw stays as it was)
            gap = int(rng.integers(1, 4))
            pid = pid if local == 0 else pid + gap
            ranks.append(Rank(rank=h * gpus_per_node + local, host=h, local=local, pid=pid,
                              autograd_tid=pid + int(rng.integers(200, 12000)), bus_id=bus[local]))
    job = Job(hosts=hosts, ranks=ranks, gpu=gm, gpus_per_node=gpus_per_node, network=net, parallelism=parallelism)
    _make_groups(job, seed=seed, rng=rng, hashed=hashed_group_names)
    return job


def _make_groups(job: Job, *, seed: int, rng: np.random.Generator, hashed: bool) -> None:
    world = tuple(range(job.world))
    G, N = job.gpus_per_node, job.n_nodes
    counter = [0]

    def add(ranks: tuple[int, ...], desc: str, kind: str) -> str:
        if counter[0] == 0:
            name = "0"
        elif hashed:
            name = hashlib.sha1(repr(ranks).encode()).hexdigest()[:32] + f"_{counter[0]}"
        else:
            name = str(counter[0])
        counter[0] += 1
        job.groups[name] = ProcessGroup(name=name, desc=desc, ranks=ranks, kind=kind, comm_id=_comm_id(seed, name))
        return name

    wname = add(world, "default_pg", "world")
    roles: dict[int, dict[str, str]] = {r: {"world": wname} for r in world}
    p = job.parallelism
    if p in ("ddp", "fsdp"):
        for r in world:
            roles[r]["dp"] = wname
    elif p == "hsdp":
        # DeviceMesh (replicate, shard): shard inside a host, replicate across hosts
        for h in range(N):
            n = add(tuple(job.ranks_of_host(h)), "mesh_shard", "shard")
            for r in job.ranks_of_host(h):
                roles[r]["shard"] = n
        for local in range(G):
            n = add(tuple(h * G + local for h in range(N)), "mesh_replicate", "replicate")
            for h in range(N):
                roles[h * G + local]["replicate"] = n
    elif p == "tp_dp":
        tp = G if rng.random() < 0.6 else G // 2
        job.tp = tp
        for start in range(0, job.world, tp):
            n = add(tuple(range(start, start + tp)), "mesh_tp", "tp")
            for r in range(start, start + tp):
                roles[r]["tp"] = n
        for t in range(tp):
            members = tuple(r for r in world if r % tp == t)
            n = add(members, "mesh_dp", "dp")
            for r in members:
                roles[r]["dp"] = n
    elif p == "pipeline":
        # stages across hosts; the ranks of one stage are that stage's data-parallel replicas
        pp = N if N <= 8 else max(2, N // 2)
        while N % pp:
            pp -= 1
        job.pp = pp
        job.microbatches = int(rng.choice([4, 6, 8]))
        per_stage = job.world // pp
        stage_ranks = [tuple(range(s * per_stage, (s + 1) * per_stage)) for s in range(pp)]
        for s in range(pp):
            n = add(stage_ranks[s], "mesh_dp", "dp")
            for r in stage_ranks[s]:
                roles[r]["dp"] = n
        for j in range(per_stage):
            members = tuple(stage_ranks[s][j] for s in range(pp))
            n = add(members, "mesh_pp", "pp")
            for r in members:
                roles[r]["pp"] = n
        # ProcessGroupNCCL creates one 2-rank communicator per (send, recv) pair, keyed "lo:hi"
        for j in range(per_stage):
            for s in range(pp - 1):
                a, b = stage_ranks[s][j], stage_ranks[s + 1][j]
                parent = roles[a]["pp"]
                key = f"{parent}@{a}:{b}"
                job.groups[key] = ProcessGroup(name=key, desc="p2p", ranks=(a, b), kind="p2p", parent=parent,
                                               comm_id=_comm_id(seed, key))
    else:
        raise ValueError(f"unknown parallelism {p!r}")
    job.roles = roles


def stage_of(job: Job, rank: int) -> int:
    """Pipeline stage of a rank (0 when not a pipeline job)."""
    if job.parallelism != "pipeline":
        return 0
    return rank // (job.world // job.pp)
