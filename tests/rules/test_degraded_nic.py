"""FAB004's NIC-count comparison: hosts of one job are built alike."""

from __future__ import annotations

from stallscope.rules.fabric.degraded_nic import _fewer_nics


def test_a_host_listing_one_nic_fewer_than_its_peers_stands_out() -> None:
    assert _fewer_nics({"a": 4.0, "b": 3.0, "c": 4.0}) == {"b": 0.75}
    assert _fewer_nics({"a": 8.0, "b": 8.0}) == {}


def test_a_log_without_the_net_line_or_a_lone_log_says_nothing() -> None:
    assert _fewer_nics({"a": 4.0, "b": 0.0}) == {}  # b's log never printed NET/IB : Using
    assert _fewer_nics({"a": 4.0}) == {}
    # one host with more NICs than the rest does not make the others "fewer" (the median of the others)
    assert _fewer_nics({"a": 8.0, "b": 4.0, "c": 4.0, "d": 4.0}) == {}
