"""Cross-rank analysis against generated jobs whose ground truth is known to the nanosecond.

The generator (``stallscope.samples``) runs every rank's program in one physics engine, then
writes the traces with per-host clock offsets. It records, per rank and step, how long each
rank waited inside group collectives and how late it arrived. The analysis stage never sees any
of that: it must recover the clocks from the traces alone, match every collective across its
members (by ``Seq`` where the trace has it, by order where it does not), and measure the same
waits. These tests compare the two.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from stallscope import api
from stallscope.samples import generate

#: one job per profiler variant and parallelism plan, with and without Seq / collective metadata
CASES: dict[str, tuple[str, int, dict[str, Any]]] = {
    "ddp-2025-seq": ("healthy", 1, dict(parallelism="ddp", torch_variant="kineto_2025")),
    "fsdp-2024-noseq": ("healthy", 2, dict(parallelism="fsdp", torch_variant="kineto_2024")),
    "ddp-2022-nometadata": ("healthy", 3, dict(parallelism="ddp", torch_variant="kineto_2022")),
    "tpdp-2025-seq-off": ("healthy", 4, dict(parallelism="tp_dp", torch_variant="kineto_2025", seq=False)),
    "hsdp-2024-metadata-off": ("healthy", 5, dict(parallelism="hsdp", torch_variant="kineto_2024", metadata=False)),
    "pipeline-2025": ("healthy", 6, dict(parallelism="pipeline", torch_variant="kineto_2025")),
    "fsdp-straggler": ("compute_straggler", 7, dict(parallelism="fsdp", torch_variant="kineto_2025", severity="moderate")),
    "ddp-drift": ("healthy", 8, dict(parallelism="ddp", torch_variant="kineto_2025", drift=True)),
}

US = 1_000


class Analyzed:
    """A generated job, ingested and analyzed, with its truth."""

    def __init__(self, root: Path, scenario: str, seed: int, knobs: dict[str, Any]) -> None:
        knobs = dict(nodes=2, gpus=4, steps=4, detail="lean", noise="low", clock_offset_ms=30.0, drift=False,
                     truncate=0, drop=0, windows=0, step_marks=True, logs="none") | knobs
        gt = generate(scenario, out=root, seed=seed, **knobs)
        self.truth: dict[str, Any] = json.loads((gt.bundle_path.parent / "truth.json").read_text())
        res = api.ingest([gt.bundle_path], store=root / "store")
        self.store = api.open_store(root / "store", job=res.job)
        ours = dict(self.store.sql("select rank, host from ranks").iter_rows())
        #: truth host name -> the host name (or inferred label) the analysis uses
        self.host_of = {h: ours[r] for r, h in enumerate(self.truth["job"]["rank_host"])}

    def sql(self, q: str) -> pl.DataFrame:
        return self.store.sql(q)

    def step_index(self, step: int) -> int:
        return self.truth["job"]["steps"].index(step)


@pytest.fixture(scope="module", params=list(CASES))
def job(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Analyzed:
    scenario, seed, knobs = CASES[request.param]
    return Analyzed(tmp_path_factory.mktemp(request.param), scenario, seed, knobs)


def test_clock_offsets_within_10us(job: Analyzed) -> None:
    off = dict(job.sql("select host, offset_ns from clock_offsets").iter_rows())
    truth = job.truth["clock"]["offset_ns"]
    ref = job.truth["job"]["rank_host"][0]
    for h, o in truth.items():
        # trace = true + o, aligned = trace + ours; on the reference host's clock: ours = -(o - o_ref)
        assert abs(off[job.host_of[h]] + (o - truth[ref])) <= 10 * US, (h, off[job.host_of[h]], o - truth[ref])


def test_every_collective_is_matched_with_all_its_members(job: Analyzed) -> None:
    inst = job.sql("select * from collective_instances")
    assert inst.height > 0
    assert inst.filter(pl.col("group_size").is_not_null() & (pl.col("members") != pl.col("group_size"))).height == 0
    assert inst["consistent"].all()
    knobs = job.truth["knobs"]
    group = inst.filter(pl.col("channel").str.starts_with("pg:"))
    if knobs["torch_variant"] == "kineto_2025" and knobs.get("seq", True) and knobs.get("metadata", True):
        assert set(group["match"]) == {"seq"}
    # a send pairs with its receive, by order on the pair (a rank's p2p Seq counts messages with
    # every peer, so it never ties the two ends together)
    p2p = inst.filter(pl.col("channel").str.starts_with("p2p:"))
    if p2p.height:
        assert (p2p["members"] == 2).all() and set(p2p["match"]) == {"order"}
    # per rank and op, as many matched calls as the program made
    steps = len(job.truth["job"]["steps"])
    # (an instance of a send/recv pair is named after the member that arrived first: count pairs as p2p)
    got = job.sql("""select m.rank, if(i.op in ('send', 'recv'), 'p2p', i.op) op, count(*) n
                     from collective_members m join collective_instances i using (instance_id) group by all""")
    counts = {(r, op): n for r, op, n in got.iter_rows()}
    for r, ops in job.truth["job"]["collectives_per_rank_step"].items():
        want: dict[str, int] = {}
        for op, n in ops.items():
            want["p2p" if op in ("send", "recv") else op] = want.get("p2p" if op in ("send", "recv") else op, 0) + n
        for op, n in want.items():
            assert counts.get((int(r), op), 0) == n * steps, (r, op, counts.get((int(r), op)), n * steps)


def test_waits_and_lateness_match_the_physics(job: Analyzed) -> None:
    per = job.truth["physics"]["per_rank_step"]
    got = job.sql("""select m.rank, m.step, max(m.wait_ns) max_wait, sum(m.wait_ns) wait,
                            max(m.arrival_ns - i.first_arrival_ns) max_late
                     from collective_members m join collective_instances i using (instance_id)
                     where i.op not in ('send', 'recv') group by all""")
    assert got.height == len(per["wait_ns"]) * len(job.truth["job"]["steps"])
    n_members = job.sql("select count(*) n from collective_members m join collective_instances i using (instance_id) "
                        "where i.op not in ('send', 'recv')")["n"][0]
    for row in got.iter_rows(named=True):
        r, k = row["rank"], job.step_index(row["step"])
        assert abs(row["max_wait"] - per["max_wait_ns"][r][k]) <= 10 * US, row
        assert abs(row["max_late"] - per["max_late_ns"][r][k]) <= 10 * US, row
        # the sum carries one clock error per collective: allow 1 µs each
        assert abs(row["wait"] - per["wait_ns"][r][k]) <= max(10 * US, n_members // got.height * US), row


def test_breakdown_sums_to_the_step(job: Analyzed) -> None:
    bd = job.sql("""select step_ns, compute_ns + comm_intra_ns + comm_inter_ns + sync_wait_ns + host_stall_ns
                           + other_idle_ns as parts, sync_wait_ns, comm_hidden_ns from step_breakdown""")
    assert bd.height == len(job.truth["job"]["rank_host"]) * len(job.truth["job"]["steps"])
    assert ((bd["step_ns"] - bd["parts"]).abs() <= bd["step_ns"] * 0.001).all()
    assert (bd.select(pl.all().min()).row(0) >= (0, 0, 0, 0))


def test_planted_host_stall_is_measured_as_lateness_and_wait(tmp_path: Path) -> None:
    """A rank whose data loader stalls D every step arrives ~D late; its peers wait ~D for it."""
    job = Analyzed(tmp_path, "host_stall_straggler", 5, dict(parallelism="ddp", torch_variant="kineto_2025",
                                                               severity="moderate"))
    culprit = job.truth["culprit_ranks"][0]
    delay = job.truth["plan"]["host_delay_ns"][str(culprit)]
    got = job.sql("""select m.rank, m.step, max(m.wait_ns) max_wait, max(m.arrival_ns - i.first_arrival_ns) max_late
                     from collective_members m join collective_instances i using (instance_id) group by all""")
    stalls = job.sql(f"select step, host_stall_ns from step_breakdown where rank = {culprit}")
    stall_of = dict(stalls.iter_rows())
    for row in got.iter_rows(named=True):
        d = delay[job.step_index(row["step"])]
        if row["rank"] == culprit:
            assert row["max_late"] >= 0.9 * d and row["max_wait"] == 0
            assert stall_of[row["step"]] >= 0.9 * d  # the culprit's own GPU idled, nothing launched
        else:
            assert row["max_wait"] >= 0.9 * d and row["max_late"] < 0.1 * d
    # the straggler is the last to arrive at every step's first blocking collective
    last = job.sql("""select step, arg_min(last_rank, first_arrival_ns) last from collective_instances group by step""")
    assert set(last["last"]) == {culprit}


def test_truncated_trace_steps_past_its_gpu_data_are_left_out(tmp_path: Path) -> None:
    """A killed job's trace keeps its CPU steps (written first) past its last GPU activity: those
    steps were not observed, so they get no breakdown row instead of a whole step of host stall."""
    job = Analyzed(tmp_path, "healthy", 9, dict(parallelism="ddp", torch_variant="kineto_2025", steps=6, truncate=1))
    cut = job.sql("select rank from ranks where truncated")["rank"].to_list()
    assert len(cut) == 1
    r = cut[0]
    steps = len(job.truth["job"]["steps"])
    bd = job.sql(f"select step, step_ns, host_stall_ns from step_breakdown where rank = {r}")
    assert bd.height < steps
    assert (bd["host_stall_ns"] < 0.5 * bd["step_ns"]).all()
    # every other rank keeps every step
    others = job.sql(f"select rank, count(*) n from step_breakdown where rank <> {r} group by rank")
    assert set(others["n"]) == {steps}
