-- Per-rank GPU temporal breakdown and comm/compute overlap, defined exactly as
-- HolisticTraceAnalysis defines them (get_temporal_breakdown, get_comm_comp_overlap) so the two
-- tools can be cross-checked: GPU activities whose launch precedes the last ProfilerStep (HTA
-- drops the last, usually incomplete, step when there are two or more), kernel classes by name
-- (communication ^nccl.*Kernel; memory ^Memcpy|^Memset|^dma; computation: anything else not
-- matching Memcpy/Memset/Sync). Unlike HTA this runs in SQL over every rank at once.

-- Helper: the GPU activities HTA would keep, with their HTA kernel class.
-- @column kclass  communication | memory | computation | other
CREATE OR REPLACE VIEW _temporal_kernels AS
WITH ls AS (SELECT job, rank, max(start_ns) AS last_start, count(*) AS n FROM steps GROUP BY job, rank)
SELECT k.job, k.rank, k.ts_ns, k.ts_ns + k.dur_ns AS end_ns,
  CASE WHEN regexp_matches(k.name, '^nccl.*Kernel') THEN 'communication'
       WHEN regexp_matches(k.name, '^(Memcpy|Memset|dma)') THEN 'memory'
       WHEN regexp_matches(k.name, '^(.*Memcpy|Memset|.*Sync)') THEN 'other'
       ELSE 'computation' END AS kclass
FROM _kernels k LEFT JOIN ls ON ls.job = k.job AND ls.rank = k.rank
WHERE ls.n IS NULL OR ls.n <= 1 OR (k.launch_ts_ns IS NOT NULL AND k.launch_ts_ns < ls.last_start);

-- Helper: merged (non-overlapping) busy intervals per rank, for all activities ('all') and
-- per class.
-- @column job  job id
-- @column rank  global rank
-- @column kset  all | communication | computation
-- @column t0  (ns) merged interval start
-- @column t1  (ns) merged interval end
CREATE OR REPLACE VIEW _temporal_merged AS
WITH src AS (
  SELECT job, rank, 'all' AS kset, ts_ns, end_ns FROM _temporal_kernels
  UNION ALL SELECT job, rank, kclass, ts_ns, end_ns FROM _temporal_kernels WHERE kclass IN ('communication', 'computation')
),
s AS (
  SELECT *, max(end_ns) OVER (PARTITION BY job, rank, kset ORDER BY ts_ns, end_ns ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
  FROM src
),
g AS (
  SELECT *, sum(CASE WHEN prev_end IS NULL OR ts_ns > prev_end THEN 1 ELSE 0 END)
              OVER (PARTITION BY job, rank, kset ORDER BY ts_ns, end_ns ROWS UNBOUNDED PRECEDING) AS grp
  FROM s
)
SELECT job, rank, kset, min(ts_ns) AS t0, max(end_ns) AS t1 FROM g GROUP BY job, rank, kset, grp;

-- Per rank: GPU idle / compute / non-compute time over the span from the first to the last kept
-- activity (HTA's get_temporal_breakdown).
-- @column rank  global rank
-- @column kernel_time_us  (µs) span from first activity start to last activity end
-- @column idle_time_us  (µs) span minus the union of all activities
-- @column compute_time_us  (µs) union of computation kernels
-- @column non_compute_time_us  (µs) span - idle - compute (communication, memory, ...)
-- @column idle_pct  idle share of the span, percent
-- @column compute_pct  compute share, percent
-- @column non_compute_pct  non-compute share, percent
-- @column job  job id
CREATE OR REPLACE VIEW rank_temporal_breakdown AS
WITH a AS (
  SELECT job, rank, max(t1) - min(t0) AS span, sum(t1 - t0) AS busy FROM _temporal_merged WHERE kset = 'all' GROUP BY job, rank
),
c AS (SELECT job, rank, sum(t1 - t0) AS comp FROM _temporal_merged WHERE kset = 'computation' GROUP BY job, rank)
SELECT a.rank, a.span / 1e3 AS kernel_time_us, (a.span - a.busy) / 1e3 AS idle_time_us,
       coalesce(c.comp, 0) / 1e3 AS compute_time_us, (a.busy - coalesce(c.comp, 0)) / 1e3 AS non_compute_time_us,
       100.0 * (a.span - a.busy) / a.span AS idle_pct, 100.0 * coalesce(c.comp, 0) / a.span AS compute_pct,
       100.0 * (a.busy - coalesce(c.comp, 0)) / a.span AS non_compute_pct, a.job
FROM a LEFT JOIN c ON c.job = a.job AND c.rank = a.rank
WHERE a.span > 0;

-- Per rank: share of communication-kernel time overlapped by computation kernels
-- (HTA's get_comm_comp_overlap).
-- @column rank  global rank
-- @column comm_time_us  (µs) union of communication kernels
-- @column overlap_time_us  (µs) time both a communication and a computation kernel run
-- @column overlap_pct  overlap_time / comm_time, percent
-- @column job  job id
CREATE OR REPLACE VIEW comm_comp_overlap AS
WITH p AS (
  SELECT job, rank, t0 AS t, CASE kset WHEN 'communication' THEN 1 ELSE 2 END AS d FROM _temporal_merged WHERE kset <> 'all'
  UNION ALL
  SELECT job, rank, t1, CASE kset WHEN 'communication' THEN -1 ELSE -2 END FROM _temporal_merged WHERE kset <> 'all'
),
q AS (SELECT job, rank, t, sum(d) AS d FROM p GROUP BY job, rank, t),
r AS (
  SELECT job, rank, t, lead(t) OVER w AS t_next, sum(d) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running
  FROM q WINDOW w AS (PARTITION BY job, rank ORDER BY t)
),
comm AS (SELECT job, rank, sum(t1 - t0) AS comm FROM _temporal_merged WHERE kset = 'communication' GROUP BY job, rank)
SELECT comm.rank, comm.comm / 1e3 AS comm_time_us,
       coalesce(sum(r.t_next - r.t) FILTER (WHERE r.running = 3), 0) / 1e3 AS overlap_time_us,
       100.0 * coalesce(sum(r.t_next - r.t) FILTER (WHERE r.running = 3), 0) / comm.comm AS overlap_pct, comm.job
FROM comm LEFT JOIN r ON r.job = comm.job AND r.rank = comm.rank
WHERE comm.comm > 0
GROUP BY comm.job, comm.rank, comm.comm;
