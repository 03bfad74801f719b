"""Write NCCL debug logs (``NCCL_DEBUG=INFO``) the way each process would, per NCCL version.

One log per process, as ``NCCL_DEBUG_FILE=%h.%p`` names them (``<host>.<pid>``), or all local
ranks of a host interleaved in one captured stdout (``torchrun --tee``), each line wrapped with
``[default<local>]:``. Every line is ``host:pid:tid [cudaDev] NCCL INFO|WARN ...`` with the
spellings of :mod:`stallscope.samples.versions`.

What a process logs: environment echoes, bootstrap and network selection, then for every
communicator it joins (one per process group, plus the 2-rank ones ProcessGroupNCCL makes for
send/recv) ``Init START``, CPU affinity, ring/tree lines (ring printed by the communicator's
rank 0), one connection line per channel to its ring neighbours (P2P/SHM printed by the sender,
NET by both sides), ``Connected all rings``/``trees``, channel counts, ``Init COMPLETE`` and
init timings.

Faults leave the evidence real jobs leave: ``Using network Socket`` and ``NET/Socket``
connections (socket fallback, with the reason: ``NCCL_IB_DISABLE``, missing libibverbs or
``NCCL_NET=Socket``); ``via SHM`` where other hosts show P2P and the ``NCCL_P2P_DISABLE`` echo;
NET connections without ``/GDRDMA``, the far socket's CPU mask and a ``SYS`` graph type on a
host whose NICs sit across the socket; IB async port errors and a lower graph bandwidth on a
host with a degraded NIC. Red herrings that mean nothing: the bootstrap's ``Bootstrap :
Using eth0`` (and sometimes ``NET/Socket : Using``) in IB jobs, harmless NVML and CUDA WARNs,
environment echoes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from stallscope.samples.faults import Effects
from stallscope.samples.model import Job, ProcessGroup
from stallscope.samples.versions import NcclVersion


@dataclass
class LogOptions:
    env: dict[str, str] = field(default_factory=dict)  #: NCCL_* variables echoed at init
    red_herrings: bool = True
    graph_subsys: bool = False  #: NCCL_DEBUG_SUBSYS includes GRAPH/NET (topology lines)
    harmless_warn_hosts: list[int] = field(default_factory=list)
    socket_line_in_ib: bool = False  #: print a NET/Socket line in an IB job (bootstrap noise)
    max_channels: int = 8


class NcclLogWriter:
    """Produces the log lines of every process of a job."""

    def __init__(self, job: Job, eff: Effects, v: NcclVersion, opts: LogOptions, rng: np.random.Generator,
                 host_hints: dict[int, list[str]], job_hints: list[str]):
        self.job, self.eff, self.v, self.opts = job, eff, v, opts
        self.rng = rng
        self.hints = host_hints
        self.job_hints = job_hints
        self.socket = eff.net == "Socket"
        self.comm_ptr: dict[tuple[int, str], str] = {}
        for r in range(job.world):
            base = int(rng.integers(0x5500_0000_0000, 0x5600_0000_0000))
            for k, g in enumerate(job.groups_of(r)):
                self.comm_ptr[(r, g.name)] = f"0x{(base + k * int(rng.integers(0x1000, 0x90000))) & ~0xF:x}"
        self.cuda_driver = int(v.cuda.replace(".", "")[:2]) * 1000 + int(v.cuda.split(".")[1]) * 10 + 20

    # -- helpers ---------------------------------------------------------------------------------
    def _prefix(self, r: int, tid: int) -> str:
        rk = self.job.ranks[r]
        return f"{self.job.hosts[rk.host].name}:{rk.pid}:{tid} [{rk.local}]"

    def _bracket(self, r: int) -> str:
        rk = self.job.ranks[r]
        return str(rk.local) if self.v.nvml_brackets else rk.bus_id

    def _intra_transport(self, host: int) -> str:
        if not self.eff.p2p.get(host, True):
            return "SHM/direct/direct"
        if self.v.cumem:
            return "P2P/CUMEM" if self.job.gpu.key == "H100" else "P2P/CUMEM/read"
        return "P2P/IPC/read"

    def _net_name(self) -> str:
        return "Socket" if self.socket else "IB"

    def _gdr(self, host: int) -> bool:
        return not self.socket and self.eff.gdr.get(host, True)

    # -- the log of one process ----------------------------------------------------------------
    def process_lines(self, r: int) -> list[str]:
        job, v, opts = self.job, self.v, self.opts
        rk = job.ranks[r]
        host = job.hosts[rk.host]
        hints = self.hints.get(rk.host, [])
        main = rk.pid
        P = self._prefix(r, main)
        out: list[str] = []
        a = out.append
        if v >= (2, 14, 0):
            a(f"{P} NCCL INFO cudaDriverVersion {self.cuda_driver}")
        env = dict(opts.env)
        if "p2p_disable_env" in hints:
            env["NCCL_P2P_DISABLE"] = "1"
        reason = self.eff.socket_reason if self.socket else ""
        if reason == "ib_disabled":
            env["NCCL_IB_DISABLE"] = "1"
        elif reason == "net_env":
            env["NCCL_NET"] = "Socket"
        for k in sorted(env):
            val = env[k]
            dot = "." if val.lstrip("-").isdigit() else ""
            a(f"{P} NCCL INFO {k} set by environment to {val}{dot}")
        boot = "Bootstrap: Using" if v >= (2, 23, 0) else "Bootstrap : Using"
        a(f"{P} NCCL INFO {boot} {host.socket_if}:{host.ip}<0>")
        if v >= (2, 21, 0):
            a(f"{P} NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.")
        elif v >= (2, 19, 0):
            a(f"{P} NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or directory No plugin found (libnccl-net.so), using internal implementation")
        else:
            a(f"{P} NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation")
        a(f"{P} NCCL INFO NCCL version {v.full}")
        tinit = main + int(self.rng.integers(40, 400))
        Q = self._prefix(r, tinit)
        if self.socket:
            if reason == "no_verbs":
                a(f"{Q} NCCL INFO Failed to open libibverbs.so[.1]")
            a(f"{Q} NCCL INFO NET/Socket : Using [0]{host.socket_if}:{host.ip}<0>")
            if v >= (2, 19, 0):
                a(f"{Q} NCCL INFO Using non-device net plugin version 0")
            a(f"{Q} NCCL INFO Using network Socket")
        else:
            kind = "RoCE" if job.network.kind == "RoCE" else "IB"
            devs = " ".join(f"[{i}]{n}:1/{kind}" for i, n in enumerate(host.nics))
            ro = " [RO]" if v >= (2, 12, 0) else " "
            a(f"{Q} NCCL INFO NET/IB : Using {devs}{ro}; OOB {host.socket_if}:{host.ip}<0>")
            if opts.socket_line_in_ib:
                a(f"{Q} NCCL INFO NET/Socket : Using [0]{host.socket_if}:{host.ip}<0>")
            if v >= (2, 19, 0):
                a(f"{Q} NCCL INFO Using non-device net plugin version 0")
            a(f"{Q} NCCL INFO Using network IB")
        if rk.host in opts.harmless_warn_hosts and opts.red_herrings:
            a("")
            a(f"{Q} misc/nvmlwrap.cc:274 NCCL WARN nvmlDeviceGetNvLinkCapability() failed: Not Supported")
            if rk.local == 0:
                a(f"{Q} misc/cudawrap.cc:190 NCCL WARN Cuda failure 'invalid argument'")
        for g in job.groups_of(r):
            out.extend(self._comm_lines(r, g, int(tinit if g.name == "0" else main + int(self.rng.integers(500, 20000)))))
        if "ib_port_warn" in hints and not self.socket:
            nic = host.nics[job.nic_of_gpu(rk.local) if len(host.nics) > 1 else 0]
            tasync = main + int(self.rng.integers(100, 900))
            W = self._prefix(r, tasync)
            dev = f"{nic}:1 " if v >= (2, 12, 0) else ""
            for _ in range(int(self.rng.integers(1, 4))):
                a("")
                a(f"{W} transport/net_ib.cc:{94 if v >= (2, 12, 0) else 85} NCCL WARN NET/IB : {dev}Got async event : port error")
                a("")
                a(f"{W} transport/net_ib.cc:{94 if v >= (2, 12, 0) else 85} NCCL WARN NET/IB : {dev}Got async event : port active")
        return out

    def _comm_lines(self, r: int, g: ProcessGroup, tid: int) -> list[str]:
        job, v, opts = self.job, self.v, self.opts
        rk = job.ranks[r]
        P = self._prefix(r, tid)
        out: list[str] = []
        a = out.append
        gr, n = g.group_rank(r), g.size
        ptr = self.comm_ptr[(r, g.name)]
        fn = "ncclCommInitRankConfig " if v.func_prefix else ""
        ident = f"comm {ptr} rank {gr} nranks {n} cudaDev {rk.local}"
        if v >= (2, 14, 0):
            ident += f" nvmlDev {rk.local} busId {rk.bus_id} commId 0x{g.comm_id:016x}"
        else:
            ident += f" busId {rk.bus_id}"
        if v.init_start:
            a(f"{P} NCCL INFO {fn}{ident} - Init START")
        hints = self.hints.get(rk.host, [])
        socket = job.socket_of_gpu(rk.local)
        if "cross_socket" in hints:
            socket = 1 - socket  # processes pinned to the far NUMA node (with the NICs)
        if g.name == "0" or g.kind == "p2p" or n > 1:
            a(f"{P} NCCL INFO Setting affinity for GPU {rk.local} to {job.cpu_mask(rk.host, socket)}")
        hosts = {job.ranks[x].host for x in g.ranks}
        inter = len(hosts) > 1
        if inter:
            nch = 2 * max(1, min(job.network.nics_per_host, 4)) if not self.socket else 2
        else:
            nch = (8 if job.gpu.key != "H100" else 16) if self.eff.p2p.get(rk.host, True) else 2
        nch = min(nch, opts.max_channels)
        if opts.graph_subsys:
            intra_t = "NVL" if self.eff.p2p.get(rk.host, True) else "SYS"
            bw_intra = 40.0 if job.gpu.key != "H100" else 80.0
            if inter:
                bw_inter = float(round(job.network.link_gbps / 8 * 0.96)) if not self.socket else 1.0
                if "degraded_nic" in hints:
                    bw_inter *= 0.5
                inter_t = "SYS" if "cross_socket" in hints else "PIX"
                a(f"{P} NCCL INFO Pattern 4, crossNic 0, nChannels {nch // 2}, bw {bw_intra:.6f}/{bw_inter:.6f}, type {intra_t}/{inter_t}, sameChannels 1")
                if "cross_socket" in hints:
                    a(f"{P} NCCL INFO GPU Direct RDMA Disabled for GPU {rk.bus_id} / HCA {job.nic_of_gpu(rk.local)} (distance 6 > 3)")
            else:
                a(f"{P} NCCL INFO Pattern 4, crossNic 0, nChannels {nch}, bw {bw_intra:.6f}/{bw_intra:.6f}, type {intra_t}/PIX, sameChannels 1")
        if gr == 0 and n > 1:
            for c in range(nch):
                head = f"{P} NCCL INFO Channel {c:02d}/{nch:02d} : "
                ranks = list(range(n))
                if v >= (2, 23, 0):
                    line = head + "".join(f"{x:4d}" for x in ranks)
                    a(line[:127])
                else:
                    a(head + "".join(f"{x:4d}" for x in ranks[:20]))
        if n > 1:
            a(f"{P} NCCL INFO Trees " + " ".join(f"[{c}] {self._tree(g, gr)}" for c in range(min(nch, 4))))
            if v >= (2, 12, 0):
                a(f"{P} NCCL INFO P2P Chunksize set to {131072 if inter else 524288}")
            out.extend(self._connections(r, g, gr, n, nch, P))
            if v >= (2, 24, 0):
                a(f"{P} NCCL INFO Connected all rings, use ring PXN 0 GDR {1 if self._gdr(rk.host) and inter else 0}")
            else:
                a(f"{P} NCCL INFO Connected all rings")
            a(f"{P} NCCL INFO Connected all trees")
            a(f"{P} NCCL INFO threadThresholds 8/8/64 | {n * 8}/8/64 | 512 | 512" if v >= (2, 12, 0) else f"{P} NCCL INFO threadThresholds 8/8/64 | {n * 8}/8/64 | 8/8/512")
            if v >= (2, 20, 0):
                a(f"{P} NCCL INFO {nch} coll channels, 0 collnet channels, 0 nvls channels, {nch} p2p channels, {max(1, nch // 4)} p2p channels per peer")
            else:
                a(f"{P} NCCL INFO {nch} coll channels, {nch} p2p channels, {max(1, nch // 4)} p2p channels per peer")
        a(f"{P} NCCL INFO {fn}{ident} - Init COMPLETE")
        if v >= (2, 22, 0):
            t = [float(x) for x in self.rng.uniform(0.0, 0.3, 6)]
            kern = float(self.rng.uniform(0.2, 0.6))
            total = kern + sum(t)
            if v >= (2, 23, 0):
                a(f"{P} NCCL INFO Init timings - ncclCommInitRankConfig: rank {gr} nranks {n} total {total:.2f} (kernels {kern:.2f}, alloc {t[0]:.2f}, bootstrap {t[1]:.2f}, allgathers {t[2] / 10:.2f}, topo {t[3]:.2f}, graphs {t[4] / 10:.2f}, connections {t[5]:.2f}, rest 0.00)")
            else:
                a(f"{P} NCCL INFO Init timings: rank {gr} nranks {n} total {total:.2f} (kernels {kern:.2f}, bootstrap {t[1]:.2f}, allgathers {t[2] / 10:.2f}, topo {t[3]:.2f}, graphs {t[4] / 10:.2f}, connections {t[5]:.2f}, rest 0.00)")
        return out

    def _tree(self, g: ProcessGroup, gr: int) -> str:
        """A chain inside each host and a binary tree over host heads, as ``d0/d1/d2->r->up``."""
        job = self.job
        hosts: list[list[int]] = []
        seen: dict[int, int] = {}
        for i, x in enumerate(g.ranks):
            h = job.ranks[x].host
            if h not in seen:
                seen[h] = len(hosts)
                hosts.append([])
            hosts[seen[h]].append(i)
        hi = seen[job.ranks[g.ranks[gr]].host]
        chain = hosts[hi]
        pos = chain.index(gr)
        down = [chain[pos + 1]] if pos + 1 < len(chain) else []
        if pos == 0:
            for child in (2 * hi + 1, 2 * hi + 2):
                if child < len(hosts):
                    down.append(hosts[child][0])
            up = hosts[(hi - 1) // 2][0] if hi > 0 else -1
        else:
            up = chain[pos - 1]
        down = (down + [-1, -1, -1])[:3]
        return f"{down[0]}/{down[1]}/{down[2]}->{gr}->{up}"

    def _connections(self, r: int, g: ProcessGroup, gr: int, n: int, nch: int, P: str) -> list[str]:
        job, v = self.job, self.v
        rk = job.ranks[r]
        nxt, prv = g.ranks[(gr + 1) % n], g.ranks[(gr - 1) % n]
        out = []
        same_next = job.ranks[nxt].host == rk.host
        same_prev = job.ranks[prv].host == rk.host
        net = self._net_name()
        for c in range(nch):
            ci = "/0" if v.conn_index else ""
            if same_next:
                t = self._intra_transport(rk.host)
                cs = "" if t.startswith("SHM") else ci
                out.append(f"{P} NCCL INFO Channel {c:02d}{cs} : {gr}[{self._bracket(r)}] -> {(gr + 1) % n}[{self._bracket(nxt)}] via {t}")
            else:
                dev = job.nic_of_gpu(rk.local) if not self.socket else 0
                gdr = "/GDRDMA" if self._gdr(rk.host) else ""
                out.append(f"{P} NCCL INFO Channel {c:02d}{ci} : {gr}[{self._bracket(r)}] -> {(gr + 1) % n}[{self._bracket(nxt)}] [send] via NET/{net}/{dev}{gdr}")
            if not same_prev:
                dev = job.nic_of_gpu(rk.local) if not self.socket else 0
                gdr = "/GDRDMA" if self._gdr(rk.host) else ""
                out.append(f"{P} NCCL INFO Channel {c:02d}{ci} : {(gr - 1) % n}[{self._bracket(prv)}] -> {gr}[{self._bracket(r)}] [receive] via NET/{net}/{dev}{gdr}")
        return out
