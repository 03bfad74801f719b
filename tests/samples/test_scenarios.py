"""Every scenario generates, and its ground truth is complete and consistent with the job."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stallscope.errors import UsageError
from stallscope.samples import SCENARIOS, GroundTruth, generate, suite
from stallscope.samples.bundle import read_files

_TOP = {"schema", "name", "scenario", "seed", "cause", "culprit_ranks", "culprit_hosts", "lost_time_fraction", "secondary",
        "faults", "knobs", "job", "clock", "plan", "physics", "bundle", "evidence"}


def test_every_scenario_is_in_the_catalog_and_generates(bundles: dict[str, GroundTruth]) -> None:
    assert set(bundles) == set(SCENARIOS)
    for sc, t in bundles.items():
        assert t.scenario == sc
        assert Path(t.path).name == "truth.json"
        assert t.bundle_path.exists()
        # the truth file is beside the bundle, never inside it
        assert "truth.json" not in {Path(p).name for p in read_files(t.bundle_path)}


def test_truth_fields_present_and_consistent(bundles: dict[str, GroundTruth]) -> None:
    for sc, t in bundles.items():
        d = json.loads(Path(t.path).read_text())
        assert set(d) == _TOP, sc
        job = t.job
        W = job["world_size"]
        assert W == job["nodes"] * job["gpus_per_node"] == len(job["rank_host"]) == len(t.bundle["traces"])
        assert set(job["rank_host"]) == set(job["hosts"]) and len(job["hosts"]) == job["nodes"]
        assert all(0 <= r < W for r in t.culprit_ranks)
        assert set(t.culprit_hosts) <= set(job["hosts"])
        assert 0.0 <= t.lost_time_fraction <= 1.0
        assert set(t.clock["offset_ns"]) == set(job["hosts"])
        assert len(job["steps"]) == t.knobs["steps"]
        pr = t.physics["per_rank_step"]
        assert {"wait_ns", "wait_p2p_ns", "late_ns", "transfer_ns"} <= set(pr)
        assert all(len(row) == t.knobs["steps"] for row in pr["wait_ns"]) and len(pr["wait_ns"]) == W
        want = SCENARIOS[sc].cause
        if sc == "two_faults":
            dom = [f for f in t.faults if f.get("dominant")]
            assert len(dom) == 1 and t.cause == dom[0]["cause"]
            assert t.secondary is not None and t.secondary["kind"] != dom[0]["kind"]
            assert dom[0]["lost_time_fraction"] >= 2 * t.secondary["lost_time_fraction"]
        else:
            assert t.cause == want, sc
            assert t.secondary is None
        if want == "none":
            assert t.culprit_ranks == [] and t.culprit_hosts == [] and t.lost_time_fraction == 0.0
        else:
            assert t.culprit_ranks and t.culprit_hosts and t.lost_time_fraction > 0.01, sc


def test_culprits_follow_the_findings_contract(bundles: dict[str, GroundTruth]) -> None:
    job_wide = {"socket_fallback", "jitter_amplification"}
    host_level = {"degraded_nic", "p2p_disabled_one_host", "cross_socket_nic_one_host"}
    for sc, t in bundles.items():
        rh = t.job["rank_host"]
        if sc in job_wide:
            assert t.culprit_ranks == list(range(t.job["world_size"])) and t.culprit_hosts == t.job["hosts"]
        elif sc in host_level:
            (h,) = t.culprit_hosts
            assert t.culprit_ranks == [r for r, x in enumerate(rh) if x == h]
        elif sc in ("compute_straggler", "host_stall_straggler"):
            assert t.culprit_ranks == [t.knobs["culprit_rank"]] and t.culprit_hosts == [rh[t.knobs["culprit_rank"]]]
        elif sc == "intermittent_straggler":
            assert t.culprit_hosts == sorted({rh[r] for r in t.culprit_ranks}, key=t.job["hosts"].index)


def test_evidence_says_where_the_fault_shows(bundles: dict[str, GroundTruth]) -> None:
    assert bundles["healthy"].evidence == {"cause": [], "culprits": []}
    assert bundles["compute_straggler"].evidence == {"cause": ["traces"], "culprits": ["traces"]}
    t = bundles["degraded_nic"]  # logs from every host
    assert "traces" in t.evidence["cause"]
    assert t.evidence["culprits"] == (["nccl_log"] if t.faults[0]["evidence"]["culprits"] else [])
    t = bundles["p2p_disabled_one_host"]
    assert t.evidence == {"cause": ["traces", "nccl_log"], "culprits": ["traces", "nccl_log"]}


def test_planned_injections_are_recorded(bundles: dict[str, GroundTruth]) -> None:
    t = bundles["host_stall_straggler"]
    r = str(t.culprit_ranks[0])
    assert list(t.plan["host_delay_ns"]) == [r] and min(t.plan["host_delay_ns"][r]) > 0
    t = bundles["compute_straggler"]
    (r,) = t.plan["compute_scale"]
    assert int(r) == t.culprit_ranks[0] and min(t.plan["compute_scale"][r]) > 1.0
    t = bundles["degraded_nic"]
    assert list(t.plan["inter_bw_factor"]) == t.culprit_hosts and 0 < t.plan["inter_bw_factor"][t.culprit_hosts[0]] < 1
    assert bundles["socket_fallback"].plan["net"] == "Socket"
    assert bundles["p2p_disabled_one_host"].plan["p2p"] == {bundles["p2p_disabled_one_host"].culprit_hosts[0]: False}
    t = bundles["intermittent_straggler"]
    for r, d in t.plan["host_delay_ns"].items():
        assert 0 < sum(x > 0 for x in d) < len(d)  # some steps only


def test_physics_side_waits_point_at_the_straggler(bundles: dict[str, GroundTruth]) -> None:
    for sc in ("compute_straggler", "host_stall_straggler"):
        t = bundles[sc]
        late = [sum(row) for row in t.physics["per_rank_step"]["late_ns"]]
        wait = [sum(row) for row in t.physics["per_rank_step"]["wait_ns"]]
        c = t.culprit_ranks[0]
        assert late.index(max(late)) == c
        assert wait[c] < min(w for r, w in enumerate(wait) if r != c)


def test_planted_stall_matches_physics_wait_and_lateness(bundles: dict[str, GroundTruth]) -> None:
    """A stall of D at the start of a step makes the straggler's largest lateness, and the other
    ranks' largest wait, at a group collective of that step about D."""
    t = bundles["host_stall_straggler"]
    (r,) = t.culprit_ranks
    plan = t.plan["host_delay_ns"][str(r)]
    pr = t.physics["per_rank_step"]
    other = (r + 1) % t.job["world_size"]
    for s, d in enumerate(plan):
        assert abs(pr["max_late_ns"][r][s] - d) < 0.15 * d + 1_000_000, (s, pr["max_late_ns"][r][s], d)
        assert abs(pr["max_wait_ns"][other][s] - d) < 0.15 * d + 1_000_000, (s, pr["max_wait_ns"][other][s], d)


def test_healthy_has_no_dominant_late_rank(bundles: dict[str, GroundTruth]) -> None:
    t = bundles["healthy"]
    step = sum(t.physics["step_time_ms"]) / len(t.physics["step_time_ms"]) * 1e6
    late = [sum(row) / len(row) for row in t.physics["per_rank_step"]["late_ns"]]
    assert max(late) < 0.1 * step
    assert t.physics["step_time_ms"] == t.physics["step_time_ms_without_fault"]


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    kw = dict(nodes=2, gpus=4, steps=3, detail="sparse", logs="all", archive="tar.gz", truncate=1)
    a = generate("degraded_nic", out=tmp_path / "a", seed=5, **kw)
    b = generate("degraded_nic", out=tmp_path / "b", seed=5, **kw)
    c = generate("degraded_nic", out=tmp_path / "c", seed=6, **kw)
    assert a.bundle_path.read_bytes() == b.bundle_path.read_bytes()
    assert Path(a.path).read_text() == Path(b.path).read_text()
    assert a.bundle_path.read_bytes() != c.bundle_path.read_bytes()


def test_without_step_marks_the_traces_keep_only_the_optimizer_steps(tmp_path: Path) -> None:
    """``step_marks=false``: every trace as profiled without ``prof.step()``, the same job otherwise
    (the same draws, the same events but the marks)."""
    import gzip

    kw = dict(nodes=2, gpus=4, steps=3, detail="sparse", logs="all", archive="zip", truncate=0, drop=0, windows=0)
    plain = generate("compute_straggler", out=tmp_path / "a", seed=5, step_marks=True, **kw)
    bare = generate("compute_straggler", out=tmp_path / "b", seed=5, step_marks=False, **kw)
    assert bare.knobs["step_marks"] is False and bare.lost_time_fraction == plain.lost_time_fraction

    def traces(t: GroundTruth) -> dict[str, str]:
        files = read_files(t.bundle_path)
        return {p: (gzip.decompress(b) if b[:2] == b"\x1f\x8b" else b).decode() for p, b in files.items()
                if p in set(t.bundle["traces"].values())}

    with_marks, without = traces(plain), traces(bare)
    assert set(with_marks) == set(without) and len(without) == 8
    for path, text in without.items():
        assert "ProfilerStep#" not in text and "Optimizer.step#" in text
        assert "ProfilerStep#" in with_marks[path]
        assert text.count('"ph": "X"') == with_marks[path].count('"ph": "X"') - with_marks[path].count("ProfilerStep#")
    with pytest.raises(UsageError, match="step_marks"):
        generate("healthy", out=tmp_path / "c", seed=0, step_marks=False, windows=1)
    # a killed rank's cut trace (no complete JSON) was profiled the same way: no marks there either
    cut = generate("compute_straggler", out=tmp_path / "d", seed=5, step_marks=False, **(kw | dict(truncate=1)))
    assert cut.bundle["truncated_traces"] and all("ProfilerStep#" not in text for text in traces(cut).values())


def test_a_host_s_ranks_never_share_a_pid(tmp_path: Path) -> None:
    """Launchers fork a host's local ranks one after another: distinct pids on every host (seed
    38000 #0210 drew one pid for two ranks, and their traces and logs shared a name prefix)."""
    for seed in range(40):
        t = generate("healthy", out=tmp_path / str(seed), seed=seed, nodes=2, gpus=8, steps=2, detail="sparse", logs="none")
        pairs = list(zip(t.job["rank_host"], t.job["rank_pid"]))
        assert len(set(pairs)) == len(pairs), seed


def test_bad_knobs_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown scenario"):
        generate("nope", out=tmp_path, seed=0)
    with pytest.raises(UsageError, match="unknown knob"):
        generate("healthy", out=tmp_path, seed=0, colour="red")
    with pytest.raises(UsageError, match="NCCL version"):
        generate("healthy", out=tmp_path, seed=0, nccl_version="1.0.0")
    with pytest.raises(UsageError, match="out of range"):
        generate("compute_straggler", out=tmp_path, seed=0, nodes=2, gpus=4, culprit_rank=99)


def test_severity_orders_the_cost(tmp_path: Path) -> None:
    lost = {}
    for sev in ("subtle", "severe"):
        t = generate("compute_straggler", out=tmp_path, seed=3, name=sev, nodes=2, gpus=4, steps=4, detail="sparse",
                     logs="none", parallelism="ddp", severity=sev)
        lost[sev] = t.lost_time_fraction
    assert 0.01 < lost["subtle"] < 0.12 and lost["severe"] > 0.25


def test_suite_writes_an_index(tmp_path: Path) -> None:
    res = suite(tmp_path, 3, seed=1, nodes=2, gpus=4, steps=2, detail="sparse", logs="none")
    idx = json.loads((tmp_path / "suite.json").read_text())
    assert idx["count"] == 3 == len(res)
    for b in idx["bundles"]:
        assert (tmp_path / b["truth"]).exists() and (tmp_path / b["bundle"]).exists()
    assert [b["scenario"] for b in idx["bundles"]] == list(SCENARIOS)[:3]


def test_generator_does_not_import_analysis_or_rules() -> None:
    src = Path(__file__).resolve().parents[2] / "stallscope" / "samples"
    for p in src.glob("*.py"):
        text = p.read_text()
        assert not re.search(r"^\s*(from|import)\s+stallscope\.(analysis|rules)", text, re.M), p.name
