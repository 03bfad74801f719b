"""Clock offsets: recovered from collective end times, robust to stragglers and outliers."""

from __future__ import annotations

import numpy as np
import pytest
import polars as pl

from stallscope.analysis.clock import estimate_offsets


def _job(offsets_ns: dict[str, int], *, ranks_per_host: int = 4, instances: int = 200, seed: int = 0,
         outlier_share: float = 0.05) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    hosts = list(offsets_ns)
    ranks = pl.DataFrame({"rank": list(range(len(hosts) * ranks_per_host)),
                          "host": [h for h in hosts for _ in range(ranks_per_host)],
                          "base_time_ns": [None] * (len(hosts) * ranks_per_host)}, schema_overrides={"base_time_ns": pl.Int64})
    rows = []
    t = 5_000_000_000
    for i in range(instances):
        t += int(rng.integers(1_000_000, 30_000_000))
        for r, h in enumerate(ranks["host"].to_list()):
            end = t + offsets_ns[h] + int(rng.normal(0, 1500))  # µs-level end jitter
            if rng.random() < outlier_share:  # a member whose kernel ended much later (preempted)
                end += int(rng.integers(200_000, 5_000_000))
            rows.append({"instance_id": i, "host": h, "op": "allreduce", "end_ns": end})
    return pl.DataFrame(rows), ranks


def test_recovers_offsets_within_10us() -> None:
    truth = {"node-a": 0, "node-b": 37_512_345, "node-c": -12_000_777, "node-d": 86_400_000_000_000}  # a day apart too
    rows, ranks = _job(truth)
    off = estimate_offsets(rows, ranks)
    got = dict(zip(off["host"].to_list(), off["offset_ns"].to_list()))
    for h, c in truth.items():
        assert abs(got[h] - (-c)) <= 10_000, (h, got[h], -c)
    ref = off.filter(pl.col("reference"))
    assert ref["host"].to_list() == ["node-a"]
    assert set(off.filter(~pl.col("reference"))["method"]) == {"collective_end"}
    assert (off["spread_ns"] < 10_000).all()


def test_disconnected_host_is_reported_not_guessed() -> None:
    truth = {"a": 0, "b": 5_000_000}
    rows, ranks = _job(truth)
    ranks = pl.concat([ranks, pl.DataFrame({"rank": [99], "host": ["lonely"], "base_time_ns": [None]},
                                           schema_overrides={"base_time_ns": pl.Int64})])
    off = estimate_offsets(rows, ranks)
    lonely = off.filter(pl.col("host") == "lonely").row(0, named=True)
    assert lonely["method"] == "none" and lonely["instances"] == 0


def test_point_to_point_rows_are_not_used() -> None:
    truth = {"a": 0, "b": 5_000_000}
    rows, ranks = _job(truth)
    rows = rows.with_columns(pl.lit("send").alias("op"))
    off = estimate_offsets(rows, ranks)
    assert off.filter(pl.col("host") == "b")["method"][0] == "none"


def _moe_job(offsets_ns: dict[str, int], *, world: int, slow_host: str = "b", seed: int = 1) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Expert-parallel groups {a, b} and {c, d} exchange all-to-alls; data-parallel all-reduces
    pair a with c and b with d; ``world`` world-wide all-reduces link the two. ``slow_host``'s
    all-to-alls end 3-6 ms after its partner's (its intra-host pairs are on SHM)."""
    rng = np.random.default_rng(seed)
    hosts = list(offsets_ns)
    ranks = pl.DataFrame({"rank": list(range(len(hosts))), "host": hosts, "base_time_ns": [None] * len(hosts)},
                         schema_overrides={"base_time_ns": pl.Int64})
    rows: list[dict[str, object]] = []
    t, iid = 5_000_000_000, 0

    def add(op: str, members: list[str], lag: dict[str, int]) -> None:
        nonlocal iid
        starts = {h: t - int(rng.integers(100_000, 3_000_000)) for h in members}
        for h in members:
            end = t + lag.get(h, 0) + int(rng.normal(0, 1500))
            rows.append({"instance_id": iid, "host": h, "op": op, "start_ns": starts[h] + offsets_ns[h], "end_ns": end + offsets_ns[h]})
        iid += 1

    for step in range(40):
        t += 20_000_000
        add("alltoall", ["a", "b"], {slow_host: int(rng.integers(3_000_000, 6_000_000))})
        add("alltoall", ["c", "d"], {})
        t += 5_000_000
        add("allreduce", ["a", "c"], {})
        add("allreduce", ["b", "d"], {})
        if step < world:
            t += 5_000_000
            add("allreduce", hosts, {})
    return pl.DataFrame(rows), ranks


def test_blocks_linked_by_few_world_collectives_are_placed_by_them() -> None:
    # data-parallel pairs (a-c, b-d) outnumber the world all-reduces 40 to 1 on every host: the
    # pairs fit any common shift of {b, d}, only the world ones pin it
    truth = {"a": 0, "b": 1_313_530, "c": -6_164_856, "d": 2_809_918}
    rows, ranks = _moe_job(truth, world=1)
    got = dict(zip(*estimate_offsets(rows, ranks).select("host", "offset_ns").to_dict(as_series=False).values()))
    for h, c in truth.items():
        assert abs(got[h] - (-c)) <= 10_000, (h, got[h], -c)


def test_all_to_alls_only_bracket_the_offset() -> None:
    # no world collective: {b, d} is reached only through all-to-alls, whose members do not end
    # together (b's end 3-6 ms late); their causality bracket places b within its width, not 3-6 ms off
    truth = {"a": 0, "b": 1_313_530, "c": -6_164_856, "d": 2_809_918}
    rows, ranks = _moe_job(truth, world=0)
    off = estimate_offsets(rows, ranks)
    got = dict(zip(off["host"].to_list(), off["offset_ns"].to_list()))
    assert off.filter(pl.col("host") == "b")["method"][0] == "a2a"
    assert abs(got["b"] - (-truth["b"])) <= off.filter(pl.col("host") == "b")["spread_ns"][0] + 10_000
    assert abs(got["b"] - (-truth["b"])) < 3_000_000  # closer than the end times' 3-6 ms lag would put it


def test_hosts_are_inferred_around_a_rank_without_a_trace() -> None:
    """Ranks 0-3 and 4-7 share a clock each (5 ms apart); rank 6 left no trace. The blocks are
    judged on the ranks they hold, so the world (the largest rank + 1, or the declared size) still
    splits into two hosts of four; with more than a quarter of the world missing, no guess."""
    from stallscope.analysis.clock import infer_hosts

    def case(present: list[int], world: int | None) -> dict[int, str]:
        off = pl.DataFrame({"host": [f"rank-{r}" for r in present],
                            "offset_ns": [(0 if r < 4 else 5_000_000) + (0, 150, 80, 120)[r % 4] for r in present],
                            "method": ["collective_end"] * len(present)})
        ranks = pl.DataFrame({"rank": present, "host": [None] * len(present), "world_size": [world] * len(present)},
                             schema={"rank": pl.Int64, "host": pl.String, "world_size": pl.Int32})
        return infer_hosts(off, ranks)

    got = case([0, 1, 2, 3, 4, 5, 7], None)
    assert got == {0: "host-of-ranks-0-3", 1: "host-of-ranks-0-3", 2: "host-of-ranks-0-3", 3: "host-of-ranks-0-3",
                   4: "host-of-ranks-4-7", 5: "host-of-ranks-4-7", 7: "host-of-ranks-4-7"}
    # the last rank missing: the declared world size keeps the blocks whole
    assert case([0, 1, 2, 3, 4, 5, 6], 8)[6] == "host-of-ranks-4-7"
    assert case([0, 1, 2, 4, 5], 8) == {}  # more than a quarter missing


def test_ranks_without_a_host_join_the_known_host_whose_clock_they_share() -> None:
    """Hosts of four, clocks 5 ms apart; one host's log named ranks 8, 10 and 11 (rank 9 shares
    its clock, its host unknown), every other rank is unknown. The unknown ranks form blocks of
    four; rank 9 gets the known host's name. A known host whose ranks cross two blocks of every
    candidate size stops the guess."""
    from stallscope.analysis.clock import infer_hosts

    def case(known: dict[int, str]) -> dict[int, str]:
        noise = (0, 150, 80, 120)
        hosts = {f"rank-{r}": (r // 4) * 5_000_000 + noise[r % 4] for r in range(16) if r not in known}
        for r, h in known.items():
            hosts[h] = (r // 4) * 5_000_000
        off = pl.DataFrame({"host": list(hosts), "offset_ns": list(hosts.values()), "method": ["collective_end"] * len(hosts)})
        ranks = pl.DataFrame({"rank": list(range(16)), "host": [known.get(r) for r in range(16)], "world_size": [16] * 16},
                             schema={"rank": pl.Int64, "host": pl.String, "world_size": pl.Int32})
        return infer_hosts(off, ranks)

    got = case({8: "ip-a", 10: "ip-a", 11: "ip-a"})
    assert got[9] == "ip-a" and got[0] == got[3] == "host-of-ranks-0-3" and got[15] == "host-of-ranks-12-15"
    assert set(got) == set(range(16)) - {8, 10, 11}
    assert case({0: "a", 15: "a"}) == {}


@pytest.mark.parametrize("per_host", [6, 8])
def test_the_largest_block_inside_hosts_wins_not_the_first_to_straddle(per_host: int) -> None:
    """48 ranks, hosts of 6 or 8, rank 23 without a trace. With hosts of 8, blocks of 3 straddle
    hosts while blocks of 4 and 8 do not; with hosts of 6, blocks of 4 straddle, 2, 3 and 6 do not."""
    from stallscope.analysis.clock import infer_hosts

    rng = np.random.default_rng(per_host)
    present = [r for r in range(48) if r != 23]
    off = pl.DataFrame({"host": [f"rank-{r}" for r in present],
                        "offset_ns": [(r // per_host) * 3_100_000 + int(rng.integers(-80, 80)) for r in present],
                        "method": ["collective_end"] * len(present)})
    ranks = pl.DataFrame({"rank": present, "host": [None] * len(present), "world_size": [48] * len(present)},
                         schema={"rank": pl.Int64, "host": pl.String, "world_size": pl.Int32})
    got = infer_hosts(off, ranks)
    assert got[22] == f"host-of-ranks-{(22 // per_host) * per_host}-{(22 // per_host) * per_host + per_host - 1}"
    assert len(set(got.values())) == 48 // per_host
