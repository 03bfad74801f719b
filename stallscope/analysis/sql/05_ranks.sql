-- Ranks with the hosts the analysis inferred where no input named one.

-- Every rank trace (the stored `ranks` table) with `host` filled in from `rank_hosts` when the
-- bundle named no host for it (ranks sharing a clock are grouped as one host).
-- @column host  host name (trace, NCCL log, manifest, file or folder name), else inferred: the known host whose clock and rank block it shares, or `host-of-ranks-A-B`
-- @column host_source  trace | nccl_log | manifest | file_name | directory | inferred (rank blocks) | clock (shared clock)
CREATE OR REPLACE VIEW ranks AS
SELECT r.* REPLACE (coalesce(r.host, h.host) AS host,
                    CASE WHEN r.host IS NULL AND h.host IS NOT NULL THEN h.source ELSE r.host_source END AS host_source)
FROM _ranks r LEFT JOIN _rank_hosts h ON h.job = r.job AND h.rank = r.rank;
