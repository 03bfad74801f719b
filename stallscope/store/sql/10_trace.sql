-- Conveniences over the stored trace tables (no physics here: see analysis/sql for that).

-- Every complete (`ph: X`) event of every rank, with the profiler step it belongs to.
-- The step is the `ProfilerStep#N` span on the same rank whose CPU interval contains the event's
-- start. GPU activities run after the CPU has moved on, so for them prefer `kernels.step`,
-- which is assigned by launch time.
-- @column step  N of the ProfilerStep#N span containing ts_ns on this rank (null outside any step)
CREATE OR REPLACE VIEW events AS
SELECT e.*, CASE WHEN e.ts_ns < s.end_ns THEN s.step END AS step
FROM _events e ASOF LEFT JOIN _steps s ON e.job = s.job AND e.rank = s.rank AND e.ts_ns >= s.start_ns;

-- GPU activities with the step whose CPU span contains their launch (or their start when the
-- launch is not in the trace).
-- @column step  N of the ProfilerStep#N containing the launch (null outside any step)
CREATE OR REPLACE VIEW kernels AS
SELECT k.*, CASE WHEN coalesce(k.launch_ts_ns, k.ts_ns) < s.end_ns THEN s.step END AS step
FROM _kernels k ASOF LEFT JOIN _steps s
  ON k.job = s.job AND k.rank = s.rank AND coalesce(k.launch_ts_ns, k.ts_ns) >= s.start_ns;

-- Collective calls with the step whose CPU span contains the host-side call (or the execution
-- start when the host call is not in the trace).
-- @column step  N of the ProfilerStep#N containing the host-side call (null outside any step)
CREATE OR REPLACE VIEW collectives AS
SELECT c.*, CASE WHEN coalesce(c.cpu_start_ns, c.start_ns) < s.end_ns THEN s.step END AS step
FROM _collectives c ASOF LEFT JOIN _steps s
  ON c.job = s.job AND c.rank = s.rank AND coalesce(c.cpu_start_ns, c.start_ns) >= s.start_ns;
