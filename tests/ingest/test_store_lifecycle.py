"""Idempotent re-ingest, content-derived job ids, atomic publish."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import stallscope
from stallscope.api import ingest
from stallscope.store.layout import StoreLayout
from tests.conftest import LOGS, TRACES

GLOO = TRACES / "cpu_gloo"


def test_reingest_is_a_noop(store: Path) -> None:
    a = ingest([GLOO], store=store, analyze=False)
    meta = StoreLayout.at(store).job_dir(a.job) / "_job.json"
    before = meta.stat().st_mtime_ns
    b = ingest([GLOO], store=store, analyze=False)
    assert b.skipped and b.job == a.job
    assert meta.stat().st_mtime_ns == before
    assert StoreLayout.at(store).jobs() == [a.job]


def test_job_id_from_content_not_names(tmp_path: Path, store: Path) -> None:
    d = tmp_path / "renamed"
    d.mkdir()
    for i, p in enumerate(sorted(GLOO.glob("rank*.pt.trace.json.gz"))):
        (d / f"whatever-{i}.gz").write_bytes(p.read_bytes())
    a = ingest([d], store=store, analyze=False)
    b = ingest(sorted(GLOO.glob("rank*.pt.trace.json.gz")), store=tmp_path / "other", analyze=False)
    assert a.job == b.job


def test_interrupted_ingest_leaves_nothing_visible(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stallscope.ingest import pipeline

    def boom(*a: object, **k: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "_reconcile_ranks", boom)
    with pytest.raises(KeyboardInterrupt):
        ingest([GLOO], store=store, analyze=False)
    layout = StoreLayout.at(store)
    assert layout.jobs() == []
    assert not any(layout.root.glob("job=*"))
    assert list(layout.staging_root.iterdir()) == []
    assert stallscope.open(store).sql("SELECT count(*) n FROM events")["n"][0] == 0


def test_named_job_and_job_filter(store: Path) -> None:
    ingest([GLOO / "rank0.pt.trace.json.gz"], store=store, job="a", analyze=False)
    ingest([GLOO / "rank1.pt.trace.json.gz"], store=store, job="b", analyze=False)
    assert stallscope.open(store).sql("SELECT count(DISTINCT job) n FROM events")["n"][0] == 2
    only = stallscope.open(store, job="b").sql("SELECT DISTINCT job, rank FROM events")
    assert only.rows() == [("b", 1)]


def test_hive_layout_readable_by_other_engines(store: Path) -> None:
    import polars as pl

    ingest([GLOO], store=store, job="j1", analyze=False)
    df = pl.scan_parquet(str(store / "job=*" / "table=events" / "*.parquet"), hive_partitioning=True).select(
        pl.col("job"), pl.len()).group_by("job").agg(pl.col("len").first()).collect()
    assert df["job"].to_list() == ["j1"]
    assert os.path.exists(store / "catalog.duckdb")


def test_parallel_ingest_matches_in_process(tmp_path: Path) -> None:
    """Worker processes (the coordinator parses too) give the same tables as one process, and a
    bad file among good ones is reported without losing the others."""
    d = tmp_path / "bundle"
    d.mkdir()
    for p in sorted(GLOO.glob("rank*.pt.trace.json.gz")):
        (d / p.name).write_bytes(p.read_bytes())
    (d / "rank9.pt.trace.json").write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1},')
    # NCCL logs are parsed with polars in the workers too (which import no pandas)
    for log in sorted((LOGS / "nccl").glob("*.log"))[:3]:
        (d / log.name).write_bytes(log.read_bytes())
    (d / "junk.json.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    one = ingest([d], store=tmp_path / "one", analyze=False, workers=1)
    two = ingest([d], store=tmp_path / "two", analyze=False, workers=3)
    assert one.job == two.job and one.events == two.events and one.files == two.files
    q = "SELECT rank, count(*) AS n, sum(dur_ns) AS d FROM events GROUP BY rank ORDER BY rank"
    a = stallscope.open(tmp_path / "one").sql(q)
    b = stallscope.open(tmp_path / "two").sql(q)
    assert a.equals(b) and a.height == len(list(GLOO.glob("rank*.pt.trace.json.gz"))) + 1
    w = stallscope.open(tmp_path / "two").sql("SELECT file, code FROM ingest_warnings ORDER BY file")
    assert ("rank9.pt.trace.json", "truncated") in w.rows()
    assert any(f == "junk.json.gz" for f, _ in w.rows())
    files = stallscope.open(tmp_path / "two").sql("SELECT file, kind, status FROM files WHERE kind = 'nccl_log'")
    assert files.height == 3 and set(files["status"]) == {"ok"}, files
    assert stallscope.open(tmp_path / "two").sql("SELECT count(*) AS n FROM nccl_comms")["n"][0] == \
        stallscope.open(tmp_path / "one").sql("SELECT count(*) AS n FROM nccl_comms")["n"][0]
