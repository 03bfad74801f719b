"""FAB005 on crafted inter-node transfer tables.

No generated job has a fabric that stops scaling (the generator models no congestion), so the
rule's decision is tested on the table it reads — inter-node instances with their host counts
and bus bandwidths — and a what-if that charges exactly the transfer time saved.
"""

from __future__ import annotations

from types import SimpleNamespace

import polars as pl
import pytest

from stallscope.rules.fabric import bandwidth_scaling
from stallscope.rules.fabric.bandwidth_scaling import BandwidthScalingCollapse

MiB = 1 << 20


def _inter(bw_by_hosts: dict[int, float], *, per_group: int = 6, nbytes: int = 64 * MiB) -> pl.DataFrame:
    rows = []
    for hosts, bw in bw_by_hosts.items():
        for _ in range(per_group):
            n = hosts * 8
            f = 2 * (n - 1) / n
            rows.append({"instance_id": len(rows), "op": "allreduce", "bytes": nbytes, "hosts": hosts, "bus_factor": f,
                         "busbw_gbps": bw, "transfer_ns": int(nbytes * f / bw)})
    return pl.DataFrame(rows)


class _Ctx:
    """What FAB005 reads from a Context: the job's ranks and hosts, and a what-if that returns the
    transfer time saved as a share of a 1-second job."""

    def __init__(self, inter: pl.DataFrame) -> None:
        self.inter = inter
        self.d = SimpleNamespace(ranks=pl.DataFrame({"rank": list(range(32))}), hosts=[f"h{i}" for i in range(4)])
        self.quality = 1.0
        self.where = "job = 'x'"
        self.timeline = SimpleNamespace(inst_ids=inter["instance_id"].to_numpy())

    def lost_if_transfers(self, key: str, fix: dict[int, float]) -> float:
        rec = dict(zip(range(self.inter.height), self.inter["transfer_ns"].to_list()))
        return float(sum(max(0.0, rec[p] - t) for p, t in fix.items()) / 1e9)


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def check(inter: pl.DataFrame) -> list:  # type: ignore[type-arg]
        monkeypatch.setattr(bandwidth_scaling, "inter_transfers", lambda ctx: inter)
        return BandwidthScalingCollapse().check(_Ctx(inter))  # type: ignore[arg-type]
    return check


def test_fires_when_bus_bandwidth_collapses_with_more_nodes(run) -> None:  # type: ignore[no-untyped-def]
    out = run(_inter({2: 20.0, 4: 6.0}))
    assert len(out) == 1
    f = out[0]
    assert f.rule == "FAB005" and f.cause == "fabric"
    assert "2 to 4 nodes" in f.title
    # the what-if runs the 4-node transfers at the 2-node bandwidth: 6 transfers, each 70 % shorter
    t4 = 64 * MiB * (2 * 31 / 32) / 6.0
    expected = 6 * t4 * (1 - 6.0 / 20.0) / 1e9
    assert f.lost_time_fraction == pytest.approx(expected, abs=2e-4)
    assert f.evidence and "collective" in f.evidence[0].sql


@pytest.mark.parametrize("bws", [{2: 20.0, 4: 16.0}, {4: 6.0}, {2: 20.0, 4: 12.0}])
def test_silent_when_bandwidth_scales_or_nothing_to_compare(run, bws) -> None:  # type: ignore[no-untyped-def]
    assert run(_inter(bws)) == []


def test_silent_with_a_single_instance_per_size(run) -> None:  # type: ignore[no-untyped-def]
    assert run(_inter({2: 20.0, 4: 6.0}, per_group=1)) == []


def test_sizes_are_compared_only_with_themselves(run) -> None:  # type: ignore[no-untyped-def]
    """Small messages are slower at any scale: a 2-node 64 MiB vs a 4-node 1 MiB is no collapse."""
    a = _inter({2: 20.0}, nbytes=64 * MiB)
    b = _inter({4: 6.0}, nbytes=1 * MiB).with_columns(pl.col("instance_id") + a.height)
    assert run(pl.concat([a, b])) == []

