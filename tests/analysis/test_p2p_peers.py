"""Point-to-point pairs when the trace does not name the peer (PyTorch before Src/Dst Rank)."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest

from stallscope.analysis.collectives import match_rows

STAGES = [0, 4, 8, 12]  #: a pipeline group, listed by stage


def _rows(layout: str) -> pl.DataFrame:
    """One step of GPipe over 4 stages, 2 micro-batches: forward sends activations to the next
    stage, backward sends gradients to the previous one. ``pair``: one stream per peer pair
    (PyTorch's per-pair communicators); ``oneway``: a stream per direction and neighbour."""
    rows = []
    t = 0

    def add(rank: int, op: str, peer: int) -> None:
        nonlocal t
        t += 1000
        i = STAGES.index(rank)
        j = STAGES.index(peer)
        if layout == "pair":
            stream = 20 + min(i, j)  # the pair's communicator (ids differ from rank to rank in reality)
        else:
            stream = {("recv", -1): 31, ("send", 1): 32, ("recv", 1): 33, ("send", -1): 34}[(op, j - i)]
        rows.append({"rank": rank, "op": op, "peer": None, "pg_name": "pp", "pg_ranks": STAGES, "stream": stream, "step": 7,
                     "start_ns": t, "end_ns": t + 500, "cpu_start_ns": None, "seq": None, "source": "nccl_kernel", "bytes": 1 << 20,
                     "group_size": 4, "truth": peer})

    for mb in range(2):  # forward
        for i in range(3):
            add(STAGES[i], "send", STAGES[i + 1])
            add(STAGES[i + 1], "recv", STAGES[i])
    for mb in range(2):  # backward
        for i in range(3, 0, -1):
            add(STAGES[i], "send", STAGES[i - 1])
            add(STAGES[i - 1], "recv", STAGES[i])
    return pl.DataFrame(rows, schema_overrides={"peer": pl.Int32, "pg_ranks": pl.List(pl.Int32), "rank": pl.Int32})


@pytest.mark.parametrize("layout", ["pair", "oneway"])
def test_pipeline_peers_are_inferred(layout: str) -> None:
    rows = _rows(layout)
    con = duckdb.connect()
    collectives = rows.drop("truth").to_arrow()  # noqa: F841 - read by DuckDB
    ranks = pl.DataFrame({"rank": STAGES, "host": [f"h{i}" for i in range(4)]}, schema_overrides={"rank": pl.Int32}).to_arrow()  # noqa: F841
    con.execute("CREATE TABLE collectives AS SELECT * FROM collectives")
    con.execute("CREATE TABLE ranks AS SELECT * FROM ranks")
    out = match_rows(con)
    want = rows.select("rank", "op", "start_ns", pl.when(pl.col("op") == "send").then(pl.format("p2p:{}->{}", "rank", "truth"))
                       .otherwise(pl.format("p2p:{}->{}", "truth", "rank")).alias("want"))
    got = out.join(want, on=["rank", "op", "start_ns"])
    assert got.height == rows.height
    assert (got["channel"] == got["want"]).all(), got.filter(pl.col("channel") != pl.col("want"))
    # each message is one instance of two members: the send and its receive
    assert out.group_by("instance_id").agg(pl.col("op").sort().str.join(",")).get_column("op").unique().to_list() == ["recv,send"]


def test_unknown_peer_pairs_with_nobody() -> None:
    """A middle stage whose streams cannot be told apart keeps its messages out of any instance."""
    rows = _rows("oneway").with_columns(pl.when(pl.col("rank") == 4).then(99).otherwise(pl.col("stream")).alias("stream"))
    con = duckdb.connect()
    collectives = rows.drop("truth").to_arrow()  # noqa: F841
    ranks = pl.DataFrame({"rank": STAGES, "host": [f"h{i}" for i in range(4)]}, schema_overrides={"rank": pl.Int32}).to_arrow()  # noqa: F841
    con.execute("CREATE TABLE collectives AS SELECT * FROM collectives")
    con.execute("CREATE TABLE ranks AS SELECT * FROM ranks")
    out = match_rows(con)
    mine = out.filter(pl.col("rank") == 4)
    assert mine["channel"].str.starts_with("p2p:?4").all()
    sizes = out.group_by("instance_id").agg(pl.len().alias("n"))
    assert sizes["n"].max() <= 2
