-- Questions users ask of NCCL debug logs: which transport each pair of ranks used, whether an
-- inter-node connection fell back to TCP sockets, whether GPUDirect RDMA was on, and which hosts
-- are set up differently from their peers. Built on the nccl_* tables (see store/schema/nccl.py).

-- Helper: the host of each (communicator, rank), from Init START/COMPLETE lines and from the
-- connection lines a rank printed itself. Ranks seen on more than one host are left out.
-- @column job  job id
-- @column comm_id  communicator (commId hash)
-- @column rank     rank in that communicator
-- @column host     the host it ran on
CREATE OR REPLACE VIEW _nccl_rank_hosts AS
SELECT job, comm_id, rank, any_value(host) AS host
FROM (
    SELECT job, comm_id, rank, host FROM nccl_comms
    WHERE comm_id IS NOT NULL AND rank IS NOT NULL AND host IS NOT NULL
    UNION ALL
    SELECT job, comm_id, printer_rank, host FROM nccl_connections
    WHERE comm_id IS NOT NULL AND printer_rank IS NOT NULL AND host IS NOT NULL
)
GROUP BY job, comm_id, rank
HAVING count(DISTINCT host) = 1;

-- Helper: global rank -> host from nccl-tests' device table, per file (nccl-tests runs one
-- world communicator, so the ranks of its connection lines are these ranks).
-- @column job  job id
-- @column file  the log the device table is in
-- @column rank  global rank
-- @column host  host name
CREATE OR REPLACE VIEW _nccl_tests_rank_hosts AS
SELECT job, file, rank, any_value(host) AS host
FROM nccl_tests_ranks
GROUP BY job, file, rank
HAVING count(DISTINCT host) = 1;

-- Helper: one row per network device a process listed (`NET/IB : Using [i]dev:port/link`,
-- `NET/Socket : Using [i]if:addr`), to name the `NET/<net>/<i>` of connection lines. A process is
-- (host, pid); when the log's prefix was stripped (both null) it is the file (`scope_file`).
-- @column job  job id
-- @column host        host of the process
-- @column pid         process id
-- @column scope_file  the file, when host and pid are unknown; else null
-- @column family      IB (HCA list, also printed by IB-based plugins) or Socket
-- @column dev_index   device index i
-- @column dev_name    HCA or interface name
-- @column link        IB | RoCE for HCAs; null for sockets
CREATE OR REPLACE VIEW _nccl_net_devices AS
SELECT job, host, pid, CASE WHEN host IS NULL THEN file END AS scope_file,
       CASE kind WHEN 'ib_device' THEN 'IB' ELSE 'Socket' END AS family, dev_index,
       any_value(dev_name) AS dev_name, any_value(link) AS link
FROM nccl_net
WHERE kind IN ('ib_device', 'socket_device') AND dev_index IS NOT NULL
GROUP BY ALL;

-- Every connection line with both ends placed: which host each rank is on, whether the
-- connection crosses hosts, and the name of the NIC it uses. `inter_node` comes from the line
-- itself where it is certain (P2P and SHM only connect ranks of one host), else from the hosts of
-- the two ranks (Init lines, connection lines, nccl-tests device tables), else from the transport
-- (NCCL uses NET/COLLNET between nodes; it does so inside a node only when P2P and SHM are both
-- unavailable). `inter_node_basis` says which.
-- @column job  job id
-- @column host              host of the process that printed the line
-- @column pid               its process id
-- @column comm_id           communicator (null when the line cannot be attributed)
-- @column channel           channel number
-- @column conn_index        connection index (null before NCCL 2.12/2.14)
-- @column src_rank          sending rank (communicator rank)
-- @column dst_rank          receiving rank
-- @column direction         send | receive for NET/COLLNET lines (each side prints one); null for P2P/SHM
-- @column transport         P2P | SHM | NET | COLLNET
-- @column mechanism         P2P: IPC, CUMEM, MNNVL, direct pointer, ...; SHM: direct/direct, CE/direct, ...
-- @column transport_detail  exact text after `via`
-- @column net               IB | Socket | plugin name, for NET/COLLNET
-- @column net_dev           network device index → net_dev_name
-- @column net_dev_name      HCA or interface the connection uses (from the process's device list); null when not printed
-- @column net_link          IB | RoCE for an HCA
-- @column gdr               GPUDirect RDMA used (NET/COLLNET only)
-- @column pxn_proxy_rank    PXN: rank whose NIC carries this send
-- @column src_host          host of the sending rank, when known
-- @column dst_host          host of the receiving rank, when known
-- @column inter_node        the connection crosses hosts
-- @column inter_node_basis  line (P2P/SHM, or hosts known in the file) | hosts (hosts known in the job) | transport (NET/COLLNET assumed inter-node)
-- @column file              log file of the line
-- @column line_no           line number in that file
CREATE OR REPLACE VIEW nccl_transports AS
WITH placed AS (
    SELECT c.*,
           CASE WHEN c.printer_rank = c.src_rank THEN c.host ELSE coalesce(hs.host, ts.host) END AS src_host,
           CASE WHEN c.printer_rank = c.dst_rank THEN c.host ELSE coalesce(hd.host, td.host) END AS dst_host
    FROM nccl_connections c
    LEFT JOIN _nccl_rank_hosts hs ON hs.job = c.job AND hs.comm_id = c.comm_id AND hs.rank = c.src_rank
    LEFT JOIN _nccl_rank_hosts hd ON hd.job = c.job AND hd.comm_id = c.comm_id AND hd.rank = c.dst_rank
    LEFT JOIN _nccl_tests_rank_hosts ts ON c.comm_id IS NULL AND ts.job = c.job AND ts.file = c.file AND ts.rank = c.src_rank
    LEFT JOIN _nccl_tests_rank_hosts td ON c.comm_id IS NULL AND td.job = c.job AND td.file = c.file AND td.rank = c.dst_rank
)
SELECT p.job, p.host, p.pid, p.comm_id, p.channel, p.conn_index, p.src_rank, p.dst_rank, p.direction, p.transport,
       p.mechanism, p.transport_detail, p.net, p.net_dev, d.dev_name AS net_dev_name, d.link AS net_link, p.gdr,
       p.pxn_proxy_rank, p.src_host, p.dst_host,
       coalesce(p.inter_node, CASE WHEN p.src_host IS NOT NULL AND p.dst_host IS NOT NULL THEN p.src_host <> p.dst_host END,
                p.transport IN ('NET', 'COLLNET')) AS inter_node,
       CASE WHEN p.inter_node IS NOT NULL THEN 'line'
            WHEN p.src_host IS NOT NULL AND p.dst_host IS NOT NULL THEN 'hosts'
            ELSE 'transport' END AS inter_node_basis,
       p.file, p.line_no
FROM placed p
LEFT JOIN _nccl_net_devices d
  ON d.job = p.job AND d.host IS NOT DISTINCT FROM p.host AND d.pid IS NOT DISTINCT FROM p.pid
 AND d.scope_file IS NOT DISTINCT FROM (CASE WHEN p.host IS NULL THEN p.file END) AND d.dev_index = p.net_dev
 AND d.family = CASE WHEN p.net = 'Socket' THEN 'Socket' ELSE 'IB' END;

-- Which transports each pair of ranks used, per host and communicator: one row per (host,
-- communicator, src → dst, transport), with how many channels and lines. The quickest answer to
-- "how do ranks 3 and 4 talk?".
-- @column job  job id
-- @column host              host that printed the lines
-- @column comm_id           communicator (null when not attributable)
-- @column src_rank          sending rank
-- @column dst_rank          receiving rank (null for CollNet)
-- @column transport         P2P | SHM | NET | COLLNET
-- @column transport_detail  exact text after `via`
-- @column net               network for NET/COLLNET
-- @column net_dev_name      NIC used, when printed
-- @column gdr               GPUDirect RDMA used on every such line (NET/COLLNET)
-- @column inter_node        the pair is on different hosts
-- @column channels          distinct channels using this transport
-- @column lines             connection lines
CREATE OR REPLACE VIEW nccl_transport_pairs AS
SELECT job, host, comm_id, src_rank, dst_rank, transport, transport_detail, net, any_value(net_dev_name) AS net_dev_name,
       bool_and(gdr) AS gdr, bool_or(inter_node) AS inter_node, count(DISTINCT channel) AS channels, count(*) AS lines
FROM nccl_transports
GROUP BY job, host, comm_id, src_rank, dst_rank, transport, transport_detail, net;

-- Inter-node connections that went over TCP sockets (`NET/Socket`) instead of IB/RoCE, with the
-- likeliest reason found in the logs: IB disabled by environment, the network forced to Socket,
-- libibverbs missing, or no IB/RoCE device listed. The printing process's own log is consulted
-- first, then the rest of the job (environment echoes are often printed by some ranks only).
-- @column job  job id
-- @column host              host that printed the line
-- @column pid               process id
-- @column comm_id           communicator
-- @column channel           channel
-- @column src_rank          sending rank
-- @column dst_rank          receiving rank
-- @column direction         send | receive
-- @column transport_detail  exact text after `via` (NET/Socket/<i>)
-- @column net_dev_name      network interface used, when printed
-- @column src_host          host of the sender, when known
-- @column dst_host          host of the receiver, when known
-- @column inter_node_basis  how inter_node was decided (see nccl_transports)
-- @column reason            NCCL_IB_DISABLE=1 | NCCL_NET=Socket | libibverbs not found | no IB/RoCE device listed, with ` (elsewhere in the job)` when not from this process; null when no log says
-- @column file              log file
-- @column line_no           line number
CREATE OR REPLACE VIEW nccl_socket_fallback AS
WITH env AS (
    SELECT job, host, pid, CASE WHEN host IS NULL THEN file END AS scope_file,
           bool_or(name = 'NCCL_IB_DISABLE' AND value = '1') AS ib_disabled,
           bool_or(name = 'NCCL_NET' AND lower(value) = 'socket') AS net_forced
    FROM nccl_env GROUP BY ALL
), net AS (
    SELECT job, host, pid, CASE WHEN host IS NULL THEN file END AS scope_file,
           bool_or(kind = 'ibverbs_missing') AS no_verbs, bool_or(kind = 'ib_device') AS has_ib
    FROM nccl_net GROUP BY ALL
), proc AS (
    SELECT t.*, CASE WHEN e.ib_disabled THEN 'NCCL_IB_DISABLE=1' WHEN e.net_forced THEN 'NCCL_NET=Socket'
                     WHEN n.no_verbs THEN 'libibverbs not found'
                     WHEN n.has_ib IS NOT NULL AND NOT n.has_ib THEN 'no IB/RoCE device listed' END AS own_reason
    FROM nccl_transports t
    LEFT JOIN env e ON e.job = t.job AND e.host IS NOT DISTINCT FROM t.host AND e.pid IS NOT DISTINCT FROM t.pid
                   AND e.scope_file IS NOT DISTINCT FROM (CASE WHEN t.host IS NULL THEN t.file END)
    LEFT JOIN net n ON n.job = t.job AND n.host IS NOT DISTINCT FROM t.host AND n.pid IS NOT DISTINCT FROM t.pid
                   AND n.scope_file IS NOT DISTINCT FROM (CASE WHEN t.host IS NULL THEN t.file END)
    WHERE t.transport = 'NET' AND t.net = 'Socket' AND t.inter_node
), job_env AS (
    SELECT job, bool_or(ib_disabled) AS ib_disabled, bool_or(net_forced) AS net_forced FROM env GROUP BY job
)
SELECT p.job, p.host, p.pid, p.comm_id, p.channel, p.src_rank, p.dst_rank, p.direction, p.transport_detail,
       p.net_dev_name, p.src_host, p.dst_host, p.inter_node_basis,
       CASE WHEN p.own_reason LIKE 'NCCL_%' THEN p.own_reason
            WHEN j.ib_disabled THEN 'NCCL_IB_DISABLE=1 (elsewhere in the job)'
            WHEN j.net_forced THEN 'NCCL_NET=Socket (elsewhere in the job)'
            ELSE p.own_reason END AS reason,
       p.file, p.line_no
FROM proc p LEFT JOIN job_env j ON j.job = p.job;

-- GPUDirect RDMA per host and RDMA device (Socket connections have no GDR and are left out): how
-- many NET/COLLNET connection lines used it,
-- and what NCCL decided for the HCA (`GPU Direct RDMA Enabled|Disabled for HCA`). `gdr_off` is
-- true when the device carried connections without GDR, or NCCL disabled GDR for it.
-- @column job  job id
-- @column host                   host (null when the log's prefix was stripped: then one row per file)
-- @column net                    network name (IB, Socket, plugin) of the connections; null when only the HCA decision is known
-- @column dev_index              network device index
-- @column dev_name               HCA name (from the device list or the GDR decision line)
-- @column net_connections        NET/COLLNET connection lines on this device
-- @column gdr_connections        of those, lines with /GDRDMA
-- @column hca_gdr_enabled        NCCL's per-HCA decision when printed, else null
-- @column gdr_off                GDR not used on this device (see above)
CREATE OR REPLACE VIEW nccl_gdr AS
WITH conns AS (
    SELECT job, host, CASE WHEN host IS NULL THEN file END AS scope_file, any_value(net) AS net, net_dev AS dev_index,
           any_value(net_dev_name) AS dev_name, count(*) AS net_connections, count(*) FILTER (WHERE gdr) AS gdr_connections
    FROM nccl_transports
    WHERE transport IN ('NET', 'COLLNET') AND net_dev IS NOT NULL AND coalesce(net, '') <> 'Socket'
    GROUP BY job, host, scope_file, net_dev
), hca AS (
    SELECT job, host, CASE WHEN host IS NULL THEN file END AS scope_file, dev_index, any_value(dev_name) AS dev_name,
           bool_and(gdr) AS hca_gdr_enabled
    FROM nccl_net WHERE kind = 'gdr' AND dev_index IS NOT NULL
    GROUP BY ALL
)
SELECT coalesce(c.job, h.job) AS job, coalesce(c.host, h.host) AS host, c.net, coalesce(c.dev_index, h.dev_index) AS dev_index,
       coalesce(c.dev_name, h.dev_name) AS dev_name, coalesce(c.net_connections, 0) AS net_connections,
       coalesce(c.gdr_connections, 0) AS gdr_connections, h.hca_gdr_enabled,
       coalesce(c.gdr_connections < c.net_connections, false) OR coalesce(NOT h.hca_gdr_enabled, false) AS gdr_off
FROM conns c
FULL OUTER JOIN hca h ON h.job = c.job AND h.host IS NOT DISTINCT FROM c.host AND h.scope_file IS NOT DISTINCT FROM c.scope_file
                     AND h.dev_index = c.dev_index;

-- Hosts whose NCCL setup differs from the majority of their peers in the same job, in three
-- respects: the transports used inside the node (e.g. SHM where the other hosts use P2P: P2P
-- disabled or unavailable), the network used between nodes (Socket where others use IB), and
-- whether inter-node RDMA connections used GDR. A host is listed only when one value is held by
-- strictly more hosts than any other (with two hosts that disagree, neither is the outlier).
-- @column job  job id
-- @column aspect                 intra_node_transport | inter_node_net | inter_node_gdr
-- @column host                   the outlier host
-- @column host_value             what this host shows (e.g. `SHM`, `P2P,SHM`, `Socket`, `no GDR`)
-- @column peer_value             what most hosts show
-- @column hosts_with_peer_value  hosts showing peer_value
-- @column hosts_total            hosts with evidence for this aspect
CREATE OR REPLACE VIEW nccl_host_outliers AS
WITH per_host AS (
    SELECT job, host, 'intra_node_transport' AS aspect, string_agg(DISTINCT transport, ',' ORDER BY transport) AS value
    FROM nccl_transports WHERE NOT inter_node AND host IS NOT NULL GROUP BY job, host
    UNION ALL
    SELECT job, host, 'inter_node_net', string_agg(DISTINCT coalesce(net, transport), ',' ORDER BY coalesce(net, transport))
    FROM nccl_transports WHERE inter_node AND host IS NOT NULL GROUP BY job, host
    UNION ALL
    SELECT job, host, 'inter_node_gdr',
           CASE WHEN bool_and(gdr) THEN 'GDR' WHEN NOT bool_or(gdr) THEN 'no GDR' ELSE 'partial GDR' END
    FROM nccl_transports
    WHERE inter_node AND transport IN ('NET', 'COLLNET') AND coalesce(net, '') <> 'Socket' AND host IS NOT NULL
    GROUP BY job, host
), counts AS (
    SELECT job, aspect, value, count(*) AS n, sum(count(*)) OVER (PARTITION BY job, aspect) AS hosts_total,
           rank() OVER (PARTITION BY job, aspect ORDER BY count(*) DESC) AS r
    FROM per_host GROUP BY job, aspect, value
), majority AS (
    SELECT job, aspect, any_value(value) AS peer_value, any_value(n) AS hosts_with_peer_value,
           any_value(hosts_total) AS hosts_total
    FROM counts WHERE r = 1 GROUP BY job, aspect HAVING count(*) = 1
)
SELECT p.job, p.aspect, p.host, p.value AS host_value, m.peer_value, m.hosts_with_peer_value, m.hosts_total
FROM per_host p JOIN majority m ON m.job = p.job AND m.aspect = p.aspect
WHERE p.value <> m.peer_value;
