"""A rank's traces in several profiling windows (``schedule(repeat=2)``: one file per window) are
one rank: the same answer, culprit and cost as the job recorded in one window."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from stallscope import api
from stallscope.analysis.whatif import unprofiled_ns
from stallscope.samples import generate
from stallscope.samples.bundle import load_json, pack, read_files
from stallscope.samples.windows import split_trace, split_windows

KNOBS = dict(nodes=2, gpus=4, steps=8, detail="lean", noise="low", truncate=0, drop=0, windows=0, step_marks=True, logs="none",
             parallelism="ddp", severity="moderate", archive="dir", gzip=False, torch_variant="kineto_2025")


def _postmortem(bundle: Path, store: Path) -> dict[str, Any]:
    res = api.ingest([bundle], store=store)
    return api.postmortem(res.job, store=store)


def _top(report: dict[str, Any]) -> dict[str, Any] | None:
    return next((f for f in report["findings"] if f["severity"] in ("critical", "high", "medium")), None)


@pytest.fixture(scope="module")
def straggler(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("windows")
    gt = generate("compute_straggler", out=root / "whole", seed=5, **KNOBS)
    files, n = split_windows(read_files(gt.bundle_path), first=3, skip=2)
    pack(files, root / "split", "dir")
    return {"truth": json.loads((gt.bundle_path.parent / "truth.json").read_text()), "split_traces": n,
            "whole": _postmortem(gt.bundle_path, root / "store_whole"),
            "split_store": root / "store_split", "split": _postmortem(root / "split" / "bundle", root / "store_split")}


def test_every_trace_is_split_in_two_windows_with_the_gap_recorded_nowhere(straggler: dict[str, Any]) -> None:
    assert straggler["split_traces"] == 8
    store = api.open_store(straggler["split_store"])
    ranks = store.sql("SELECT rank, steps FROM ranks ORDER BY rank")
    assert ranks["rank"].to_list() == list(range(8))  # no rank number made up for a second window
    assert set(ranks["steps"].to_list()) == {6}  # 8 steps less the 2 skipped
    files = store.sql("SELECT rank, count(*) AS n FROM files WHERE kind = 'kineto' GROUP BY rank")
    assert files["n"].to_list() == [2] * 8
    warn = store.sql("SELECT code, message, count FROM ingest_warnings")
    assert "duplicate_rank" not in warn["code"].to_list()
    win = warn.filter(pl.col("code") == "profiling_windows")
    assert win.height == 1 and win["count"][0] == 8  # one line for the job
    assert "8 rank(s) left 2 trace files each" in win["message"][0]


def test_the_last_step_of_a_window_ends_with_its_own_work_not_at_the_next_window(straggler: dict[str, Any]) -> None:
    b = api.open_store(straggler["split_store"]).sql("SELECT step, max(step_ns) AS ns FROM step_breakdown GROUP BY step")
    med = float(b["ns"].median())
    assert b["ns"].max() < 1.3 * med, b.sort("step")


def test_split_job_gets_the_same_answer_culprit_and_cost(straggler: dict[str, Any]) -> None:
    whole, split = _top(straggler["whole"]), _top(straggler["split"])
    assert whole is not None and split is not None
    assert (split["rule"], split["ranks"]) == (whole["rule"], whole["ranks"]) == ("SYN001", straggler["truth"]["culprit_ranks"])
    # the cost is a share of the recorded time: the unrecorded steps between the windows are no part of it
    assert split["lost_time_fraction"] == pytest.approx(whole["lost_time_fraction"], abs=0.02)


def test_a_window_with_another_clock_base_is_moved_onto_the_first_window_s_clock(straggler: dict[str, Any],
                                                                                  tmp_path: Path) -> None:
    """Kineto writes ``ts`` relative to ``baseTimeNanoseconds``; a window whose base is 2 s later
    (its times 2 s smaller) is the same rank on the same timeline once moved."""
    files = read_files(straggler["split_store"].parent / "split" / "bundle")
    firsts = {n.split(".")[0] for n in files if n.endswith(".json")}
    moved = 0
    for name in sorted(files):
        d = load_json(files[name]) if name.endswith(".json") else None
        if d is None or "baseTimeNanoseconds" not in d:
            continue
        if name.split(".")[0] in firsts and name != min(n for n in files if n.split(".")[0] == name.split(".")[0]):
            d["baseTimeNanoseconds"] = int(d["baseTimeNanoseconds"]) + 2_000_000_000
            for e in d["traceEvents"]:
                if "ts" in e:
                    e["ts"] = e["ts"] - 2_000_000
            files[name] = json.dumps(d).encode()
            moved += 1
    assert moved == 8
    pack(files, tmp_path / "b", "dir")
    res = api.ingest([tmp_path / "b" / "bundle"], store=tmp_path / "s")
    q = "SELECT rank, count(*) AS n, min(ts_ns) AS a, max(ts_ns) AS z FROM events GROUP BY rank ORDER BY rank"
    assert api.open_store(tmp_path / "s", job=res.job).sql(q).equals(api.open_store(straggler["split_store"]).sql(q))
    top = _top(api.postmortem(res.job, store=tmp_path / "s"))
    assert top is not None and (top["rule"], top["ranks"]) == ("SYN001", straggler["truth"]["culprit_ranks"])


def test_a_second_claim_on_a_rank_that_overlaps_its_span_still_gets_a_new_number(tmp_path: Path) -> None:
    gt = generate("healthy", out=tmp_path / "g", seed=3, **(KNOBS | {"nodes": 1}))
    files = read_files(gt.bundle_path)
    name = sorted(n for n in files if n.endswith((".json", ".json.gz")))[0]
    d = load_json(files[name])
    d["traceEvents"] = d["traceEvents"][:-1]  # other content, same process, same span: not a window
    files[name.split(".json")[0] + ".copy.json"] = json.dumps(d).encode()
    pack(files, tmp_path / "b", "dir")
    res = api.ingest([tmp_path / "b" / "bundle"], store=tmp_path / "s")
    store = api.open_store(tmp_path / "s", job=res.job)
    assert store.sql("SELECT count(*) AS n FROM ranks")["n"][0] == 5
    assert "duplicate_rank" in store.sql("SELECT code FROM ingest_warnings")["code"].to_list()


def test_split_trace_keeps_metadata_in_both_windows_and_leaves_short_or_cut_traces_whole(tmp_path: Path) -> None:
    ev = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}]
    ev += [{"ph": "X", "name": f"ProfilerStep#{i}", "ts": 100 * i, "dur": 90, "pid": 1, "tid": 1} for i in range(5)]
    ev += [{"ph": "X", "name": "k", "cat": "kernel", "ts": 100 * i + 95, "dur": 10, "pid": 0, "tid": 7} for i in range(5)]
    data = json.dumps({"traceEvents": ev}).encode()
    a, b = split_trace(data, 2, 1)  # type: ignore[misc]
    ea, eb = json.loads(a)["traceEvents"], json.loads(b)["traceEvents"]
    assert [e["name"] for e in ea] == ["process_name", "ProfilerStep#0", "ProfilerStep#1", "k", "k"]
    assert [e["name"] for e in eb] == ["process_name", "ProfilerStep#3", "ProfilerStep#4", "k", "k"]
    assert split_trace(data, 3, 2) is None  # no step left for a second window
    assert split_trace(data[:-40], 2, 1) is None  # cut mid-file


def test_unprofiled_time_is_what_no_rank_s_step_covers() -> None:
    w = pl.DataFrame({"rank": [0, 0, 1, 1, 0], "start_ns": [0, 10, 2, 50, 60], "end_ns": [10, 20, 21, 60, 70]})
    assert unprofiled_ns(w) == 29.0  # 21 .. 50
    assert unprofiled_ns(w.filter(pl.col("start_ns") < 50)) == 0.0


def test_the_generator_writes_windows_that_the_analysis_reads_as_one_job(tmp_path: Path) -> None:
    gt = generate("intermittent_straggler", out=tmp_path, seed=5, **(KNOBS | dict(steps=6, windows=1)))
    cut = gt.bundle["profiling_windows"]
    assert cut == {"first_steps": 3, "skipped_steps": 1, "traces_split": 8}  # step 3 is the first no stall falls in
    assert len([n for n in read_files(gt.bundle_path) if ".pt.trace.json" in n]) == 16
    top = _top(api.postmortem(gt.bundle_path, store=tmp_path / "s"))
    assert top is not None and top["cause"] == "synchronization" and top["ranks"] == gt.culprit_ranks
