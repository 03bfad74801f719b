"""Generate one bundle with its ground truth, or a whole suite.

``generate()`` is the whole pipeline for one bundle:

1. resolve the knobs from the seed (:func:`~stallscope.samples.scenarios.resolve_knobs`);
2. draw the machines and process groups (:mod:`.model`) and the model sizes (:mod:`.schedule`);
3. run the healthy schedule once to learn the nominal step time, then draw the fault(s) at the
   requested severity and re-run; if the time the fault cost falls outside the severity's band,
   rescale its magnitude and run again (at most a few times; never when ``magnitude`` is given);
4. for each fault, re-run without it: that what-if is the fault's ``lost_time_fraction``;
5. write one Kineto trace per rank and (per the ``logs`` knob) the NCCL logs, pack them, and
   write ``truth.json`` beside the bundle.

Every random draw comes from ``numpy.random.default_rng([seed, tag])`` streams, so a seed always
gives the same bytes.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from stallscope.errors import UsageError
from stallscope.samples import bundle as B
from stallscope.samples import faults as F
from stallscope.samples.kineto_writer import Clock, TraceWriter, kineto_base_ns
from stallscope.samples.markers import is_step_mark
from stallscope.samples.model import Job, build_job
from stallscope.samples.nccl_writer import LogOptions, NcclLogWriter
from stallscope.samples.physics import SimResult, simulate
from stallscope.samples.scenarios import RANK_LEVEL, SCENARIOS, Ctx, Knobs, resolve_knobs
from stallscope.samples.schedule import ModelSpec, build_programs, build_spec, expected_counts
from stallscope.samples.truth import GroundTruth
from stallscope.samples.versions import version
from stallscope.samples.windows import split_windows

#: lost-time bands per severity: the calibration aims inside them
BANDS = {"subtle": (0.015, 0.09), "moderate": (0.08, 0.35), "severe": (0.3, 0.85)}
#: faults whose physics has no magnitude to turn (shared memory is as fast as it is)
_FIXED = (F.P2PDisabled,)


class _Run:
    """One job and its schedule, simulated with any subset of faults."""

    def __init__(self, job: Job, spec: ModelSpec, steps: int, seed: int, t0: int, nccl_launch: tuple[str, str, int]):
        self.job, self.spec, self.steps, self.seed, self.t0 = job, spec, steps, seed, t0
        self.launch = nccl_launch
        self.cache: dict[tuple, list[tuple]] = {}

    def sim(self, faults: list[F.Fault], *, record: bool) -> tuple[SimResult, F.Effects]:
        eff = F.effects_for(self.job, self.steps, faults)
        progs = build_programs(self.job, self.spec, eff, steps=self.steps, seed=self.seed, cache=self.cache)
        res = simulate(self.job, progs, eff, seed=self.seed, t0=self.t0, noise=self.spec.noise, record=record,
                       nccl_launch=self.launch)
        return res, eff


def _lost(with_: SimResult, without: SimResult) -> float:
    return max(0.0, 1.0 - without.makespan() / with_.makespan())


def _scaled(f: F.Fault, k: float) -> F.Fault:
    """The same fault with its magnitude multiplied by ``k`` (in its natural unit)."""
    g = copy.deepcopy(f)
    if isinstance(g, F.ComputeStraggler):
        g.slowdown = float(min(3.0, max(0.005, g.slowdown * k)))
        g.magnitude = g.slowdown
    elif isinstance(g, (F.HostStall, F.Jitter)):
        g.delays = {r: (d * k).astype(np.int64) for r, d in g.delays.items()}
        g.magnitude = f.magnitude * k
    elif isinstance(g, F.DegradedNic):
        # lost time grows with 1/factor - 1
        g.factor = float(min(0.97, max(0.03, 1.0 / (1.0 + (1.0 / g.factor - 1.0) * k))))
        g.magnitude = 1.0 - g.factor
    elif isinstance(g, F.SocketFallback):
        # lost time grows with 1/bandwidth; sockets deliver 0.8-20 GB/s per host
        g.socket_bw = float(min(20.0, max(0.8, g.socket_bw / k)))
        g.magnitude = g.socket_bw
    elif isinstance(g, F.CrossSocketNic):
        g.cpu_factor = float(max(1.05, 1.0 + (g.cpu_factor - 1.0) * k))
        g.bw_factor = float(min(0.95, max(0.05, 1.0 / (1.0 + (1.0 / g.bw_factor - 1.0) * k))))
        g.magnitude = g.cpu_factor - 1.0
    return g


def _calibrate(run: _Run, fault: F.Fault, others: list[F.Fault], severity: str, baseline: SimResult) -> tuple[F.Fault, SimResult]:
    """Rescale ``fault`` until the time it costs (against ``baseline``, which has ``others``)
    falls in the severity band. Returns the fault and the run with it and ``others``."""
    lo, hi = BANDS[severity]
    mid = (lo * hi) ** 0.5
    res, _ = run.sim(others + [fault], record=False)
    if isinstance(fault, _FIXED):
        return fault, res
    for _ in range(4):
        lost = _lost(res, baseline)
        if lo <= lost <= hi:
            break
        k = mid / max(lost, 0.004)
        k = float(min(6.0, max(0.25, k)))
        fault = _scaled(fault, k)
        res, _ = run.sim(others + [fault], record=False)
    return fault, res


def _t0(rng: np.random.Generator) -> int:
    """A wall-clock start between 2024-02 and 2025-10, away from a Kineto base-time boundary."""
    s = 1_706_745_600 + int(rng.integers(0, 600 * 86400))
    pos = s % 7_889_238
    if pos < 3 * 86400 or pos > 7_889_238 - 3 * 86400:
        s += 7 * 86400
    return s * 1_000_000_000 + int(rng.integers(0, 1_000_000_000))


def _fmt_wall(ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ns // 1_000_000_000))


def generate(scenario: str, *, out: str | Path, seed: int, name: str | None = None, **knobs: Any) -> GroundTruth:
    """Write one bundle and its ``truth.json`` under ``out/<name>/``; return the ground truth.

    ``knobs`` are the fields of :class:`~stallscope.samples.scenarios.Knobs` (anything left out
    is drawn from ``seed``). Raises :class:`~stallscope.errors.UsageError` for unknown knobs,
    scenarios or values.
    """
    bad = [k for k in knobs if k not in Knobs.names()]
    if bad:
        raise UsageError(f"unknown knob(s): {', '.join(bad)}; known: {', '.join(Knobs.names())}")
    k = resolve_knobs(scenario, Knobs(**knobs), np.random.default_rng([seed, 1]))
    if k.drop is None:  # its own stream: the other knobs of a seed stay what they were before it existed
        k.drop = 1 if np.random.default_rng([seed, 13]).random() < 0.05 else 0
    if k.windows is None:  # the same
        k.windows = 1 if np.random.default_rng([seed, 15]).random() < 0.05 else 0
    if k.step_marks is None:  # the same; profiling windows are cut at the marks, so they keep them
        k.step_marks = bool(k.windows) or not np.random.default_rng([seed, 17]).random() < 0.05
    elif not k.step_marks and k.windows:
        raise UsageError("step_marks=false cannot go with windows=1: profiling windows are cut at the step marks")
    name = name or f"{scenario}-s{seed}"
    dest = Path(out) / name
    if k.nodes is None or k.nodes < 1 or k.gpus not in (1, 2, 4, 8):
        raise UsageError(f"nodes must be >= 1 and gpus one of 1, 2, 4, 8 (got {k.nodes}, {k.gpus})")
    steps = int(k.steps)  # type: ignore[arg-type]
    if steps < 1:
        raise UsageError("steps must be >= 1")

    jrng = np.random.default_rng([seed, 2])
    job = build_job(rng=jrng, seed=seed, nodes=int(k.nodes), gpus_per_node=int(k.gpus), parallelism=str(k.parallelism),
                    gpu=k.gpu, network=k.network, hashed_group_names=bool(jrng.random() < 0.3))
    imbalance = 0.35 if scenario == "healthy_imbalanced" else 0.0
    spec = build_spec(job, np.random.default_rng([seed, 3]), detail=str(k.detail), noise=str(k.noise), step_ms=k.step_ms,
                      imbalance=imbalance)
    v = version(str(k.nccl_version))
    trng = np.random.default_rng([seed, 5])
    t0 = _t0(trng)
    run = _Run(job, spec, steps, seed, t0, v.launch)
    baseline, _ = run.sim([], record=False)
    step_ns = float(np.median(baseline.step_times()))

    frng = np.random.default_rng([seed, 4])
    faults: list[F.Fault]
    secondary_fault: F.Fault | None = None
    if scenario == "two_faults":
        sev_p = "severe" if k.severity == "subtle" else str(k.severity)
        primary = _draw(str(k.primary), job, steps, sev_p, None, frng, step_ns, k, k.culprit_rank, k.culprit_host)
        # where the secondary acts: on the primary's culprit when both are about late ranks
        # (so its cost adds up), else on another host
        if k.secondary in RANK_LEVEL and SCENARIOS[str(k.primary)].cause in ("synchronization", "locality"):
            c_host = int(k.culprit_host or 0)
            c_rank = int(k.culprit_rank or 0) if SCENARIOS[str(k.primary)].cause == "synchronization" else \
                int(c_host * job.gpus_per_node + frng.integers(0, job.gpus_per_node))
        else:
            c_host = (int(k.culprit_host) + 1) % job.n_nodes if job.n_nodes > 1 else int(k.culprit_host)  # type: ignore[arg-type]
            c_rank = int(c_host * job.gpus_per_node + frng.integers(0, job.gpus_per_node))
        secondary = _draw(str(k.secondary), job, steps, "subtle", None, frng, step_ns, k, c_rank, c_host)
        pf, sf = primary[0], secondary[0]
        if k.magnitude is None:
            pf, _ = _calibrate(run, pf, [], sev_p, baseline)
            sf, _ = _calibrate(run, sf, [], "subtle", baseline)
        faults = [pf, sf]
        for _ in range(6):
            full, _ = run.sim(faults, record=False)
            lp = _lost(full, run.sim([faults[1]], record=False)[0])
            ls = _lost(full, run.sim([faults[0]], record=False)[0])
            if lp >= 2 * ls and lp > 0 and (ls >= 0.005 or isinstance(faults[1], _FIXED)):
                break
            if lp < 2 * ls:
                if isinstance(faults[1], _FIXED):
                    faults[0] = _scaled(faults[0], 1.6)
                else:
                    faults[1] = _scaled(faults[1], 0.5)
            else:  # the secondary costs nothing measurable: make it bigger
                faults[1] = _scaled(faults[1], 2.0)
        secondary_fault = faults[1]
    else:
        faults = SCENARIOS[scenario].make(Ctx(job=job, steps=steps, severity=str(k.severity), magnitude=k.magnitude,
                                              rng=frng, step_ns=step_ns, knobs=k, culprit_rank=int(k.culprit_rank),  # type: ignore[arg-type]
                                              culprit_host=int(k.culprit_host)))  # type: ignore[arg-type]
        if faults and SCENARIOS[scenario].cause != "none" and k.magnitude is None:
            faults[0], _ = _calibrate(run, faults[0], [], str(k.severity), baseline)
        if scenario == "healthy_imbalanced" and faults:
            # the extra host work must stay hidden: shrink it until it costs nothing
            for _ in range(5):
                res, _ = run.sim(faults, record=False)
                if _lost(res, baseline) < 0.004:
                    break
                faults = [_shrink_hidden(faults[0])]

    final, eff = run.sim(faults, record=True)
    lost_each: list[float] = []
    without: list[SimResult] = []
    for i in range(len(faults)):
        rest = faults[:i] + faults[i + 1:]
        wo = baseline if not rest else run.sim(rest, record=False)[0]
        without.append(wo)
        lost_each.append(_lost(final, wo))

    truth = _truth(scenario, name, seed, k, job, spec, v, faults, secondary_fault, lost_each, without, final, eff, baseline)
    files, bundle_info = _write_files(job, spec, final, eff, faults, k, v, seed, t0, truth)
    rel = B.pack(files, dest, str(k.archive))
    bundle_info["path"] = rel
    truth.bundle = bundle_info
    truth.write(dest / "truth.json")
    return truth


def _draw(scenario: str, job: Job, steps: int, severity: str, magnitude: float | None, rng: np.random.Generator,
          step_ns: float, k: Knobs, c_rank: Any, c_host: Any) -> list[F.Fault]:
    sc = SCENARIOS[scenario]
    return sc.make(Ctx(job=job, steps=steps, severity=severity, magnitude=magnitude, rng=rng, step_ns=step_ns, knobs=k,
                       culprit_rank=int(c_rank), culprit_host=int(c_host)))


def _shrink_hidden(f: F.Fault) -> F.Fault:
    g = copy.deepcopy(f)
    if isinstance(g, F.HiddenHostWork) and g.work is not None:
        g.work = (g.work * 0.5).astype(np.int64)
    return g


def _fault_culprits(f: F.Fault, job: Job) -> tuple[list[int], list[str]]:
    if f.cause == "none":
        return [], []
    if f.hosts:
        ranks = sorted(set(f.ranks) | {r for h in f.hosts for r in job.ranks_of_host(h)})
        return ranks, [job.hosts[h].name for h in sorted(f.hosts)]
    hosts = sorted({job.ranks[r].host for r in f.ranks})
    if f.kind == "jitter_amplification":
        return list(range(job.world)), [h.name for h in job.hosts]
    return sorted(f.ranks), [job.hosts[h].name for h in hosts]


def _truth(scenario: str, name: str, seed: int, k: Knobs, job: Job, spec: ModelSpec, v: Any, faults: list[F.Fault],
           secondary: F.Fault | None, lost_each: list[float], without: list[SimResult], final: SimResult,
           eff: F.Effects, baseline: SimResult) -> GroundTruth:
    fdicts = []
    for f, lost in zip(faults, lost_each):
        ranks, hosts = _fault_culprits(f, job)
        fdicts.append(f.plan() | {"culprit_ranks": ranks, "culprit_hosts": hosts, "lost_time_fraction": round(lost, 4)})
    real = [i for i, f in enumerate(faults) if f.cause != "none"]
    if real:
        dom = max(real, key=lambda i: lost_each[i])
        f = faults[dom]
        cause = f.cause
        ranks, hosts = _fault_culprits(f, job)
        lost = lost_each[dom]
        ref = without[dom]
    else:
        dom, cause, ranks, hosts, lost, ref = -1, "none", [], [], 0.0, baseline
    sec = None
    if secondary is not None:
        i = faults.index(secondary)
        sec = fdicts[i] | {"scenario": secondary.kind}
    if scenario == "two_faults" and dom >= 0:
        fdicts[dom]["dominant"] = True
    prs = final.per_rank_step()
    links = final.links  # type: ignore[attr-defined]
    jd = {
        "world_size": job.world, "nodes": job.n_nodes, "gpus_per_node": job.gpus_per_node,
        "hosts": [h.name for h in job.hosts], "rank_host": [job.hosts[r.host].name for r in job.ranks],
        "rank_pid": [r.pid for r in job.ranks], "rank_local": [r.local for r in job.ranks],
        "parallelism": job.parallelism, "tp": job.tp, "pp": job.pp, "microbatches": job.microbatches,
        "gpu": job.gpu.name, "network": {"kind": job.network.kind, "nics_per_host": job.network.nics_per_host,
                                         "per_nic_busbw_gbs": round(job.network.per_nic_busbw, 2),
                                         "link_gbps": job.network.link_gbps},
        "nccl_version": v.full, "torch_variant": k.torch_variant,
        "process_groups": [{"name": g.name, "desc": g.desc, "kind": g.kind, "ranks": list(g.ranks), "parent": g.parent}
                           for g in job.groups.values()],
        "collectives_per_rank_step": {str(r): expected_counts(job, spec, r) for r in range(job.world)},
    }
    plan = {
        "compute_scale": {str(r): [float(x) for x in a] for r, a in eff.compute_scale.items()},
        "host_delay_ns": {str(r): [int(x) for x in a] for r, a in eff.host_delay.items()},
        "host_delay_kind": {str(r): kk for r, kk in eff.host_delay_kind.items()},
        "hidden_host_work_ns": {str(r): [int(x) for x in a] for r, a in eff.hidden_cpu.items()},
        "cpu_scale": {str(r): x for r, x in eff.cpu_scale.items()},
        "inter_bw_factor": {job.hosts[h].name: x for h, x in eff.inter_bw.items()},
        "p2p": {job.hosts[h].name: x for h, x in eff.p2p.items()},
        "gdr": {job.hosts[h].name: x for h, x in eff.gdr.items()},
        "net": eff.net or ("IB" if job.network.kind in ("IB", "RoCE") else job.network.kind),
        "model": spec.plan(),
    }
    physics = {
        "step_time_ms": [round(x / 1e6, 4) for x in final.step_times()],
        "step_time_ms_without_fault": [round(x / 1e6, 4) for x in ref.step_times()],
        "step_time_ms_healthy": [round(x / 1e6, 4) for x in baseline.step_times()],
        "makespan_ms": round(final.makespan() / 1e6, 4),
        "links_gbs": {"intra_nvlink": links.intra, "shm": round(links.shm, 2), "socket": round(links.socket, 2),
                      "inter_per_host": {job.hosts[h].name: round(links.inter_bw(h), 2) for h in range(job.n_nodes)}},
        "per_rank_step": {key: arr.tolist() for key, arr in prs.items()},
        "step_start_true_ns": final.step_start.tolist(),
    }
    return GroundTruth(name=name, scenario=scenario, seed=seed, cause=cause, culprit_ranks=ranks, culprit_hosts=hosts,
                       lost_time_fraction=round(lost, 4), secondary=sec, faults=fdicts, knobs=k.resolved(), job=jd,
                       clock={}, plan=plan, physics=physics, bundle={})


def _write_files(job: Job, spec: ModelSpec, final: SimResult, eff: F.Effects, faults: list[F.Fault], k: Knobs,
                 v: Any, seed: int, t0: int, truth: GroundTruth) -> tuple[dict[str, bytes], dict[str, Any]]:
    rng = np.random.default_rng([seed, 6])
    files: dict[str, bytes] = {}
    # clocks
    max_off = float(k.clock_offset_ms or 0.0) * 1e6
    offsets = [int(x) for x in rng.uniform(-max_off, max_off, job.n_nodes)] if max_off else [0] * job.n_nodes
    drifts = [float(x) for x in rng.uniform(-4.0, 4.0, job.n_nodes)] if k.drift else [0.0] * job.n_nodes
    clocks = [Clock(offsets[h], drifts[h], t0) for h in range(job.n_nodes)]
    base = kineto_base_ns(t0)
    variant = str(k.torch_variant)
    old = variant == "kineto_2022"
    step_offset = int(rng.integers(1, 2000))
    layout = str(rng.choice(["flat", "traces", "per_host"], p=[0.4, 0.4, 0.2]))
    trace_paths: dict[str, str] = {}
    culprits = {r for f in faults for r in _fault_culprits(f, job)[0]}
    pool = [r for r in range(job.world) if r not in culprits]
    cut_ranks = sorted(int(x) for x in rng.choice(pool, min(len(pool), int(k.truncate or 0)), replace=False)) if pool else []
    truncated: dict[str, int] = {}
    # traces lost (a rank that never wrote one, a file not collected); the rank still ran, so its
    # NCCL log is kept. Never a culprit's, unless every rank is one (a job-wide fault)
    lost_pool = [r for r in (pool or range(job.world)) if r not in cut_ranks]
    drng = np.random.default_rng([seed, 14])
    lost = (sorted(int(x) for x in drng.choice(lost_pool, min(len(lost_pool), int(k.drop)), replace=False))
            if k.drop and lost_pool else [])
    for r in range(job.world):
        rec = final.records[r]
        rk = job.ranks[r]
        host = job.hosts[rk.host]
        t_start = rec.steps[0][1] - int(rng.integers(300_000, 2_500_000))
        t_end = rec.end + int(rng.integers(200_000, 1_000_000))
        tw = TraceWriter(job, r, rec, variant=variant, nccl=v, clock=clocks[rk.host], base_ns=base,
                         wall_label=_fmt_wall(clocks[rk.host](t_start)), trace_name=f"/tmp/tmp{_tag(rng, 8)}.json",
                         with_metadata=bool(k.metadata), with_seq=bool(k.seq), trace_id=_tag(rng, 32).upper(),
                         step_offset=step_offset, trace_start=t_start, trace_end=t_end)
        events = tw.events()
        if not k.step_marks:
            # profiled without prof.step(): no ProfilerStep#N marks on any rank, a killed one's
            # cut trace included (steps from the optimizer's annotations)
            events = [e for e in events if not is_step_mark(e)]
        text = tw.document(events).encode()
        if r in cut_ranks:
            # a killed job: the file ends mid-event somewhere in the last third
            cut = int(len(text) * float(rng.uniform(0.67, 0.95)))
            text = text[:cut]
            truncated[str(r)] = cut
        wall = clocks[rk.host](t_end) + int(rng.integers(50_000_000, 900_000_000))
        path = B.trace_path(str(k.naming), rank=r, host=host.name, pid=rk.pid, wall_ns=wall, gz=bool(k.gzip), old=old,
                            rng=rng, layout=layout)
        if r in lost:
            continue  # after every draw of the rank: the other ranks' files are as without the loss
        files[path] = B.write_gz(text) if k.gzip else text
        trace_paths[str(r)] = path
    # profiling windows (schedule repeat): every complete trace in two files, one step recorded in
    # neither; the step left out is one no fault delays, so every fault still shows in the bundle
    windows = None
    if k.windows:
        delayed = {i for f in faults for d in getattr(f, "delays", {}).values() for i, x in enumerate(d) if x}
        free = [i for i in range(2, len(final.records[0].steps) - 1) if i not in delayed]
        if free:
            files, n_split = split_windows(files, first=free[0], skip=1)
            windows = {"first_steps": free[0], "skipped_steps": 1, "traces_split": n_split}
    # NCCL logs
    log_hosts: list[int] = []
    if k.logs == "all":
        log_hosts = list(range(job.n_nodes))
    elif k.logs == "some":
        n = int(rng.integers(1, job.n_nodes)) if job.n_nodes > 1 else 1
        log_hosts = sorted(int(x) for x in rng.choice(job.n_nodes, n, replace=False))
    log_paths: dict[str, list[str]] = {}
    if log_hosts:
        host_hints: dict[int, list[str]] = {}
        job_hints: list[str] = []
        for f in faults:
            for h, hs in f.log_hints.items():
                host_hints.setdefault(h, []).extend(hs)
            job_hints.extend(f.job_hints)
        opts = _log_options(job, k, v, rng)
        lw = NcclLogWriter(job, eff, v, opts, np.random.default_rng([seed, 7]), host_hints, job_hints)
        prefix = str(rng.choice(["", "nccl_logs/", "logs/"]))
        for h in log_hosts:
            ranks = job.ranks_of_host(h)
            per = {r: lw.process_lines(r) for r in ranks}
            host = job.hosts[h]
            if k.log_style == "torchrun":
                lines = _interleave(per, job, rng)
                path = f"{prefix}{host.name}.log" if prefix else f"{host.name}-stdout.txt"
                files[path] = ("\n".join(lines) + "\n").encode()
                log_paths[host.name] = [path]
            else:
                log_paths[host.name] = []
                for r in ranks:
                    path = f"{prefix}{host.name}.{job.ranks[r].pid}"
                    files[path] = ("\n".join(per[r]) + "\n").encode()
                    log_paths[host.name].append(path)
    truth.clock = {
        "convention": "trace_ns = true_ns + offset_ns + drift_ppm * (true_ns - ref_ns) / 1e6, where trace_ns is "
                      "baseTimeNanoseconds + ts * 1000 (float-ts variants) or ts * 1000 (kineto_2022, integer µs since the epoch)",
        "ref_ns": t0, "base_time_ns": None if old else base,
        "offset_ns": {job.hosts[h].name: offsets[h] for h in range(job.n_nodes)},
        "drift_ppm": {job.hosts[h].name: drifts[h] for h in range(job.n_nodes)},
        "step_number_offset": step_offset,
    }
    truth.job["steps"] = [step_offset + s for s in range(len(final.records[0].steps))]
    info = {"format": k.archive, "gzip": k.gzip, "naming": k.naming, "layout": layout, "traces": trace_paths,
            "logs": k.logs, "log_style": k.log_style if log_hosts else None,
            "log_hosts": [job.hosts[h].name for h in log_hosts], "nccl_logs": log_paths,
            "truncated_traces": truncated, "missing_traces": lost, "profiling_windows": windows,
            "host_recoverable_from": _host_sources(k, bool(log_hosts))}
    ev = [_evidence(f, job, k, set(log_hosts)) for f in faults]
    for fd, e in zip(truth.faults, ev):
        fd["evidence"] = e
    dom = [i for i, f in enumerate(truth.faults) if f.get("dominant")] or [
        max(range(len(faults)), key=lambda i: truth.faults[i]["lost_time_fraction"])] if faults and truth.cause != "none" else []
    truth.evidence = ev[dom[0]] if dom else {"cause": [], "culprits": []}
    return files, info


def _evidence(f: F.Fault, job: Job, k: Knobs, log_hosts: set[int]) -> dict[str, list[str]]:
    """Where the fault can be seen: ``traces`` and/or ``nccl_log``, for the cause and for the
    culprits. A degraded NIC slows every ring equally, so traces show the cause (slow transfers,
    on-time arrivals) but not which host; only that host's log (port errors, a lower graph
    bandwidth) names it."""
    if f.cause == "none":
        return {"cause": [], "culprits": []}
    culprit_logs = bool(f.hosts) and all(h in log_hosts for h in f.hosts)
    if isinstance(f, F.SocketFallback):
        src = ["traces"] + (["nccl_log"] if log_hosts else [])
        return {"cause": src, "culprits": src}
    if isinstance(f, F.DegradedNic):
        named = culprit_logs and (f.warns or bool(k.graph_subsys))
        return {"cause": ["traces"] + (["nccl_log"] if named else []), "culprits": ["nccl_log"] if named else []}
    if isinstance(f, (F.P2PDisabled, F.CrossSocketNic)):
        src = ["traces"] + (["nccl_log"] if culprit_logs else [])
        return {"cause": src, "culprits": src}
    return {"cause": ["traces"], "culprits": ["traces"]}


def _host_sources(k: Knobs, logs: bool) -> list[str]:
    src = []
    if k.torch_variant == "kineto_2025":
        src.append("trace.host_name")
    if k.naming == "tensorboard":
        src.append("file_name")
    if logs:
        src.append("nccl_log (pid)")
    return src


def _log_options(job: Job, k: Knobs, v: Any, rng: np.random.Generator) -> LogOptions:
    env: dict[str, str] = {}
    if rng.random() < 0.7:
        env["NCCL_SOCKET_IFNAME"] = job.hosts[0].socket_if
    if job.network.kind == "RoCE":
        env["NCCL_IB_GID_INDEX"] = "3"
    if rng.random() < 0.25:
        env["NCCL_IB_HCA"] = "mlx5"
    if rng.random() < 0.2:
        env["NCCL_NET_GDR_LEVEL"] = "PHB"
    if rng.random() < 0.2:
        env["NCCL_IB_TIMEOUT"] = "22"
    if rng.random() < 0.1 and v >= (2, 17, 0):
        env["NCCL_NVLS_ENABLE"] = "0"
    rh = bool(k.red_herrings)
    warn_hosts = [int(rng.integers(0, job.n_nodes))] if rh and rng.random() < 0.6 else []
    return LogOptions(env=env, red_herrings=rh, graph_subsys=bool(k.graph_subsys), harmless_warn_hosts=warn_hosts,
                      socket_line_in_ib=rh and bool(rng.random() < 0.5))


def _interleave(per: dict[int, list[str]], job: Job, rng: np.random.Generator) -> list[str]:
    """torchrun --tee: the local ranks' lines arrive interleaved in chunks, each prefixed."""
    out: list[str] = []
    queues = {r: list(lines) for r, lines in per.items()}
    out.append(f"[default0]:[W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).")
    while any(queues.values()):
        for r in sorted(queues):
            q = queues[r]
            take = int(rng.integers(1, 6))
            for line in q[:take]:
                out.append(f"[default{job.ranks[r].local}]:{line}")
            del q[:take]
    out.append(f"[default0]:step {int(rng.integers(100, 5000))} loss {float(rng.uniform(1.5, 3.5)):.4f}")
    return out


def _tag(rng: np.random.Generator, n: int) -> str:
    return "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz0123456789"), n))


# -- suite -------------------------------------------------------------------------------------

#: how a suite spreads its bundles over scenarios (weights)
SUITE_WEIGHTS: dict[str, float] = {
    "healthy": 1.2, "healthy_imbalanced": 1.0, "socket_fallback": 0.8, "degraded_nic": 1.0, "compute_straggler": 1.0,
    "host_stall_straggler": 1.0, "intermittent_straggler": 1.0, "jitter_amplification": 0.8, "p2p_disabled_one_host": 0.9,
    "cross_socket_nic_one_host": 0.9, "two_faults": 1.0,
}


def suite(out: str | Path, count: int, seed: int = 0, *, workers: int = 1, progress: Any = None,
          **knobs: Any) -> list[GroundTruth]:
    """Generate ``count`` bundles spread over every scenario with varied knobs, and an index
    ``out/suite.json``. Every scenario appears at least once when ``count`` allows."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([seed, 99])
    names = list(SUITE_WEIGHTS)
    w = np.array([SUITE_WEIGHTS[n] for n in names])
    order = names[:count] + [str(x) for x in rng.choice(names, max(0, count - len(names)), p=w / w.sum())]
    jobs = [(sc, seed * 100_003 + i, f"{i:04d}-{sc}") for i, sc in enumerate(order)]
    results: list[GroundTruth] = []
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers) as pool:
            futs = [pool.submit(_suite_one, sc, s, n, str(out), knobs) for sc, s, n in jobs]
            for i, fut in enumerate(futs):
                results.append(fut.result())
                if progress:
                    progress(i + 1, len(jobs), jobs[i][2])
    else:
        for i, (sc, s, n) in enumerate(jobs):
            results.append(_suite_one(sc, s, n, str(out), knobs))
            if progress:
                progress(i + 1, len(jobs), n)
    index = {"schema": "stallscope.samples.suite/1", "seed": seed, "count": len(results),
             "bundles": [{"name": t.name, "scenario": t.scenario, "cause": t.cause, "culprit_ranks": t.culprit_ranks,
                          "culprit_hosts": t.culprit_hosts, "lost_time_fraction": t.lost_time_fraction,
                          "world_size": t.job["world_size"], "nodes": t.job["nodes"], "parallelism": t.job["parallelism"],
                          "severity": t.knobs["severity"], "logs": t.knobs["logs"], "torch_variant": t.knobs["torch_variant"],
                          "truth": f"{t.name}/truth.json", "bundle": f"{t.name}/{t.bundle['path']}"} for t in results]}
    (out / "suite.json").write_text(json.dumps(index, indent=1) + "\n")
    return results


def _suite_one(scenario: str, seed: int, name: str, out: str, knobs: dict[str, Any]) -> GroundTruth:
    return generate(scenario, out=out, seed=seed, name=name, **knobs)


__all__ = ["generate", "suite"]
