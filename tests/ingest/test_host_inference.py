"""Hosts of ranks whose traces do not name them: blocks of a known host's size, or of the GPUs driven."""

from __future__ import annotations

from typing import Any

from stallscope.ingest.pipeline import _device_blocks, _infer_blocks


def _rows(devices: list[int | None], *, count: int | None = None, hosts: dict[int, str] | None = None) -> list[dict[str, Any]]:
    return [{"rank": r, "device_id": d, "device_count": count, "host": (hosts or {}).get(r), "host_source": None}
            for r, d in enumerate(devices)]


def test_ranks_driving_gpus_0_to_g_minus_1_in_turn_form_hosts() -> None:
    rows = _rows([0, 1, 2, 3] * 3, count=4)
    _device_blocks(rows)
    assert [r["host"] for r in rows] == ["host-of-ranks-0-3"] * 4 + ["host-of-ranks-4-7"] * 4 + ["host-of-ranks-8-11"] * 4
    assert {r["host_source"] for r in rows} == {"device"}


def test_no_device_pattern_no_hosts() -> None:
    for rows in (_rows([0] * 8),  # one GPU visible per process: says nothing
                 _rows([0, 1, 2, 3, 0, 1, 3, 2]),  # not rank mod G
                 _rows([0, 1, 2, 3, 4, 5]),  # world not a multiple of G... G = 6 = world: one host is fine
                 _rows([0, 1, None, 3]),  # a rank without GPU activity
                 _rows([0, 1, 2, 3] * 2, count=2)):  # a process that sees 2 GPUs cannot drive device 3
        before = [r["host"] for r in rows]
        _device_blocks(rows)
        if [r["device_id"] for r in rows] == [0, 1, 2, 3, 4, 5]:
            assert {r["host"] for r in rows} == {"host-of-ranks-0-5"}
        else:
            assert [r["host"] for r in rows] == before


def test_known_hosts_win_over_devices() -> None:
    rows = _rows([0, 1, 0, 1], hosts={0: "a", 1: "a"})
    _infer_blocks(rows)
    _device_blocks(rows)
    assert [r["host"] for r in rows] == ["a", "a", "host-of-ranks-2-3", "host-of-ranks-2-3"]
    assert rows[2]["host_source"] == "inferred"


def test_device_blocks_hold_around_a_rank_without_a_trace() -> None:
    """Rank 5 left no trace: the others still drive device ``r mod 4``, so the blocks stand; the
    last rank missing needs the declared world size. More than a quarter of the world missing: no guess."""
    rows = [r for r in _rows([0, 1, 2, 3] * 3, count=4) if r["rank"] != 5]
    _device_blocks(rows)
    assert {r["rank"]: r["host"] for r in rows}[4] == "host-of-ranks-4-7" and len({r["host"] for r in rows}) == 3
    last = [r | {"world_size": 12} for r in _rows([0, 1, 2, 3] * 3, count=4) if r["rank"] != 11]
    _device_blocks(last)
    assert {r["host"] for r in last} == {"host-of-ranks-0-3", "host-of-ranks-4-7", "host-of-ranks-8-11"}
    sparse = [r for r in _rows([0, 1, 2, 3] * 3, count=4) if r["rank"] not in (1, 5, 9, 10)]
    _device_blocks(sparse)
    assert {r["host"] for r in sparse} == {None}


def test_device_blocks_beside_a_host_known_from_its_log() -> None:
    """Seed 31000 #0187: the NCCL log of one host named ranks 8, 10 and 11 (rank 9 left no trace),
    the other twelve ranks had no host; all drive device ``r mod 4``: blocks of four, the known
    host's own named after it."""
    rows = [r for r in _rows([0, 1, 2, 3] * 4, count=4, hosts={8: "ip-a", 10: "ip-a", 11: "ip-a"}) if r["rank"] != 9]
    _infer_blocks(rows)  # three of four ranks known: no contiguous block to extend
    assert {r["rank"]: r["host"] for r in rows}[0] is None
    _device_blocks(rows)
    by = {r["rank"]: (r["host"], r["host_source"]) for r in rows}
    assert by[0] == ("host-of-ranks-0-3", "device") and by[7] == ("host-of-ranks-4-7", "device")
    assert by[8] == ("ip-a", None) and by[15] == ("host-of-ranks-12-15", "device")


def test_known_hosts_that_are_not_device_blocks_stop_the_guess() -> None:
    """A known host across two blocks of G, or two known hosts in one: devices do not give hosts."""
    for hosts in ({0: "a", 4: "a"}, {0: "a", 1: "b"}):
        rows = _rows([0, 1, 2, 3] * 2, count=4, hosts=hosts)
        _device_blocks(rows)
        assert [r["host"] for r in rows] == [hosts.get(i) for i in range(8)]
