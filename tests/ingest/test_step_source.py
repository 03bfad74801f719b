"""Traces without ``ProfilerStep`` marks (profiled without ``prof.step()``): steps from optimizer steps."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stallscope
from stallscope.api import ingest, postmortem
from stallscope.ingest.steps import loop_period, steps_from_optimizer
from stallscope.samples.bundle import dump_trace, load_trace
from stallscope.samples.markers import strip_trace
from tests.conftest import TRACES

OPT = "Optimizer.step#SGD.step"


def test_each_step_runs_to_the_end_of_an_optimizer_step() -> None:
    rows = steps_from_optimizer([(OPT, 500, 50), (OPT, 100, 20), (OPT, 300, 10)], 0)
    assert [(r["step"], r["start_ns"], r["end_ns"], r["dur_ns"]) for r in rows] == [
        (0, 0, 120, 120), (1, 120, 310, 190), (2, 310, 550, 240)]


def test_a_step_ends_when_its_optimizer_kernels_do() -> None:
    """The CPU launches each iteration in a few microseconds, the optimizer's kernels inside its
    annotation, then waits for the GPU at a synchronizing copy (``loss.item()``, launched right
    after): the iteration ends when the optimizer's kernels end on the GPU, not when the CPU left
    the annotation (seed 31000 #0199: a first step of 5 ms, then one across both iterations)."""
    spans = [(OPT, 40, 10), (OPT, 1040, 10)]
    launch = np.array([5, 20, 42, 45, 52, 1005, 1020, 1042, 1045, 1052])
    gpu_end = np.array([300, 700, 950, 990, 991, 1300, 1700, 1950, 1990, 1991])
    rows = steps_from_optimizer(spans, 0, (launch, gpu_end))
    assert [(r["start_ns"], r["end_ns"]) for r in rows] == [(0, 990), (990, 1990)]
    # kernels that end before the annotation does leave it where it is; none launched inside: the same
    assert [r["end_ns"] for r in steps_from_optimizer(spans, 0, (np.array([41, 1041]), np.array([45, 1045])))] == [50, 1050]
    assert [r["end_ns"] for r in steps_from_optimizer(spans, 0, (np.array([5, 60]), np.array([30, 90])))] == [50, 1050]


def test_nothing_to_infer_from() -> None:
    assert steps_from_optimizer([], 0) == []
    assert steps_from_optimizer([(OPT, 1, 1)], None) == []


def test_two_optimizers_a_step_end_it_with_the_later_one() -> None:
    """HTA's trace_filter sample: Shampoo.step, then EMAOptimizer.step, once each a step."""
    spans = [("Optimizer.step#Shampoo.step", 100, 50), ("Optimizer.step#EMA.step", 160, 10),
             ("Optimizer.step#Shampoo.step", 300, 50), ("Optimizer.step#EMA.step", 360, 10)]
    assert [r["end_ns"] for r in steps_from_optimizer(spans, 0)] == [170, 370]


def test_a_wrapper_around_the_counted_optimizer_ends_the_step() -> None:
    """An optimizer whose step() calls another's: the inner one runs first inside the outer."""
    spans = [("Optimizer.step#Wrapper.step", 100, 100), ("Optimizer.step#Adam.step", 110, 50),
             ("Optimizer.step#Wrapper.step", 300, 100), ("Optimizer.step#Adam.step", 310, 50)]
    assert [r["end_ns"] for r in steps_from_optimizer(spans, 0)] == [200, 400]


def test_a_nested_span_of_the_same_name_is_one_step() -> None:
    assert [r["end_ns"] for r in steps_from_optimizer([(OPT, 100, 100), (OPT, 120, 30), (OPT, 300, 10)], 0)] == [200, 310]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["Optimizer.step#A.step", "Optimizer.step#B.step"]),
                          st.integers(0, 400), st.integers(0, 80)), min_size=1, max_size=30))
def test_each_step_ends_where_the_outermost_annotation_around_it_ends(spans: list[tuple[str, int, int]]) -> None:
    rows = steps_from_optimizer(spans, 0)
    assert rows and rows[0]["start_ns"] == 0
    for a, b in zip(rows, rows[1:]):
        assert b["start_ns"] == a["end_ns"] <= b["end_ns"]
    for r in rows:
        # the counted span that ends this step starts inside it; every annotation around that start ends by its end
        inside = [t0 for _, t0, _ in spans if r["start_ns"] <= t0 <= r["end_ns"]]
        assert inside
        assert any(r["end_ns"] == max([u0 + ud for _, u0, ud in spans if u0 <= t0 < u0 + ud] + [t0]) for t0 in inside)


def test_a_long_profile_of_wrapped_optimizer_steps() -> None:
    """20,000 optimizer steps, each inside a wrapper: as many steps, each ending with its wrapper."""
    n = 20_000
    spans = [(OPT, i * 1000, 100) for i in range(n)] + [("Optimizer.step#Wrapper.step", i * 1000 - 5, 200) for i in range(n)]
    rows = steps_from_optimizer(spans, 0)
    assert len(rows) == n and [r["end_ns"] for r in rows[:3]] == [195, 1195, 2195] and rows[-1]["end_ns"] == (n - 1) * 1000 + 195


#: real traces with both marks and torch.optim annotations (the HTA samples, the gloo run)
REAL = ["hta/nccl_parser_config/nccl_data.json.gz", "hta/trace_diff/control/control.json.gz",
        "hta/trace_filter/sampled_rank-0.json.gz", "cpu_gloo/rank0.pt.trace.json.gz"]


def _marks(path: Path) -> list[tuple[int, int]]:
    d = json.loads(gzip.decompress(path.read_bytes()))
    return sorted((round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)) for e in d["traceEvents"]
                  if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                  and str(e.get("name", "")).startswith("ProfilerStep#"))


@pytest.mark.parametrize("name", REAL)
def test_a_real_trace_without_its_marks_keeps_its_steps(name: str, store: Path, tmp_path: Path) -> None:
    """Each step taken from the optimizer ends inside the profiler's own step of the same
    order (where the optimizer ran last in it), and there are as many."""
    src = TRACES / name
    stripped = strip_trace(src.read_bytes())
    assert stripped is not None
    path = tmp_path / src.name
    path.write_bytes(stripped)
    ingest([path], store=store, analyze=False)
    s = stallscope.open(store)
    row = s.sql("SELECT steps, step_source FROM ranks").row(0, named=True)
    marks = _marks(src)
    assert row == {"steps": len(marks), "step_source": "Optimizer.step"}
    steps = s.sql("SELECT step, start_ns, end_ns FROM steps ORDER BY step").rows()
    assert [st for st, _, _ in steps] == list(range(len(marks)))
    for (_, a, z), (m0, m1) in zip(steps, marks):
        assert m0 <= z <= m1  # both on the trace clock
        assert a < z


def test_marks_win_over_optimizer_steps(store: Path) -> None:
    ingest([TRACES / REAL[0]], store=store, analyze=False)
    row = stallscope.open(store).sql("SELECT steps, step_source FROM ranks").row(0, named=True)
    assert row == {"steps": 3, "step_source": "ProfilerStep"}


def test_no_marks_and_no_optimizer_no_steps(store: Path) -> None:
    ingest([TRACES / "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"], store=store, analyze=False)
    row = stallscope.open(store).sql("SELECT steps, step_source FROM ranks").row(0, named=True)
    assert row == {"steps": 0, "step_source": None}


def _without_steps(data: bytes) -> bytes:
    """A trace with neither step marks nor torch.optim annotations (a hand-written update loop)."""
    out = strip_trace(data, optimizer=True)
    assert out is not None
    return out


def _loop(pauses: list[float], cycles: int, tokens: list[str], seed: int = 0) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    toks = tokens * cycles
    gaps = np.array([g * rng.uniform(0.8, 1.2) for _ in range(cycles) for g in pauses][:-1])
    return toks, gaps


@pytest.mark.parametrize("seed", range(20))
def test_the_loop_of_a_rank_s_collectives(seed: int) -> None:
    """(period, boundary): DDP's seven identical buckets, 5 ms of backward apart, then 40 ms of
    optimizer and forward; FSDP's all-gathers and reduce-scatters; a tensor-parallel all-reduce
    per layer, forward (3.4 ms apart) then backward (5.2 ms), whose forward ends with a longer
    pause every half-loop. Pauses vary by ±20 %."""
    assert loop_period(*_loop([5.0] * 6 + [40.0], 6, ["ar"] * 7, seed)) == (7, 6)
    assert loop_period(*_loop([5.0] * 6 + [40.0], 3, ["ar"] * 7, seed)) == (7, 6)
    assert loop_period(*_loop([3, 3, 3, 4, 4, 4, 4, 4, 20], 5, ["ag"] * 3 + ["ag", "rs"] * 3, seed)) == (9, 8)
    assert loop_period(*_loop([3.4] * 9 + [6.3] + [5.2] * 9 + [43.0], 6, ["ar"] * 20, seed)) == (20, 19)


def test_no_loop_is_seen_where_none_can_be() -> None:
    """Nothing repeats; identical buckets over two iterations (one boundary pause seen: as likely
    one pause of a longer loop); evenly spaced identical collectives (one bucket an iteration, or
    one iteration of several buckets: not told apart)."""
    assert loop_period(list("abcdefgh"), np.ones(7)) is None
    assert loop_period(*_loop([5.0] * 6 + [40.0], 2, ["ar"] * 7)) is None
    assert loop_period(*_loop([40.0], 8, ["ar"])) is None


@pytest.mark.parametrize(("name", "loops"), [("hta/trace_diff/control/control.json.gz", 6),
                                            ("hta/nccl_parser_config/nccl_data.json.gz", 3)])
def test_without_marks_or_optimizer_steps_the_collectives_loop_gives_the_steps(name: str, loops: int, store: Path,
                                                                                tmp_path: Path) -> None:
    """Real traces without their marks or torch.optim's annotations: as many steps as the
    profiler marked, each but the first (from the trace's start) as long as a marked step within
    10 %: the loop is the training iteration, cut at another point of it."""
    src = TRACES / name
    marks = _marks(src)
    path = tmp_path / src.name
    path.write_bytes(_without_steps(src.read_bytes()))
    ingest([path], store=store, analyze=False)
    s = stallscope.open(store)
    assert s.sql("SELECT steps, step_source FROM ranks").row(0, named=True) == {"steps": loops, "step_source": "collectives"}
    assert len(marks) == loops
    marked = float(np.median([e - b for b, e in marks]))
    durs = s.sql("SELECT end_ns - start_ns AS d FROM steps ORDER BY step")["d"].to_list()
    assert all(abs(d - marked) <= 0.1 * marked for d in durs[1:])
    if loops >= 3:
        doc = postmortem(path, store=tmp_path / "analysed")
        f = next(f for f in doc["findings"] if f["rule"] == "ING004")
        assert f["title"] == "no ProfilerStep markers: steps taken from the collectives' loop" and f["severity"] == "info"


def test_without_any_loop_the_whole_profile_is_one_step(store: Path, tmp_path: Path) -> None:
    """A trace with collectives but neither marks, optimizer steps nor a loop in its collectives
    (HTA's control trace with three of its NCCL kernels left: too few to repeat) is analysed as
    one step, its whole profile; the stall breakdown and the collectives are still measured, and
    ING004 says so."""
    src = TRACES / "hta/trace_diff/control/control.json.gz"
    d = load_trace(_without_steps(src.read_bytes()))
    assert d is not None
    nccl = sorted(e["ts"] for e in d["traceEvents"] if e.get("cat") == "kernel" and "nccl" in str(e.get("name", "")).lower())
    d["traceEvents"] = [e for e in d["traceEvents"] if not (e.get("cat") == "kernel" and "nccl" in str(e.get("name", "")).lower()
                                                            and e["ts"] > nccl[2])]
    path = tmp_path / src.name
    path.write_bytes(dump_trace(d, True))
    ingest([path], store=store)
    s = stallscope.open(store)
    row = s.sql("SELECT steps, step_source, trace_start_ns, trace_end_ns, collectives FROM ranks").row(0, named=True)
    assert row["steps"] == 1 and row["step_source"] == "profile" and row["collectives"] == 3
    assert s.sql("SELECT step, start_ns, end_ns FROM steps").rows() == [(0, row["trace_start_ns"], row["trace_end_ns"])]
    assert s.sql("SELECT count(*) AS n FROM step_breakdown")["n"][0] == 1
    doc = postmortem(path, store=store)
    f = next(f for f in doc["findings"] if f["rule"] == "ING004")
    assert "whole profile is one step" in f["title"] and f["severity"] == "info"


def test_a_trace_without_collectives_or_any_step_has_none(store: Path, tmp_path: Path) -> None:
    src = TRACES / "hta/trace_diff/control/control.json.gz"
    d = load_trace(_without_steps(src.read_bytes()))
    assert d is not None
    d["traceEvents"] = [e for e in d["traceEvents"]
                        if not any(k in str(e.get("name", "")).lower() for k in ("nccl", "c10d::", "record_param_comms"))]
    path = tmp_path / src.name
    path.write_bytes(dump_trace(d, True))
    ingest([path], store=store, analyze=False)
    row = stallscope.open(store).sql("SELECT steps, step_source, collectives FROM ranks").row(0, named=True)
    assert row == {"steps": 0, "step_source": None, "collectives": 0}
