-- Roll-ups of step_breakdown.

-- Step time per step across ranks: synchronous training runs at the pace of the slowest rank.
-- @column step  ProfilerStep N
-- @column ranks  ranks with this step
-- @column step_ms_max  (ms) slowest rank's step window
-- @column step_ms_median  (ms) median over ranks
-- @column step_ms_min  (ms) fastest rank
-- @column sync_wait_ms_median  (ms) median over ranks of time waiting at collectives
-- @column job  job id
CREATE OR REPLACE VIEW step_times AS
SELECT step, count(*) AS ranks, max(step_ns) / 1e6 AS step_ms_max, median(step_ns) / 1e6 AS step_ms_median,
       min(step_ns) / 1e6 AS step_ms_min, median(sync_wait_ns) / 1e6 AS sync_wait_ms_median, job
FROM step_breakdown GROUP BY job, step;

-- Per rank: the stall breakdown summed over its steps, in ms and as fractions of its step time.
-- @column rank  global rank
-- @column host  host
-- @column steps  steps covered
-- @column step_ms  (ms) total step time
-- @column compute_ms  (ms) computation
-- @column comm_intra_ms  (ms) exposed intra-node communication
-- @column comm_inter_ms  (ms) exposed inter-node communication
-- @column sync_wait_ms  (ms) waiting for peers inside collectives
-- @column host_stall_ms  (ms) idle, nothing launched (host behind)
-- @column other_idle_ms  (ms) idle with work launched
-- @column compute_frac  compute_ms / step_ms
-- @column comm_frac  (comm_intra_ms + comm_inter_ms) / step_ms
-- @column sync_wait_frac  sync_wait_ms / step_ms
-- @column host_stall_frac  host_stall_ms / step_ms
-- @column job  job id
CREATE OR REPLACE VIEW rank_breakdown AS
SELECT rank, any_value(host) AS host, count(*) AS steps, sum(step_ns) / 1e6 AS step_ms,
       sum(compute_ns) / 1e6 AS compute_ms, sum(comm_intra_ns) / 1e6 AS comm_intra_ms,
       sum(comm_inter_ns) / 1e6 AS comm_inter_ms, sum(sync_wait_ns) / 1e6 AS sync_wait_ms,
       sum(host_stall_ns) / 1e6 AS host_stall_ms, sum(other_idle_ns) / 1e6 AS other_idle_ms,
       sum(compute_ns) / sum(step_ns) AS compute_frac,
       (sum(comm_intra_ns) + sum(comm_inter_ns)) / sum(step_ns) AS comm_frac,
       sum(sync_wait_ns) / sum(step_ns) AS sync_wait_frac, sum(host_stall_ns) / sum(step_ns) AS host_stall_frac, job
FROM step_breakdown GROUP BY job, rank;

-- Per host: the stall breakdown of its ranks (mean per rank and step), to spot a host whose
-- ranks are slow together.
-- @column host  host
-- @column ranks  ranks on the host
-- @column step_ms  (ms) mean step window per rank and step
-- @column compute_ms  (ms) mean per rank and step
-- @column comm_intra_ms  (ms) mean per rank and step
-- @column comm_inter_ms  (ms) mean per rank and step
-- @column sync_wait_ms  (ms) mean per rank and step
-- @column host_stall_ms  (ms) mean per rank and step
-- @column other_idle_ms  (ms) mean per rank and step
-- @column job  job id
CREATE OR REPLACE VIEW host_breakdown AS
SELECT host, count(DISTINCT rank) AS ranks, avg(step_ns) / 1e6 AS step_ms, avg(compute_ns) / 1e6 AS compute_ms,
       avg(comm_intra_ns) / 1e6 AS comm_intra_ms, avg(comm_inter_ns) / 1e6 AS comm_inter_ms,
       avg(sync_wait_ns) / 1e6 AS sync_wait_ms, avg(host_stall_ns) / 1e6 AS host_stall_ms,
       avg(other_idle_ns) / 1e6 AS other_idle_ms, job
FROM step_breakdown GROUP BY job, host;
