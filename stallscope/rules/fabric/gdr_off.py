"""FAB003 gdr-off."""

from __future__ import annotations

import polars as pl

from stallscope.rules.base import Evidence, Finding, Rule
from stallscope.rules.context import Context
from stallscope.rules.placement import connections


class GdrOff(Rule):
    """GPU jobs whose inter-node RDMA connections run without GPUDirect RDMA on every host.

    What it detects:
        NCCL logs in which the IB/RoCE (NET) connections of every host with logs lack the
        ``/GDRDMA`` suffix, in a job whose traces show GPU kernels. (When only one host lacks
        GDR, LOC004 reports that host.)

    Why it slows the job:
        Without GPUDirect RDMA every inter-node message is staged through host memory: extra
        copies, PCIe traffic and CPU proxy work; bandwidth drops and latency rises, most for
        the large gradient and parameter messages of data parallelism.

    Evidence it cites:
        ``nccl_connections`` (``transport = 'NET'`` and ``gdr``), ``nccl_net`` GDR lines per
        HCA, the share of step time spent in exposed inter-node communication
        (``rank_breakdown``). The time cost cannot be measured from one run without GDR, so the
        finding carries the exposed inter-node share as context and low severity unless another
        rule measures the bandwidth loss.

    How to fix:
        Load ``nvidia-peermem`` (or ``nv_peer_mem``) on the hosts, check ``NCCL_NET_GDR_LEVEL``
        and ``NCCL_NET_GDR_READ``, the GPU–NIC PCIe topology (same switch: PIX/PXB) and that the
        container sees ``/dev/infiniband``.

    Options:
        Reported only for NET connections over IB/RoCE/plugins (Socket never has GDR: FAB002).
    """

    code = "FAB003"
    name = "gdr-off"
    cause = "fabric"

    def check(self, ctx: Context) -> list[Finding]:
        conns = connections(ctx)
        if conns is None or conns.height == 0 or "gdr" not in conns.columns:
            return []
        if not (ctx.d.ranks["platform"] != "cpu").any():
            return []
        net = conns.filter((pl.col("transport") == "NET") & (pl.col("net") != "Socket") & pl.col("gdr").is_not_null()
                           & pl.col("host").is_not_null())
        if net.height == 0:
            return []
        per_host = net.group_by("host").agg(pl.col("gdr").mean().alias("gdr"))
        if float(per_host["gdr"].max()) >= 0.5:
            return []  # some host uses GDR: one host without it is locality (LOC004)
        f = ctx.features
        exposed = float((f["comm_inter_frac"]).median() or 0.0) if "comm_inter_frac" in f.columns and f.height else 0.0
        hosts = sorted(per_host["host"].to_list())
        summary = (f"None of the {net.height} inter-node RDMA connections in the NCCL logs of {len(hosts)} host(s) uses GPUDirect "
                   f"RDMA (no /GDRDMA): inter-node messages are staged through host memory. Exposed inter-node communication "
                   f"is {exposed:.1%} of the median rank's step time.")
        return [Finding(rule=self.code, cause=self.cause, title="GPUDirect RDMA is off for inter-node traffic",
                        summary=summary, ranks=ctx.d.ranks["rank"].to_list(), hosts=hosts, lost_time_fraction=None,
                        confidence=ctx.quality * 0.9,
                        evidence=[Evidence("NET connections with and without GDR, per host",
                                           f"SELECT host, gdr, count(*) AS connections FROM nccl_connections WHERE {ctx.where} "
                                           f"AND transport = 'NET' GROUP BY ALL ORDER BY host", 0.0),
                                  Evidence("exposed inter-node communication per rank",
                                           f"SELECT rank, round(comm_inter_ms / steps, 2) AS comm_inter_ms_per_step FROM rank_breakdown "
                                           f"WHERE {ctx.where} ORDER BY rank", round(exposed, 4))],
                        recommendation="Load nvidia-peermem on the hosts, check NCCL_NET_GDR_LEVEL, the GPU-NIC PCIe topology "
                                       "and that /dev/infiniband is visible in the container.",
                        severity="low" if exposed >= 0.02 else "info", details={"exposed_inter_frac": round(exposed, 4)})]
