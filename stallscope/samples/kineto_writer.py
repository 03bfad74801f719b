"""Write one rank's simulated timeline as a PyTorch profiler (Kineto) trace.

Three layouts, each copied field by field from a real trace in ``../shared/traces``
(see :mod:`stallscope.samples.versions` for what differs):

``kineto_2022``  like ``hta/trace_diff/control/control.json.gz`` (torch 1.12/1.13)
``kineto_2024``  like ``hta/nccl_parser_config/nccl_data.json.gz`` (torch 2.3/2.4)
``kineto_2025``  top-level keys like ``cpu_gloo/rank0.pt.trace.json.gz`` (torch 2.6+), plus GPU
                 activities, ``Seq``/``Rank`` in the collective metadata and record_shapes args

Clocks: every timestamp is the rank's host clock, ``true + offset(host) + drift(host) × (true −
t_ref)``. Float variants write ``ts`` in µs relative to ``baseTimeNanoseconds`` with ns
resolution (``"123.456"``, as Kineto's ``fmtTs``), where the base is the start of the current
7889238-second interval (Kineto's ``ChromeTraceBaseTime``); the 2022 variant writes integer µs
since the Unix epoch.

The text is produced with string templates rather than a JSON library: this is the hot path of
suite generation, and it keeps the key order Kineto uses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from stallscope.samples import kernels as K
from stallscope.samples.model import Job
from stallscope.samples.physics import Coll, RankRecord
from stallscope.samples.schedule import AUTOGRAD, CollSpec
from stallscope.samples.versions import NcclVersion

TRIMONTH_S = 7889238  #: Kineto's base-time interval


@dataclass
class Clock:
    """A host's clock: ``trace = true + offset + drift_ppm × (true − ref) / 1e6`` (ns)."""

    offset_ns: int
    drift_ppm: float  #: µs per second
    ref_ns: int

    def __call__(self, t: int) -> int:
        if self.drift_ppm:
            return t + self.offset_ns + int(self.drift_ppm * (t - self.ref_ns) / 1e6)
        return t + self.offset_ns


def kineto_base_ns(wall_ns: int) -> int:
    """``baseTimeNanoseconds``: start of the 7889238 s interval containing ``wall_ns``."""
    s = wall_ns // 1_000_000_000
    return (s // TRIMONTH_S) * TRIMONTH_S * 1_000_000_000


_QUOTED: dict[str, str] = {}


def _q(s: str) -> str:
    """JSON string literal (cached: the same few hundred names repeat millions of times)."""
    got = _QUOTED.get(s)
    if got is None:
        got = _QUOTED[s] = json.dumps(s)
    return got


_DTYPE_TYPE = {"BFloat16": "c10::BFloat16", "Float": "float", "Half": "c10::Half", "Long": "long int", "Byte": "unsigned char"}


def ranks_text(ranks: tuple[int, ...] | list[int], truncate: bool = True) -> str:
    """``Process Group Ranks`` as PyTorch formats it: ``"[0, 1, 2]"``, cut after 30 ranks.

    >>> ranks_text(range(3))
    '[0, 1, 2]'
    >>> ranks_text(range(40)).endswith('29, ...]')
    True
    """
    ranks = list(ranks)
    if truncate and len(ranks) > 30:
        return "[" + ", ".join(str(r) for r in ranks[:30]) + ", ...]"
    return "[" + ", ".join(str(r) for r in ranks) + "]"


def rank_start_stride(ranks: tuple[int, ...]) -> tuple[int, int]:
    if len(ranks) < 2:
        return (ranks[0] if ranks else 0, 1)
    d = ranks[1] - ranks[0]
    if all(ranks[i + 1] - ranks[i] == d for i in range(len(ranks) - 1)):
        return ranks[0], d
    return 0, -1


class TraceWriter:
    """Formats one rank's events for one variant."""

    def __init__(self, job: Job, rank: int, rec: RankRecord, *, variant: str, nccl: NcclVersion, clock: Clock,
                 base_ns: int, wall_label: str, trace_name: str, with_metadata: bool, with_seq: bool, trace_id: str,
                 step_offset: int, trace_start: int, trace_end: int):
        self.job, self.rank, self.rec = job, rank, rec
        self.variant = variant
        self.nccl = nccl
        self.clock = clock
        self.base = base_ns
        self.wall_label = wall_label
        self.trace_name = trace_name
        self.meta = with_metadata and variant != "kineto_2022"
        self.seq = with_seq and self.meta
        self.trace_id = trace_id
        self.step_offset, self.trace_start, self.trace_end = step_offset, trace_start, trace_end
        self._seq_by_corr: dict[int, int] = {}
        r = job.ranks[rank]
        self.pid = r.pid
        self.dev = r.local
        self.tids = (r.pid, r.autograd_tid)
        self.float_ts = variant != "kineto_2022"
        self.ts: Callable[[int], str] = self._ts_float if self.float_ts else self._ts_int
        self.dur: Callable[[int], str] = self._dur_float if self.float_ts else self._dur_int

    # -- number formatting -----------------------------------------------------------------
    def _ts_float(self, t: int) -> str:
        v = self.clock(t) - self.base
        return f"{v // 1000}.{v % 1000:03d}"

    def _dur_float(self, d: int) -> str:
        return f"{d // 1000}.{d % 1000:03d}"

    def _ts_int(self, t: int) -> str:
        return str(self.clock(t) // 1000)

    def _dur_int(self, d: int) -> str:
        return str(max(0, (d + 500) // 1000))

    # -- args --------------------------------------------------------------------------------
    def _cpu_args(self, ext: int, idx: int, args: Any, thread: int, extra: str = "") -> str:
        v = self.variant
        if v == "kineto_2022":
            s = f'"Trace name": "PyTorch Profiler", "Trace iteration": 0, "External id": {ext}, "Profiler Event Index": {idx}'
            if isinstance(args, dict) and "dims" in args:
                s += f', "Input Dims": {args["dims"]}, "Input type": ["c10::BFloat16", "c10::BFloat16"]'
            if isinstance(args, dict) and "seq" in args:
                s += f', "Fwd thread id": {1 if "bwd" in args else 0}, "Sequence number": {args["seq"]}'
            return s + ', "Module Hierarchy": "", "Call stack": ""'
        s = f'"External id": {ext}, "Record function id": {ext}' + extra
        if isinstance(args, dict) and "seq" in args:
            s += f', "Sequence number": {args["seq"]}, "Fwd thread id": {1 if "bwd" in args else 0}'
        if v == "kineto_2025" and isinstance(args, dict) and "dims" in args:
            dims = args["dims"]
            n = dims.count("[") - 1
            s += (f', "Concrete Inputs": [{", ".join(chr(34) * 2 for _ in range(n))}], "Input type": [{", ".join(chr(34) + "c10::BFloat16" + chr(34) for _ in range(n))}]'
                  f', "Input Strides": {dims.replace("8, 2048, 4096", "8388608, 4096, 1")}, "Input Dims": {dims}')
        return s + f', "Ev Idx": {idx}'

    def _comm_args(self, cs: CollSpec, gname: str, seq: int, rpc: bool) -> str:
        """Collective metadata (record_param_comms, or the NCCL kernel when ``rpc`` is False)."""
        g = self.job.groups[gname]
        pg = self.job.groups[g.parent] if g.parent else g
        ranks = ranks_text(pg.ranks)
        if rpc:
            start, stride = rank_start_stride(pg.ranks)
            s = (f'"Process Group Name": {_q(pg.name)}, "Global rank stride": {stride}, "Out msg nelems": {cs.out_nelems}, '
                 f'"Process Group Ranks": "{ranks}", "Group size": {pg.size}, "Global rank start": {start}, '
                 f'"In msg nelems": {cs.in_nelems}, "In split size": "[]", "Out split size": "[]", "dtype": "{cs.dtype}", '
                 f'"Process Group Description": {_q(pg.desc)}, "Collective name": "{cs.cname}"')
            if self.seq:
                s += f', "Rank": {self.rank}, "Seq": {seq}'
                if cs.op == "send":
                    s += f', "Dst Rank": {cs.peer}'
                elif cs.op == "recv":
                    s += f', "Src Rank": {cs.peer}'
            return s
        s = (f'"Collective name": "{cs.cname}", "In msg nelems": {cs.in_nelems}, "Out msg nelems": {cs.out_nelems}, '
             f'"Group size": {pg.size}, "dtype": "{cs.dtype}", "In split size": "[]", "Out split size": "[]", '
             f'"Process Group Name": {_q(pg.name)}, "Process Group Description": {_q(pg.desc)}, "Process Group Ranks": "{ranks}"')
        if self.seq:
            s += f', "Seq": {seq}'
        return s

    # -- the file ----------------------------------------------------------------------------
    def events(self) -> list[str]:
        rec, pid, dev = self.rec, self.pid, self.dev
        ts, dur = self.ts, self.dur
        out: list[str] = []
        a = out.append
        tids = self.tids
        old = self.variant == "kineto_2022"
        # collective metadata by the External id of record_param_comms
        coll_by_ext: dict[int, tuple[Coll, int]] = {ext: (c, sq) for c, sq, ext, _corr, _k in rec.colls}
        self._seq_by_corr = {corr: sq for _c, sq, _ext, corr, _k in rec.colls}
        cpu = sorted(rec.cpu, key=lambda e: (e[3], -e[4]))
        for idx, (cat, name, thread, t0, t1, ext, args) in enumerate(cpu):
            tid = tids[thread]
            if isinstance(args, dict) and "coll" in args:
                cs: CollSpec = args["coll"]
                c_sq = coll_by_ext.get(ext)
                extra = ", " + self._comm_args(cs, args["group"], c_sq[1], True) if self.meta and c_sq is not None else ""
                body = self._cpu_args(ext, idx, None, thread, extra)
                a(f'{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": {pid}, "tid": {tid}, "ts": {ts(t0)}, "dur": {dur(t1 - t0)}, "args": {{{body}}}}}')
                continue
            body = self._cpu_args(ext, idx, args, thread)
            a(f'{{"ph": "X", "cat": "{cat}", "name": {_q(name)}, "pid": {pid}, "tid": {tid}, "ts": {ts(t0)}, "dur": {dur(t1 - t0)}, "args": {{{body}}}}}')
        # autograd links: forward op (seq n) -> backward evaluate_function (seq n), per step
        if not old:
            fwd_at: dict[int, tuple[int, int]] = {}
            fid = 0
            for cat, name, thread, t0, t1, ext, args in cpu:
                if not isinstance(args, dict) or "seq" not in args:
                    continue
                if "bwd" not in args:
                    fwd_at[args["seq"]] = (thread, t0)
                elif name.startswith("autograd::engine") and args["seq"] in fwd_at:
                    fth, fts = fwd_at.pop(args["seq"])
                    fid += 1
                    a(f'{{"ph": "s", "id": {fid}, "pid": {pid}, "tid": {tids[fth]}, "ts": {ts(fts)}, "cat": "fwdbwd", "name": "fwdbwd"}}')
                    a(f'{{"ph": "f", "id": {fid}, "pid": {pid}, "tid": {tids[thread]}, "ts": {ts(t0)}, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"}}')
        # ProfilerStep spans on the main thread
        steps = rec.steps
        for i, (n, t0, sext) in enumerate(steps):
            t1 = steps[i + 1][1] if i + 1 < len(steps) else rec.end
            label = self.step_label(n)
            if old:
                body = f'"Trace name": "PyTorch Profiler", "Trace iteration": 0, "External id": {sext}, "Profiler Event Index": {len(cpu) + i}, "Module Hierarchy": "", "Call stack": ""'
            else:
                body = f'"External id": {sext}, "Record function id": {sext}, "Ev Idx": {len(cpu) + i}'
            a(f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{label}", "pid": {pid}, "tid": {tids[0]}, "ts": {ts(t0)}, "dur": {dur(t1 - t0)}, "args": {{{body}}}}}')
        # runtime calls, GPU activities and their flows
        fcat, fname = ("async_cpu_to_gpu", "async_gpu") if old else ("ac2g", "ac2g")
        sbp = ', "bp": "e"' if old else ""
        launch_of: dict[int, tuple[int, int]] = {}
        for name, cat, thread, t0, d, corr, ext, cbid in rec.runtime:
            tid = tids[thread]
            a(f'{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": {pid}, "tid": {tid}, "ts": {ts(t0)}, "dur": {dur(d)}, "args": {{"External id": {ext}, "cbid": {cbid}, "correlation": {corr}}}}}')
            launch_of[corr] = (thread, t0)
        for name, stream, t0, d, corr, ext, kind, info in rec.gpu:
            if kind == "nccl":
                c, cs_own = info  # the instance (shared timing) and this member's own call
                d = c.ends[self.rank] - t0
                name, body = self._nccl_kernel(c, cs_own, corr, ext, stream)
            elif kind == "memcpy":
                bw = info / max(d, 1)
                body = f'"External id": {ext}, "device": {dev}, "context": 1, "stream": {stream}, "correlation": {corr}, "bytes": {info}, "memory bandwidth (GB/s)": {bw:.6g}'
                a(f'{{"ph": "X", "cat": "gpu_memcpy", "name": "{name}", "pid": {dev}, "tid": {stream}, "ts": {ts(t0)}, "dur": {dur(d)}, "args": {{{body}}}}}')
                self._flow(a, corr, fcat, fname, sbp, launch_of, dev, stream, t0)
                continue
            else:
                gx, bx, regs, smem, bps, wps, occ = info
                body = (f'"External id": {ext}, "queued": 0, "device": {dev}, "context": 1, "stream": {stream}, "correlation": {corr}, '
                        f'"registers per thread": {regs}, "shared memory": {smem}, "blocks per SM": {bps}, "warps per SM": {wps}, '
                        f'"grid": [{gx}, 1, 1], "block": [{bx}, 1, 1], "est. achieved occupancy %": {occ}')
            a(f'{{"ph": "X", "cat": "kernel", "name": {_q(name)}, "pid": {dev}, "tid": {stream}, "ts": {ts(t0)}, "dur": {dur(d)}, "args": {{{body}}}}}')
            self._flow(a, corr, fcat, fname, sbp, launch_of, dev, stream, t0)
        out.extend(self._metadata())
        return out

    def _flow(self, a: Callable[[str], None], corr: int, fcat: str, fname: str, sbp: str,
              launch_of: dict[int, tuple[int, int]], dev: int, stream: int, t0: int) -> None:
        lt = launch_of.get(corr)
        if lt is None:
            return
        a(f'{{"ph": "s", "id": {corr}, "pid": {self.pid}, "tid": {self.tids[lt[0]]}, "ts": {self.ts(lt[1])}, "cat": "{fcat}", "name": "{fname}"{sbp}}}')
        a(f'{{"ph": "f", "id": {corr}, "pid": {dev}, "tid": {stream}, "ts": {self.ts(t0)}, "cat": "{fcat}", "name": "{fname}", "bp": "e"}}')

    def _nccl_kernel(self, c: Coll, cs: CollSpec, corr: int, ext: int, stream: int) -> tuple[str, str]:
        inter = len({self.job.ranks[r].host for r in c.group.ranks}) > 1
        algo, proto = K.nccl_algo_proto(cs.op, cs.nbytes, inter, c.n)
        name = K.nccl_kernel_name(self.nccl, cs.op, cs.dtype, algo, proto)
        nch = max(2, min(32, int(c.bw // 12) * 2)) if cs.op not in ("send", "recv") else 8
        block = 640 if proto == "SIMPLE" else (544 if cs.op == "allreduce" else 512)
        smem = 42024 if proto == "SIMPLE" else 87568
        sms = self.job.gpu.sms
        body = (f'"External id": {ext}, "queued": 0, "device": {self.dev}, "context": 1, "stream": {stream}, "correlation": {corr}, '
                f'"registers per thread": 96, "shared memory": {smem}, "blocks per SM": {nch / sms:.6f}, '
                f'"warps per SM": {nch * block / 32 / sms:.6f}, "grid": [{nch}, 1, 1], "block": [{block}, 1, 1], "est. achieved occupancy %": 0')
        if self.meta:
            body += ", " + self._comm_args(cs, c.group.name, self._seq_by_corr.get(corr, 0), False)
        return name, body

    def step_label(self, n: int) -> int:
        return self.step_offset + n

    def _metadata(self) -> list[str]:
        pid, G = self.pid, self.job.gpus_per_node
        t_meta = self.ts(self.trace_start + 30_000)
        new = self.variant == "kineto_2025"
        proc = "python3.11" if new else ("python3.8" if self.variant == "kineto_2022" else "python3.10")

        def m(name: str, p: Any, tid: Any, args: str, t: str = t_meta) -> str:
            pq = p if isinstance(p, int) else f'"{p}"'
            if new:
                return f'{{"ph": "M", "name": "{name}", "ts": {t}, "pid": {pq}, "tid": {tid}, "args": {{{args}}}}}'
            return f'{{"name": "{name}", "ph": "M", "ts": {t}, "pid": {pq}, "tid": {tid}, "args": {{{args}}}}}'

        out = [m("process_name", pid, 0, f'"name": "{proc}"'), m("process_labels", pid, 0, '"labels": "CPU"'),
               m("process_sort_index", pid, 0, f'"sort_index": {pid}')]
        for d in range(G):
            out += [m("process_name", d, 0, f'"name": "{proc}"'), m("process_labels", d, 0, f'"labels": "GPU {d}"'),
                    m("process_sort_index", d, 0, f'"sort_index": {16777216 + d}')]
        streams = sorted({g[1] for g in self.rec.gpu})
        for s in streams:
            out += [m("thread_name", self.dev, s, f'"name": "stream {s} "'), m("thread_sort_index", self.dev, s, f'"sort_index": {s}')]
        main, ag = self.tids
        main_label = "python3.8" if self.variant == "kineto_2022" else "pt_main_thread"
        ag_label = "python3.8" if self.variant == "kineto_2022" else f"pt_autograd_{self.dev}"
        out += [m("thread_name", pid, ag, f'"name": "thread {ag} ({ag_label})"'), m("thread_sort_index", pid, ag, f'"sort_index": {ag}'),
                m("thread_name", pid, main, f'"name": "thread {main} ({main_label})"'), m("thread_sort_index", pid, main, f'"sort_index": {main}')]
        t_start = self.ts(self.trace_start)
        t_end = self.ts(self.trace_end)
        out.append(m("process_sort_index", "Spans", 0, '"sort_index": 536870912', t_start))
        span = self.dur(self.trace_end - self.trace_start)
        if new:
            out.append(f'{{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": {t_start}, "dur": {span}, "args": {{"Op count": 0}}}}')
            out.append(f'{{"ph": "i", "s": "g", "name": "Iteration Start: PyTorch Profiler", "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": {t_start}}}')
            out.append(f'{{"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": {t_end}}}')
        else:
            out.append(f'{{"ph": "X", "cat": "Trace", "ts": {t_start}, "dur": {span}, "pid": "Spans", "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {{"Op count": 0}}}}')
            out.append(f'{{"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": {t_start}}}')
            out.append(f'{{"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": {t_end}}}')
        return out

    # -- header and trailer ------------------------------------------------------------------
    def document(self, events: list[str]) -> str:
        job = self.job
        props = ",\n    ".join(json.dumps(job.gpu.properties(d)) for d in range(job.gpus_per_node))
        v = self.variant
        di: dict[str, Any] = {"backend": "nccl", "rank": self.rank, "world_size": job.world}
        if v != "kineto_2022":
            pgs = [g for g in job.groups.values() if g.kind != "p2p" and (self.rank in g.ranks or g.name == "0")]
            di["pg_count"] = len(pgs)
            di["pg_config"] = [{"pg_name": g.name, "pg_desc": g.desc, "backend_config": "cuda:nccl", "pg_size": g.size,
                                "ranks": list(g.ranks)} for g in pgs]
            di["nccl_version"] = self.nccl.text
        body = ",\n  ".join(events)
        head = ['"schemaVersion": 1', f'"deviceProperties": [\n    {props}\n  ]']
        if v == "kineto_2025":
            cuda = self.nccl.cuda.replace(".", "")
            cu = int(cuda[:2]) * 1000 + int(cuda[2:] or 0) * 10
            head += [f'"cupti_version": {24 if cu >= 12040 else 18}', f'"cuda_runtime_version": {cu}', f'"cuda_driver_version": {cu}',
                     f'"trace_id": "{self.trace_id}"', '"record_shapes": 1', f'"distributedInfo": {json.dumps(di)}',
                     f'"host_name": "{job.host_of(self.rank).name}"', '"displayTimeUnit": "ms"',
                     f'"baseTimeNanoseconds": {self.base}']
            tail = [f'"traceName": "{self.trace_name}"']
        elif v == "kineto_2024":
            head += [f'"distributedInfo": {json.dumps(di)}']
            tail = [f'"INFO": {json.dumps(self._kineto_info())}', f'"traceName": "{self.trace_name}"', '"displayTimeUnit": "ms"',
                    f'"baseTimeNanoseconds": {self.base}']
        else:
            head += [f'"distributedInfo": {json.dumps(di)}']
            tail = []
        text = "{\n  " + ",\n  ".join(head) + ',\n  "traceEvents": [\n  ' + body + "\n]"
        if tail:
            text += ",\n  " + ",\n  ".join(tail)
        return text + "\n}\n"

    def _kineto_info(self) -> list[str]:
        p = self.pid
        w = self.wall_label
        return [f"INFO:{w} {p}:{p} CuptiActivityProfiler.cpp:976] Enabling GPU tracing",
                f"INFO:{w} {p}:{p} CuptiActivityProfiler.cpp:906] Evaluating whether to run child profiler = NcclProfiler",
                f"INFO:{w} {p}:{p} CuptiActivityProfiler.cpp:1030] Tracing starting in 0s",
                f"INFO:{w} {p}:{p} CuptiActivityProfiler.cpp:266] Processing 1 CPU buffers",
                f"INFO:{w} {p}:{p} CuptiActivityProfiler.cpp:297] Processed {len(self.rec.gpu) * 3} GPU records ({len(self.rec.gpu) * 112} bytes)",
                f"INFO:{w} {p}:{p} CuptiActivityProfiler.cpp:1217] Traces Recorded:",
                f"INFO:{w} {p}:{p} CuptiActivityProfiler.cpp:1220] PyTorch Profiler: 1 iterations"]
