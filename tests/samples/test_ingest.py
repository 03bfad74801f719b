"""Generated bundles ingest cleanly: ranks, hosts, kernels, collectives and steps as planned."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from stallscope.api import ingest, open_store
from stallscope.samples import GroundTruth, generate


def _ingest(t: GroundTruth, store: Path):  # type: ignore[no-untyped-def]
    res = ingest([t.bundle_path], store=store, workers=1)
    return res, open_store(store, job=res.job)


@pytest.mark.parametrize("sc", ["healthy", "healthy_imbalanced", "socket_fallback", "compute_straggler"])
def test_bundle_ingests_with_the_planned_shape(bundles: dict[str, GroundTruth], tmp_path: Path, sc: str) -> None:
    t = bundles[sc]
    res, st = _ingest(t, tmp_path / "store")
    W = t.job["world_size"]
    assert res.ranks == W
    ranks = st.sql("SELECT rank, host, world_size, steps, collectives FROM ranks ORDER BY rank")
    assert ranks["rank"].to_list() == list(range(W))
    assert set(ranks["world_size"].to_list()) == {W}
    assert set(ranks["steps"].to_list()) == {t.knobs["steps"]}
    hosts = ranks["host"].to_list()
    if t.bundle["host_recoverable_from"] and hosts[0] is not None and "trace.host_name" in t.bundle["host_recoverable_from"]:
        assert hosts == t.job["rank_host"]
    steps = st.sql("SELECT DISTINCT step FROM steps ORDER BY step")["step"].to_list()
    assert steps == t.job["steps"]
    # collectives per rank and step, as the schedule planned
    got = st.sql("SELECT rank, op, count(*) AS n FROM collectives GROUP BY rank, op")
    steps_n = t.knobs["steps"]
    for r, op, n in got.iter_rows():
        want = t.job["collectives_per_rank_step"][str(r)]
        assert n == want.get(op, 0) * steps_n, (r, op, n, want)
    counts = Counter(got["rank"].to_list())
    assert len(counts) == W


def test_collectives_carry_group_and_seq(bundles: dict[str, GroundTruth], tmp_path: Path) -> None:
    t = bundles["degraded_nic"]
    _, st = _ingest(t, tmp_path / "store")
    df = st.sql("SELECT pg_name, seq, count(*) AS n, min(bytes) AS b FROM collectives GROUP BY pg_name, seq")
    groups = {g["name"]: len(g["ranks"]) for g in t.job["process_groups"]}
    assert df.height > 0
    for pg, seq, n, b in df.iter_rows():
        assert seq is not None and n == groups[pg] and b > 0


def test_old_profiler_without_metadata_still_ingests(bundles: dict[str, GroundTruth], tmp_path: Path) -> None:
    t = bundles["socket_fallback"]
    assert t.knobs["torch_variant"] == "kineto_2022" and t.knobs["naming"] == "arbitrary"
    _, st = _ingest(t, tmp_path / "store")
    df = st.sql("SELECT count(*) AS n, count(pg_name) AS with_pg, count(seq) AS with_seq FROM collectives")
    n, with_pg, with_seq = df.row(0)
    assert n > 0 and with_pg == 0 and with_seq == 0


def test_logs_are_recognised_as_nccl_logs(bundles: dict[str, GroundTruth], tmp_path: Path) -> None:
    t = bundles["healthy"]
    _, st = _ingest(t, tmp_path / "store")
    kinds = dict(st.sql("SELECT kind, count(*) FROM files GROUP BY kind").iter_rows())
    assert kinds.get("kineto") == t.job["world_size"]
    assert kinds.get("nccl_log") == sum(len(v) for v in t.bundle["nccl_logs"].values())


def test_host_comes_from_the_tensorboard_file_name(tmp_path: Path) -> None:
    t = generate("healthy", out=tmp_path, seed=4, nodes=2, gpus=4, steps=2, detail="sparse", logs="none",
                 naming="tensorboard", torch_variant="kineto_2024", archive="zip", truncate=0, drop=0, windows=0, step_marks=True)
    _, st = _ingest(t, tmp_path / "store")
    df = st.sql("SELECT rank, host, host_source FROM ranks ORDER BY rank")
    assert df["host"].to_list() == t.job["rank_host"]
    assert set(df["host_source"].to_list()) == {"file_name"}


def test_truncated_traces_keep_their_complete_events(tmp_path: Path) -> None:
    t = generate("compute_straggler", out=tmp_path, seed=2, nodes=2, gpus=4, steps=3, detail="sparse", logs="none",
                 truncate=2, archive="dir", torch_variant="kineto_2025")
    cut = {int(r) for r in t.bundle["truncated_traces"]}
    assert len(cut) == 2 and not cut & set(t.culprit_ranks)
    res, st = _ingest(t, tmp_path / "store")
    assert res.ranks == t.job["world_size"]
    got = st.sql("SELECT rank, truncated FROM ranks ORDER BY rank")
    assert {r for r, tr in got.iter_rows() if tr} == cut
