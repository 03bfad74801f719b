"""Stall breakdown of every rank × step: where the step time went (the Stash idea, from traces).

Each rank's **busy timeline** is its GPU activities (kernels, memcpy, memset on any stream) or,
on CPU-only traces, its main thread's CPU ops. Its **step windows** are
``[start of ProfilerStep#N, start of ProfilerStep#N+1)`` on aligned clocks (the last step ends
when its CPU span or the last GPU work it launched ends, whichever is later), so the windows
tile the profiled time and the parts of each window sum exactly to its length. A truncated GPU
trace (killed job) keeps its CPU events, written first, past its last GPU activity: its steps that
end after that were not observed and get no row (rather than a step of "host stall").

A sweep over every interval boundary labels each elementary segment by what the rank was doing,
in this precedence:

1. ``compute``: a non-communication activity is running;
2. ``comm_inter`` / ``comm_intra``: a collective is moving bytes after its last member arrived
   (inter-node when its members span hosts), not hidden under compute;
3. ``sync_wait``: inside a collective, before the last member arrived: waiting for peers;
4. ``other_idle``: the device is idle although work was already launched (queued behind a
   dependency, launch latency);
5. ``host_stall``: idle with nothing launched: the host is behind (data loading, Python,
   synchronizing calls). On CPU-only traces every idle segment of the main thread is a host stall.

Communication under compute is reported apart (``comm_hidden_ns``). Everything runs as one
DuckDB query (window functions over interval boundaries), not Python loops over events.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from stallscope.store.queries import arrow_of

#: CPU-op name prefixes that are collective plumbing, not computation, on CPU-only traces
_CPU_COMM_PREFIXES = ("c10d::", "record_param_comms", "gloo:", "nccl:", "ProcessGroup")

BREAKDOWN_SQL = """
WITH off AS (
  SELECT r.rank, coalesce(r.host, 'rank-' || r.rank) AS host, r.platform, r.pid, coalesce(o.offset_ns, 0) AS off,
    coalesce(r.truncated, false) AS truncated
  FROM ranks r LEFT JOIN clock_offsets o ON o.host = coalesce(r.host, 'rank-' || r.rank)
),
observed AS (  -- a truncated trace keeps its CPU events (written first) past its last GPU activity
  SELECT rank, max(ts_ns + dur_ns) AS e FROM _kernels GROUP BY rank
),
gpu_end AS (
  SELECT rank, step, max(ts_ns + dur_ns) AS e FROM kernels WHERE step IS NOT NULL GROUP BY rank, step
),
cpu_end AS (
  SELECT e.rank, s.step, max(e.ts_ns + e.dur_ns) AS e
  FROM _events e JOIN off ON off.rank = e.rank AND off.platform = 'cpu' AND e.tid = off.pid
  JOIN _steps s ON s.rank = e.rank AND e.ts_ns >= s.start_ns AND e.ts_ns < s.end_ns
  WHERE e.cat = 'cpu_op'
  GROUP BY e.rank, s.step
),
win AS (
  SELECT s.rank, s.step, off.host, CASE WHEN off.platform = 'cpu' THEN 'cpu' ELSE 'gpu' END AS timeline,
    s.start_ns + off.off AS w0,
    -- to the next step's start; the last step of a profiling window (the next step recorded is not
    -- step + 1: schedule repeat, a file per window) ends with its own work, not at the next window
    CASE WHEN lead(s.step) OVER (PARTITION BY s.rank ORDER BY s.start_ns) = s.step + 1
         THEN lead(s.start_ns) OVER (PARTITION BY s.rank ORDER BY s.start_ns)
         ELSE greatest(s.end_ns, coalesce(g.e, 0), coalesce(c.e, 0)) END + off.off AS w1
  FROM steps s JOIN off ON off.rank = s.rank
  LEFT JOIN gpu_end g ON g.rank = s.rank AND g.step = s.step
  LEFT JOIN cpu_end c ON c.rank = s.rank AND c.step = s.step
  LEFT JOIN observed ob ON ob.rank = s.rank
  -- steps of a truncated GPU trace that end after its last GPU activity were not observed, not idle
  QUALIFY NOT (off.truncated AND off.platform <> 'cpu'
               AND coalesce(lead(s.start_ns) OVER (PARTITION BY s.rank ORDER BY s.start_ns), s.end_ns) > coalesce(ob.e, 0))
),
busy AS (   -- compute intervals
  SELECT k.rank, k.ts_ns + off.off AS t0, k.ts_ns + k.dur_ns + off.off AS t1
  FROM _kernels k JOIN off ON off.rank = k.rank WHERE NOT k.is_comm AND k.dur_ns > 0
  UNION ALL
  SELECT e.rank, e.ts_ns + off.off, e.ts_ns + e.dur_ns + off.off
  FROM _events e JOIN off ON off.rank = e.rank AND off.platform = 'cpu' AND e.tid = off.pid
  WHERE e.cat = 'cpu_op' AND e.dur_ns > 0 AND NOT regexp_matches(e.name, '{cpu_comm_re}')
),
queued AS (  -- launched, not yet started
  SELECT k.rank, k.launch_ts_ns + k.launch_dur_ns + off.off AS t0, k.ts_ns + off.off AS t1
  FROM _kernels k JOIN off ON off.rank = k.rank
  WHERE k.launch_ts_ns IS NOT NULL AND k.ts_ns > k.launch_ts_ns + k.launch_dur_ns
),
comm AS (
  SELECT m.rank, m.arrival_ns AS t0, m.arrival_ns + greatest(m.wait_ns, 0) AS t1, 'wait' AS kind
  FROM collective_members m WHERE m.wait_ns > 0
  UNION ALL
  SELECT m.rank, m.arrival_ns + greatest(m.wait_ns, 0), m.end_ns, i.scope
  FROM collective_members m JOIN collective_instances i USING (instance_id)
  WHERE m.end_ns > m.arrival_ns + greatest(m.wait_ns, 0)
),
pts AS (
  SELECT rank, t0 AS t, 1 AS dc, 0 AS di, 0 AS dn, 0 AS dw, 0 AS dq FROM busy
  UNION ALL SELECT rank, t1, -1, 0, 0, 0, 0 FROM busy
  UNION ALL SELECT rank, t0, 0, 0, 0, 0, 1 FROM queued
  UNION ALL SELECT rank, t1, 0, 0, 0, 0, -1 FROM queued
  UNION ALL SELECT rank, t0, 0, (kind = 'inter')::INT, (kind = 'intra')::INT, (kind = 'wait')::INT, 0 FROM comm
  UNION ALL SELECT rank, t1, 0, -(kind = 'inter')::INT, -(kind = 'intra')::INT, -(kind = 'wait')::INT, 0 FROM comm
  UNION ALL SELECT rank, w0, 0, 0, 0, 0, 0 FROM win
  UNION ALL SELECT rank, w1, 0, 0, 0, 0, 0 FROM win
),
agg AS (
  SELECT rank, t, sum(dc) AS dc, sum(di) AS di, sum(dn) AS dn, sum(dw) AS dw, sum(dq) AS dq FROM pts GROUP BY rank, t
),
run AS (
  SELECT rank, t, lead(t) OVER w AS t_next,
    sum(dc) OVER w AS nc, sum(di) OVER w AS ni, sum(dn) OVER w AS nn, sum(dw) OVER w AS nw, sum(dq) OVER w AS nq
  FROM agg WINDOW w AS (PARTITION BY rank ORDER BY t ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
seg AS (
  SELECT r.rank, r.t, r.t_next - r.t AS len,
    CASE WHEN nc > 0 THEN 'compute' WHEN ni > 0 THEN 'comm_inter' WHEN nn > 0 THEN 'comm_intra'
         WHEN nw > 0 THEN 'sync_wait' WHEN nq > 0 THEN 'other_idle' ELSE 'host_stall' END AS cls,
    (nc > 0 AND (ni + nn + nw) > 0) AS hidden
  FROM run r WHERE r.t_next IS NOT NULL AND r.t_next > r.t
),
lab AS (
  SELECT w.rank, w.step, seg.len, seg.cls, seg.hidden
  FROM seg ASOF JOIN win w ON seg.rank = w.rank AND seg.t >= w.w0
  WHERE seg.t < w.w1
)
SELECT w.rank::INT AS rank, w.host, w.step, w.timeline, w.w0 AS start_ns, w.w1 AS end_ns, (w.w1 - w.w0) AS step_ns,
  coalesce(sum(len) FILTER (WHERE cls = 'compute'), 0)::BIGINT AS compute_ns,
  coalesce(sum(len) FILTER (WHERE cls = 'comm_intra'), 0)::BIGINT AS comm_intra_ns,
  coalesce(sum(len) FILTER (WHERE cls = 'comm_inter'), 0)::BIGINT AS comm_inter_ns,
  coalesce(sum(len) FILTER (WHERE cls = 'sync_wait'), 0)::BIGINT AS sync_wait_ns,
  coalesce(sum(len) FILTER (WHERE cls = 'host_stall'), 0)::BIGINT AS host_stall_ns,
  coalesce(sum(len) FILTER (WHERE cls = 'other_idle'), 0)::BIGINT AS other_idle_ns,
  coalesce(sum(len) FILTER (WHERE hidden), 0)::BIGINT AS comm_hidden_ns
FROM win w LEFT JOIN lab ON lab.rank = w.rank AND lab.step = w.step
GROUP BY ALL
ORDER BY rank, step
"""


def step_breakdown(con: duckdb.DuckDBPyConnection) -> pa.Table:
    """The ``step_breakdown`` table for the job ``con`` sees (needs the collective tables)."""
    cpu_comm_re = "^(" + "|".join(p.replace(":", ":") for p in _CPU_COMM_PREFIXES) + ")"
    return arrow_of(con.sql(BREAKDOWN_SQL.replace("{cpu_comm_re}", cpu_comm_re)))
