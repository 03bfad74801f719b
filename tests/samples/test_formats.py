"""The files follow the real formats field by field (real traces and logs in ../shared)."""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from stallscope.samples import GroundTruth, generate


def _load(p: Path) -> dict:
    return json.loads(gzip.open(p).read())


def _event_kind(e: dict) -> tuple:
    cat = e.get("cat")
    name = e.get("name", "")
    if cat == "kernel":
        return ("X", "kernel", "nccl" if name.startswith("nccl") else "compute")
    if cat == "cpu_op" and name == "record_param_comms":
        return ("X", "cpu_op", "record_param_comms")
    return (e.get("ph"), cat, None)


def _shapes(trace: dict) -> tuple[dict, dict]:
    keys: dict[tuple, set] = defaultdict(set)
    args: dict[tuple, set] = defaultdict(set)
    for e in trace["traceEvents"]:
        k = _event_kind(e)
        keys[k].add(tuple(e))
        if isinstance(e.get("args"), dict):
            args[k].add(frozenset(e["args"]))
    return keys, args


def test_kineto_2024_matches_nccl_data_field_by_field(shared: Path, bundles: dict[str, GroundTruth]) -> None:
    real = _load(shared / "traces/hta/nccl_parser_config/nccl_data.json.gz")
    ours = bundles["healthy"].traces()[0]
    assert list(ours) == list(real)  # same top-level keys, same order
    assert set(ours["distributedInfo"]) == set(real["distributedInfo"])
    assert set(ours["distributedInfo"]["pg_config"][0]) == set(real["distributedInfo"]["pg_config"][0])
    assert set(ours["deviceProperties"][0]) == set(real["deviceProperties"][0])
    rk, ra = _shapes(real)
    ok, oa = _shapes(ours)
    for kind in ok:
        assert kind in rk, f"event kind {kind} not in the real trace"
        assert ok[kind] <= rk[kind], (kind, ok[kind] - rk[kind])
    for kind in ("kernel", "nccl"), ("cpu_op", "record_param_comms"):
        k = ("X",) + kind
        assert oa[k] and oa[k] <= ra[k], (k, oa[k], ra[k])
    # every other arg-key set we write exists in the real trace
    for k in (("X", "cuda_runtime", None), ("X", "gpu_memcpy", None), ("M", None, None), ("X", "Trace", None)):
        assert oa[k] <= ra[k], (k, oa[k] - ra[k])
    assert oa[("X", "kernel", "compute")] <= ra[("X", "kernel", "compute")]
    assert isinstance(ours["traceEvents"][0]["ts"], float) and isinstance(ours["baseTimeNanoseconds"], int)


def test_kineto_2022_matches_control_field_by_field(shared: Path, bundles: dict[str, GroundTruth]) -> None:
    real = _load(shared / "traces/hta/trace_diff/control/control.json.gz")
    ours = bundles["socket_fallback"].traces()[0]
    assert list(ours) == list(real)
    assert ours["distributedInfo"].keys() == real["distributedInfo"].keys()
    rk, ra = _shapes(real)
    ok, oa = _shapes(ours)
    for kind in ok:
        assert kind in rk, kind
        assert ok[kind] <= rk[kind], (kind, ok[kind] - rk[kind])
    assert oa[("X", "kernel", "nccl")] <= ra[("X", "kernel", "nccl")]
    assert oa[("X", "cpu_op", "record_param_comms")] <= ra[("X", "cpu_op", "record_param_comms")]
    xs = [e for e in ours["traceEvents"] if e.get("ph") == "X"]
    assert all(isinstance(e["ts"], int) and isinstance(e["dur"], int) for e in xs)
    assert {e["cat"] for e in ours["traceEvents"] if e.get("ph") in "sf"} == {"async_cpu_to_gpu"}
    names = {e["name"] for e in xs if e["cat"] == "kernel" and e["name"].startswith("nccl")}
    assert names and all(n.startswith("ncclKernel_") and n.endswith("(ncclWorkElem)") for n in names)


def test_kineto_2025_top_level_like_torch_2_13(shared: Path, bundles: dict[str, GroundTruth]) -> None:
    real = _load(shared / "traces/cpu_gloo/rank0.pt.trace.json.gz")
    ours = bundles["degraded_nic"].traces()[0]
    optional = {"with_stack", "with_flops"}  # written only when those profiler options are on
    assert set(real) - optional <= set(ours)
    assert ours["host_name"] in bundles["degraded_nic"].job["hosts"]
    rpc = [e for e in ours["traceEvents"] if e.get("name") == "record_param_comms"]
    assert rpc and all({"Seq", "Rank", "Process Group Name", "Process Group Ranks"} <= set(e["args"]) for e in rpc)
    nccl = [e for e in ours["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel_")]
    assert nccl and all("Seq" in e["args"] for e in nccl)
    assert any(e["name"].endswith("(ncclDevKernelArgsStorage<4096ul>)") for e in nccl)


def test_collective_metadata_is_coherent(bundles: dict[str, GroundTruth]) -> None:
    t = bundles["degraded_nic"]
    groups = {g["name"]: g for g in t.job["process_groups"]}
    seqs: dict[tuple, list] = defaultdict(list)
    for rank, tr in t.traces().items():
        by_ext = {e["args"]["External id"]: e for e in tr["traceEvents"] if e.get("name") == "record_param_comms"}
        for e in tr["traceEvents"]:
            if e.get("cat") == "kernel" and e["name"].startswith("nccl"):
                a = e["args"]
                host = by_ext[a["External id"]]["args"]
                assert host["Seq"] == a["Seq"] and host["Collective name"] == a["Collective name"]
                g = groups[a["Process Group Name"]]
                assert a["Process Group Ranks"] == "[" + ", ".join(map(str, g["ranks"])) + "]"
                assert a["Group size"] == len(g["ranks"]) and rank in g["ranks"]
                seqs[(a["Process Group Name"], a["Seq"])].append(rank)
    # every (group, Seq) instance has exactly the group's members: matching by Seq is exact
    for (pg, _), members in seqs.items():
        assert sorted(members) == list(groups[pg]["ranks"])


def test_ts_is_true_time_plus_host_offset(bundles: dict[str, GroundTruth]) -> None:
    """Synchronous collectives end together in true time: after subtracting the planned host
    offsets, the NCCL kernel ends of one instance agree within a few µs; before, they differ by
    exactly the offset differences."""
    t = bundles["compute_straggler"]
    base, off, rh = t.clock["base_time_ns"], t.clock["offset_ns"], t.job["rank_host"]
    ends: dict[tuple, dict[int, int]] = defaultdict(dict)
    for rank, tr in t.traces().items():
        n = defaultdict(int)
        for e in tr["traceEvents"]:
            if e.get("cat") == "kernel" and e["name"].startswith("nccl"):
                pg = e["args"]["Process Group Name"]
                n[pg] += 1
                ts_ns = round(e["ts"] * 1000) + round(e["dur"] * 1000)
                ends[(pg, n[pg])][rank] = base + ts_ns
    assert ends
    for inst in ends.values():
        true = [v - off[rh[r]] for r, v in inst.items()]
        assert max(true) - min(true) < 3_000
        hosts = {rh[r] for r in inst}
        if len(hosts) > 1:
            raw = {rh[r]: v for r, v in inst.items()}
            a, b = sorted(hosts)[:2]
            assert abs((raw[a] - raw[b]) - (off[a] - off[b])) < 3_000


def test_planted_stall_appears_in_the_timestamps(bundles: dict[str, GroundTruth]) -> None:
    """The stalled rank's data-loader span is longer by the planned delay, and the other ranks'
    first collective of that step waits about that long."""
    t = bundles["host_stall_straggler"]
    (r,) = t.culprit_ranks
    plan = t.plan["host_delay_ns"][str(r)]
    tr = t.traces()
    kind = t.plan["host_delay_kind"][str(r)]

    def loader_ns(rank: int) -> list[int]:
        return [round(e["dur"] * 1000) for e in tr[rank]["traceEvents"] if e.get("name", "").startswith("enumerate(DataLoader)")]

    def step_ns(rank: int) -> list[int]:
        return [round(e["dur"] * 1000) for e in tr[rank]["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]

    other = (r + 1) % t.job["world_size"]
    if kind == "dataloader":
        for got, base, d in zip(loader_ns(r), loader_ns(other), plan):
            assert abs((got - base) - d) < 0.25 * d + 2_000_000
    # every rank's step is stretched by about the stall: the stall is paid by all
    healthy = t.physics["step_time_ms_without_fault"]
    for rank in (r, other):
        for got, h, d in list(zip(step_ns(rank), healthy, plan))[1:]:
            assert got - h * 1e6 > 0.5 * d


def test_compute_straggler_kernels_are_slower(bundles: dict[str, GroundTruth]) -> None:
    t = bundles["compute_straggler"]
    (r,) = t.culprit_ranks
    slow = t.plan["compute_scale"][str(r)][0]
    tr = t.traces()

    def gemm_total(rank: int) -> float:
        return sum(e["dur"] for e in tr[rank]["traceEvents"] if e.get("cat") == "kernel" and "gemm" in e["name"])

    ratio = gemm_total(r) / gemm_total((r + 1) % t.job["world_size"])
    assert abs(ratio - slow) < 0.05 * slow


def test_clock_offsets_and_drift_are_applied(tmp_path: Path) -> None:
    t = generate("healthy", out=tmp_path, seed=9, nodes=2, gpus=4, steps=2, detail="sparse", logs="none",
                 clock_offset_ms=80.0, drift=True, torch_variant="kineto_2025", truncate=0, drop=0, windows=0, step_marks=True)
    assert any(abs(v) > 1_000_000 for v in t.clock["offset_ns"].values())
    assert any(v != 0 for v in t.clock["drift_ppm"].values())
    tr = t.traces()
    h0 = t.job["rank_host"][0]
    start_true = t.physics["step_start_true_ns"][0][0]
    step = min((e for e in tr[0]["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"])
    got = t.clock["base_time_ns"] + round(step["ts"] * 1000)
    want = start_true + t.clock["offset_ns"][h0] + int(t.clock["drift_ppm"][h0] * (start_true - t.clock["ref_ns"]) / 1e6)
    assert abs(got - want) <= 1


# -- NCCL logs ---------------------------------------------------------------------------------

_PREFIX = re.compile(r"^(?:\[default\d+\]:)?(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] (?:[\w/.]+:\d+ )?NCCL (?P<lvl>INFO|WARN) ")
# line shapes copied from the real corpus; each generated line of that kind must match one
_PATTERNS = {
    "conn": re.compile(r"Channel \d\d(?:/\d+)? : \d+\[[0-9a-f]+\] -> \d+\[[0-9a-f]+\] (?:\[(?:send|receive)\] )?via (?:NET/(?:IB|Socket)/\d+(?:/GDRDMA)?|P2P/(?:IPC|CUMEM)(?:/read)?|SHM/direct/direct)$"),
    "ring": re.compile(r"Channel \d\d/\d\d : +(?:\d+ *)+$"),
    "init": re.compile(r"(?:ncclCommInitRank(?:Config)? )?comm 0x[0-9a-f]+ rank \d+ nranks \d+ cudaDev \d+ (?:nvmlDev \d+ )?busId [0-9a-f]+ (?:commId 0x[0-9a-f]+ )?- Init (?:START|COMPLETE)$"),
    "net": re.compile(r"NET/(?:IB : Using (?:\[\d+\]\w+:\d/(?:IB|RoCE) ?)+(?:\[RO\])?; OOB [\w.-]+:[\d.]+<0>|Socket : Using \[0\][\w.-]+:[\d.]+<0>)$"),
    "env": re.compile(r"NCCL_\w+ set by environment to \S+$"),
    "affinity": re.compile(r"Setting affinity for GPU \d+ to [0-9a-f,]+$"),
}


def _real_lines(shared: Path) -> list[str]:
    out = []
    for p in (shared / "logs/nccl").glob("*.log"):
        for line in p.read_text(errors="replace").splitlines():
            i = line.find(" NCCL INFO ")
            if i >= 0:
                out.append(line[i + len(" NCCL INFO "):])
    return out


def test_log_patterns_match_real_logs(shared: Path) -> None:
    """The patterns the next test holds our lines to are satisfied by real lines."""
    real = _real_lines(shared)
    for name, pat in _PATTERNS.items():
        assert any(pat.match(x) for x in real), name


def test_nccl_log_lines_follow_the_real_format(bundles: dict[str, GroundTruth], shared: Path) -> None:
    seen = defaultdict(int)
    for sc in ("healthy", "socket_fallback", "degraded_nic", "p2p_disabled_one_host", "cross_socket_nic_one_host", "host_stall_straggler"):
        t = bundles[sc]
        pids = dict(zip(t.job["rank_pid"], t.job["rank_host"]))
        for path, text in t.logs().items():
            for line in text.splitlines():
                if not line.strip() or "NCCL" not in line:
                    continue
                m = _PREFIX.match(line)
                assert m, (path, line)
                assert pids[int(m["pid"])] == m["host"], line
                body = line[m.end():]
                if body.startswith("Channel") and " via " in body:
                    assert _PATTERNS["conn"].match(body), body
                    seen["conn"] += 1
                elif body.startswith("Channel"):
                    assert _PATTERNS["ring"].match(body), body
                    seen["ring"] += 1
                elif "Init START" in body or "Init COMPLETE" in body:
                    assert _PATTERNS["init"].match(body), body
                    seen["init"] += 1
                elif body.startswith(("NET/IB : Using", "NET/Socket : Using")):
                    assert _PATTERNS["net"].match(body), body
                    seen["net"] += 1
                elif "set by environment" in body:
                    assert _PATTERNS["env"].match(body), body
                    seen["env"] += 1
                elif body.startswith("Setting affinity"):
                    assert _PATTERNS["affinity"].match(body), body
                    seen["affinity"] += 1
    assert set(seen) == set(_PATTERNS)


def test_logs_carry_each_faults_evidence(bundles: dict[str, GroundTruth]) -> None:
    sock = "\n".join(bundles["socket_fallback"].logs().values())
    assert "Using network Socket" in sock and "via NET/Socket/0" in sock and "Using network IB" not in sock
    assert "Channel 00 : " in sock and "/0 : " not in sock  # NCCL 2.10: no connIndex, busId brackets

    t = bundles["p2p_disabled_one_host"]
    (bad,) = t.culprit_hosts
    for path, text in t.logs().items():
        on_bad = Path(path).name.startswith(bad + ".")
        assert ("via SHM/direct/direct" in text) == on_bad, path
        if not on_bad:
            assert "via P2P/CUMEM" in text  # NCCL 2.21
        assert "ncclCommInitRankConfig comm " in text

    t = bundles["cross_socket_nic_one_host"]
    (bad,) = t.culprit_hosts
    for path, text in t.logs().items():
        net = [x for x in text.splitlines() if "via NET/IB" in x]
        on_bad = Path(path).name.startswith(bad + ".")
        if net:
            assert all(("/GDRDMA" in x) != on_bad for x in net), path
        pat = [x for x in text.splitlines() if "Pattern 4" in x and "crossNic" in x]
        if on_bad and pat:
            assert any("/SYS," in x for x in pat)

    t = bundles["degraded_nic"]
    for path, text in t.logs().items():
        on_bad = Path(path).name.startswith(t.culprit_hosts[0] + ".")
        if t.faults[0].get("kind") == "degraded_nic" and "Got async event : port error" in text:
            assert on_bad, path
        assert "Init timings - ncclCommInitRankConfig" in text  # NCCL 2.24
        assert "Connected all rings, use ring PXN" in text


def test_torchrun_logs_are_wrapped_per_local_rank(bundles: dict[str, GroundTruth]) -> None:
    t = bundles["host_stall_straggler"]
    texts = t.logs()
    assert len(texts) == len(t.bundle["log_hosts"])
    for text in texts.values():
        nccl = [x for x in text.splitlines() if " NCCL " in x]
        assert nccl and all(re.match(r"^\[default\d+\]:", x) for x in nccl)


@pytest.mark.parametrize("version,kernel", [("2.12.12", "ncclKernel_AllReduce_RING_"), ("2.20.5", "ncclDevKernel_AllReduce_Sum_")])
def test_kernel_names_follow_the_nccl_version(tmp_path: Path, version: str, kernel: str) -> None:
    t = generate("healthy", out=tmp_path, seed=2, nodes=2, gpus=4, steps=2, detail="sparse", logs="none",
                 parallelism="ddp", nccl_version=version, torch_variant="kineto_2024" if version > "2.17" else "kineto_2022",
                 truncate=0, drop=0, windows=0, step_marks=True)
    names = {e["name"] for e in t.traces()[0]["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("nccl")}
    assert names and all(n.startswith(kernel) for n in names), names
