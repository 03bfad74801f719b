-- Collective-level summaries built on collective_instances / collective_members.

-- Per rank: how often and how long it waited at collectives, and how often it was the one
-- everybody waited for. A straggler has a high last_share and low wait; its victims the reverse.
-- @column rank  global rank
-- @column host  host
-- @column instances  multi-member collective instances the rank took part in
-- @column last_count  instances where it arrived last (ties excluded)
-- @column last_share  last_count / instances
-- @column wait_ms_total  (ms) total time waiting for later members
-- @column wait_ms_median  (ms) median wait per instance
-- @column lateness_ms_median  (ms) median of (own arrival - median arrival of the instance): positive = late
-- @column job  job id
CREATE OR REPLACE VIEW rank_collective_stats AS
WITH m AS (
  SELECT m.*, i.members, median(m.arrival_ns) OVER (PARTITION BY m.job, m.instance_id) AS med_arrival,
         count(*) FILTER (WHERE m.is_last) OVER (PARTITION BY m.job, m.instance_id) AS n_last
  FROM collective_members m JOIN collective_instances i USING (job, instance_id)
  WHERE i.members > 1
)
SELECT rank, any_value(host) AS host, count(*) AS instances,
       count(*) FILTER (WHERE is_last AND n_last = 1) AS last_count,
       count(*) FILTER (WHERE is_last AND n_last = 1) / count(*) AS last_share,
       sum(wait_ns) / 1e6 AS wait_ms_total, median(wait_ns) / 1e6 AS wait_ms_median,
       median(arrival_ns - med_arrival) / 1e6 AS lateness_ms_median, job
FROM m GROUP BY job, rank;

-- Bus bandwidth per collective type and scope: what the network delivered once everyone was
-- there (transfer time excludes waiting for late members). Instances where a declared member has
-- no row and may have come last (``absent``: its trace ended before them, or it left no trace and
-- the transfer exceeds that of complete groups) are left out: their transfer includes waiting
-- for the absent member. Groups are counted at their declared size, so a group with a rank
-- missing compares with its complete peers.
-- @column op  collective op
-- @column scope  intra | inter (members on one host or several)
-- @column members  group size (declared; members found for point-to-point and when the trace declares none)
-- @column bytes  message size (bytes, nccl-tests convention)
-- @column instances  instances of this (op, scope, members, bytes)
-- @column busbw_gbps_median  (GB/s) median bus bandwidth
-- @column busbw_gbps_p10  (GB/s) 10th percentile
-- @column transfer_ms_median  (ms) median transfer time
-- @column skew_ms_median  (ms) median arrival skew
-- @column job  job id
CREATE OR REPLACE VIEW collective_bandwidth AS
SELECT op, scope, members, bytes, count(*) AS instances,
       median(busbw_gbps) AS busbw_gbps_median, quantile_cont(busbw_gbps, 0.1) AS busbw_gbps_p10,
       median(transfer_ns) / 1e6 AS transfer_ms_median, median(skew_ns) / 1e6 AS skew_ms_median, job
FROM (SELECT * EXCLUDE (members), members AS found,
             CASE WHEN op IN ('send', 'recv', 'sendrecv') THEN members ELSE coalesce(group_size, members) END AS members
      FROM collective_instances)
WHERE found > 1 AND bytes IS NOT NULL AND bytes > 0 AND op NOT IN ('barrier') AND NOT coalesce(absent, false)
GROUP BY job, op, scope, members, bytes;
