"""NCCL WARN lines and error traces -> ``nccl_warnings``.

A failing NCCL call prints ``file.cc:line NCCL WARN <message>`` once, then every function the
error travels through prints ``file.cc:line -> <ncclResult_t>`` as INFO (the "error trace"),
sometimes tagged with the thread (``[Proxy Thread]``). Both become rows; InfiniBand completion
errors (``Got completion from peer ..``) are decoded into the ``ib_*`` columns in all three
wordings NCCL used. The wording is a version fingerprint only when NCCL core printed it (an
external net plugin such as ``ib_plugin.c`` keeps its own wording).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stallscope.ingest import nccl_memo
from stallscope.ingest.schemas import nccl as F

if TYPE_CHECKING:  # pragma: no cover
    from stallscope.ingest.nccl_state import LogState

Host = str | None
Num = int | None
_IB_FINGERPRINTS = ("ib_completion_comma", "ib_completion_status_eq", "ib_completion_status_named")


def trace_line(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    """``transport/net.cc:1008 -> 6 [Proxy Thread]``."""
    m = F.TRACE_RE.match(msg)
    if m is None:
        return False
    rc = int(m.group("rc"))
    d = state.ctx(host, pid, tid, dev, ln)
    d.update(level="INFO", is_error_trace=True, src_file=m.group("f"), src_line=int(m.group("l")), return_code=rc,
             return_name=F.RESULTS.get(rc), thread_tag=m.group("tag"))
    state.add_dict("nccl_warnings", d)
    return True


def warn_message(state: LogState, text: str, host: Host, pid: Num, tid: Num, dev: Num, ln: int) -> bool:
    """``file.cc:line [(func)] NCCL WARN <message>``: a WARN line after its ``host:pid:tid [dev] `` (cut by the bulk
    path, :attr:`~stallscope.ingest.nccl_bulk.Block.warn`). Pure: a WARN that every rank prints is read once."""
    m = F.WARN_HEAD_RE.match(text)
    if m is None:
        return False
    warn_line(state, text[m.end():], host, pid, tid, dev, m.group("src"), m.group("sline"), m.group("func"), ln)
    return True


def warn_replay(state: LogState, text: str) -> nccl_memo.Replay | None:
    """The memo's replay of one WARN text (:func:`warn_message`), recorded on first sight."""
    return nccl_memo.record(state, state.warn_memo, warn_message, text)


def warn_line(state: LogState, msg: str, host: Host, pid: Num, tid: Num, dev: Num, src: str | None, sline: str | None,
              func: str | None, ln: int) -> None:
    """``host:pid:tid [dev] file.cc:line [(func)] NCCL WARN <message>``."""
    if func is not None:
        state.fingerprints.add("warn_func")
    d = state.ctx(host, pid, tid, dev, ln)
    d.update(level="WARN", is_error_trace=False, src_file=src, src_line=int(sline) if sline else None, func=func,
             message=msg.strip())
    if "Got completion from peer" in msg:
        for i, rx in enumerate(F.IB_COMPLETION_RES):
            m = rx.search(msg)
            if m is None:
                continue
            st = int(m.group("st"))
            gd = m.groupdict()
            d.update(ib_peer=m.group("peer"), ib_status=st, ib_status_name=F.IBV_WC_STATUS.get(st),
                     ib_opcode=int(m.group("op")), ib_len=int(gd["len"]) if gd.get("len") else None,
                     ib_vendor_err=int(m.group("ve")), ib_request=gd.get("req"))
            lg, rg, hca = F.IB_LOCAL_GID_RE.search(msg), F.IB_REMOTE_GID_RE.search(msg), F.IB_HCA_RE.search(msg)
            d.update(ib_local_gid=lg.group("g") if lg else None, ib_remote_gid=rg.group("g") if rg else None,
                     ib_hca=hca.group("h") if hca else None)
            if src is not None and src.startswith(F.CORE_IB_SOURCES):
                state.fingerprints.add(_IB_FINGERPRINTS[i])
            break
    state.add_dict("nccl_warnings", d)
