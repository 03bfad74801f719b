"""Which collective instances lack a member that may have come last (``absent``): their transfer
is no bandwidth."""

from __future__ import annotations

import polars as pl

from stallscope.analysis.collectives import declared_ranks, group_width, transfer_measured, with_absent

MS = 1_000_000


def _inst(rows: list[tuple[str, str, int, int, int, int]]) -> pl.DataFrame:
    """(channel, op, bytes, group_size, members, transfer_ns) per instance."""
    return pl.DataFrame([{"instance_id": i, "channel": c, "op": op, "bytes": b, "group_size": g, "members": n,
                          "transfer_ns": t} for i, (c, op, b, g, n, t) in enumerate(rows)])


def test_declared_ranks_come_from_process_group_channels_only() -> None:
    ch = pl.DataFrame({"channel": ["pg:0:0,1,2,3", "pg:1d74_2:4,5", "pg:7", "stream:12", "p2p:0->4"]})
    assert ch.select(declared_ranks())["channel"].to_list() == [[0, 1, 2, 3], [4, 5], None, None, None]


def test_a_rank_without_a_trace_makes_instances_absent_only_where_they_waited() -> None:
    present = pl.Series([0, 1, 2, 3, 4])  # rank 5 left no trace; rank 6 neither
    inst = _inst([
        ("pg:1:0,3", "allreduce", 1 << 24, 2, 2, 3 * MS),      # complete: the reference for the same op and size
        ("pg:1:0,3", "allreduce", 1 << 24, 2, 2, 3 * MS),
        ("pg:2:1,5", "allreduce", 1 << 24, 2, 1, 7 * MS),      # rank 5 came last: 4 ms of waiting
        ("pg:3:2,5", "allreduce", 1 << 24, 2, 1, int(3.2 * MS)),  # within the noise of complete ones
        ("pg:4:4,6", "allreduce", 1 << 20, 2, 1, 9 * MS),      # no complete group of this size: kept
        ("pg:5:0,1,2,3", "allreduce", 1 << 24, 4, 3, 8 * MS),  # rank 3 in the bundle, cut before: channel fuller earlier
        ("pg:5:0,1,2,3", "allreduce", 1 << 24, 4, 4, 3 * MS),
        ("p2p:0->4", "send", 1 << 20, 8, 2, 5 * MS),           # a pair: its group size is its process group's
    ])
    got = with_absent(inst, present)
    assert got["absent"].to_list() == [False, False, True, False, False, True, False, False]
    measured = got.filter(transfer_measured())["instance_id"].to_list()
    assert measured == [0, 1, 6, 7]  # single-member instances never measure a transfer
    assert got.with_columns(group_width())["width"].to_list() == [2, 2, 2, 2, 2, 4, 4, 2]


def test_groups_without_a_declared_size_take_their_family_s_fullest() -> None:
    """Traces without collective metadata: the tensor-parallel groups of one NCCL stream, told apart
    by their first rank, are one group of the program per host; a host with three of its eight
    traces missing still runs groups of eight."""
    inst = pl.DataFrame({"channel": ["stream:24#0", "stream:24#8", "stream:24#16", "stream:28#0", "cpu"],
                         "op": ["allreduce"] * 5, "group_size": [None] * 5, "members": [8, 5, 8, 3, 2]},
                        schema_overrides={"group_size": pl.Int32})
    assert inst.select(group_width())["width"].to_list() == [8, 8, 8, 3, 2]


def test_a_cut_member_of_a_group_without_a_declared_size_is_absent() -> None:
    """Traces without collective metadata: rank 5's trace ends, and its partner's all-reduce on
    ``stream:28#1`` runs alone, its 24 ms mostly waiting for the cut rank; a channel whose every
    instance lacks members (ranks that left no trace) keeps its transfers."""
    inst = pl.DataFrame({"channel": ["stream:28#1", "stream:28#1", "stream:28#0", "stream:24#8", "stream:24#8"],
                         "op": ["allreduce"] * 5, "bytes": [1 << 24] * 5, "group_size": [None] * 5,
                         "members": [2, 1, 2, 5, 5], "transfer_ns": [4 * MS, 24 * MS, 4 * MS, 3 * MS, 3 * MS]},
                        schema_overrides={"group_size": pl.Int32})
    got = with_absent(inst.with_row_index("instance_id"), pl.Series([0, 1, 4, 5]))
    assert got["absent"].to_list() == [False, True, False, False, False]



def test_a_pair_with_one_end_recorded_crosses_hosts_where_the_other_end_lives_elsewhere() -> None:
    """Rank 5 left no trace; hosts hold blocks of four ranks, so it was on host b with ranks 4, 6
    and 7. Rank 1's sends to it cross hosts; rank 2's to rank 3 (cut, recorded on host a) do
    not; where the placement tells nothing (ranks interleaved), the scope stays as recorded."""
    from stallscope.analysis.collectives import traceless_hosts, with_partner_scope

    hosts = {0: "a", 1: "a", 2: "a", 3: "a", 4: "b", 6: "b", 7: "b"}
    assert traceless_hosts(hosts, 8) == {5: "b"}
    assert traceless_hosts({0: "a", 1: "b", 2: "a", 3: "b", 4: "a", 6: "a", 7: "b"}, 8) == {}
    inst = pl.DataFrame({"channel": ["p2p:1->5", "p2p:5->1", "p2p:2->3", "p2p:0->4", "pg:0:0,1,2,3"],
                         "op": ["send", "recv", "send", "send", "allreduce"], "members": [1, 1, 1, 2, 3],
                         "last_rank": [1, 1, 2, 4, 2], "scope": ["intra", "intra", "intra", "inter", "intra"]})
    got = with_partner_scope(inst, hosts | traceless_hosts(hosts, 8))
    assert got["scope"].to_list() == ["inter", "inter", "intra", "inter", "intra"]
    assert with_partner_scope(inst, {0: "a", 1: "a", 2: "a", 3: "a", 4: "b"})["scope"].to_list() == inst["scope"].to_list()
