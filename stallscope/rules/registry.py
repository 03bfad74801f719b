"""The rule registry: every rule, by code. A test keeps it in sync with the rule files."""

from __future__ import annotations

from stallscope.rules.base import Rule
from stallscope.rules.fabric.bandwidth_scaling import BandwidthScalingCollapse
from stallscope.rules.fabric.degraded_nic import DegradedNic
from stallscope.rules.fabric.gdr_off import GdrOff
from stallscope.rules.fabric.low_internode_bandwidth import LowInterNodeBandwidth
from stallscope.rules.fabric.socket_fallback import SocketFallback
from stallscope.rules.input.missing_ranks import MissingRanks
from stallscope.rules.input.too_few_steps import TooFewSteps
from stallscope.rules.input.truncated_traces import TruncatedTraces
from stallscope.rules.input.unaligned_clocks import UnalignedClocks
from stallscope.rules.input.unreadable_files import UnreadableFiles
from stallscope.rules.locality.cross_socket_nic import CrossSocketNic
from stallscope.rules.locality.intra_node_bandwidth import IntraNodeBandwidthBelowPeers
from stallscope.rules.locality.p2p_disabled import P2PDisabled
from stallscope.rules.locality.slow_host import SlowHost
from stallscope.rules.synchronization.host_stall_straggler import HostStallStraggler
from stallscope.rules.synchronization.intermittent_straggler import IntermittentStraggler
from stallscope.rules.synchronization.jitter_amplification import JitterAmplification
from stallscope.rules.synchronization.straggler_rank import StragglerRank

RULES: dict[str, type[Rule]] = {r.code: r for r in (
    LowInterNodeBandwidth, SocketFallback, GdrOff, DegradedNic, BandwidthScalingCollapse,
    StragglerRank, IntermittentStraggler, JitterAmplification, HostStallStraggler,
    SlowHost, IntraNodeBandwidthBelowPeers, P2PDisabled, CrossSocketNic,
    MissingRanks, TruncatedTraces, UnalignedClocks, TooFewSteps, UnreadableFiles,
)}


def get(code: str) -> type[Rule]:
    from stallscope.errors import UsageError

    try:
        return RULES[code.upper()]
    except KeyError:
        raise UsageError(f"no rule {code!r}; see `stallscope rules`") from None


def rules_markdown() -> str:
    """docs/rules.md: every rule's documentation, as `stallscope rules show CODE` prints it."""
    lines = ["# Rules", "", "Generated from the rule docstrings by `python -m stallscope.docs`; "
             "`stallscope rules show CODE` prints the same text.", "",
             "| code | name | cause |", "|---|---|---|"]
    lines += [f"| [{c}](#{c.lower()}) | {r.name} | {r.cause} |" for c, r in RULES.items()]
    lines.append("")
    for c, r in RULES.items():
        lines += [f"## {c}", "", f"**{r.name}** — cause: `{r.cause}` — `{r.__module__.replace('.', '/')}.py`", "", r.doc(), ""]
    return "\n".join(lines)
