-- Aligned time: every rank's raw timestamps shifted onto the reference host's clock.

-- Each rank with its host and that host's clock offset (from clock_offsets): add offset_ns to
-- any raw *_ns time of the rank to get reference-clock (aligned) time.
-- @column rank  global rank
-- @column host  host (ranks.host, or rank-N when unknown)
-- @column offset_ns  (ns) offset of the host's clock; 0 for the reference host
-- @column method  how the offset was obtained (clock_offsets.method)
-- @column job  job id
CREATE OR REPLACE VIEW rank_clock AS
SELECT r.rank, coalesce(r.host, 'rank-' || r.rank) AS host, coalesce(o.offset_ns, 0) AS offset_ns,
       coalesce(o.method, 'none') AS method, r.job
FROM ranks r LEFT JOIN clock_offsets o ON o.job = r.job AND o.host = coalesce(r.host, 'rank-' || r.rank);

-- Every event with its start on the aligned clock (compare ranks on different hosts with this).
-- @column ts_aligned_ns  (ns) ts_ns + the host's clock offset
CREATE OR REPLACE VIEW events_aligned AS
SELECT e.*, e.ts_ns + c.offset_ns AS ts_aligned_ns
FROM events e JOIN rank_clock c ON c.job = e.job AND c.rank = e.rank;

-- Every GPU activity with aligned start and launch times.
-- @column ts_aligned_ns  (ns) kernel start on the aligned clock
-- @column launch_aligned_ns  (ns) launch call start on the aligned clock (null if unknown)
CREATE OR REPLACE VIEW kernels_aligned AS
SELECT k.*, k.ts_ns + c.offset_ns AS ts_aligned_ns, k.launch_ts_ns + c.offset_ns AS launch_aligned_ns
FROM kernels k JOIN rank_clock c ON c.job = k.job AND c.rank = k.rank;
