"""Tables read from a bundle's collector manifests (written by ``ingest.manifest``).

A bundle made by ``stallscope collect`` has one ``manifest.json`` (``kind: bundle``); a bundle whose
collect was killed before the end, or made by the profiler alone, also or only has per-rank records
``ranks/rank<N>.json`` (``kind: rank``). Both are read into the same tables; ``file`` says which
manifest a row came from. Host and pid are the ones each rank's process saw (``gethostname()``,
``getpid()``): the same names Kineto's ``host_name`` and NCCL's ``%h`` use.
"""

from __future__ import annotations

import pyarrow as pa

from stallscope.store.schema import C, TableSpec, register

I32, I64, F64, STR, BOOL = pa.int32(), pa.int64(), pa.float64(), pa.string(), pa.bool_()

MANIFEST = TableSpec(
    "manifest",
    "One row per bundle manifest (`manifest.json` written by `stallscope collect`): the job, its command,"
    " when it ran, how it ended and the software it ran with.",
    (
        C("collect_id", STR, "id of the `stallscope collect` run that wrote the manifest (`c-` + 12 hex)"),
        C("job_id", STR, "scheduler or launcher job id (SLURM_JOB_ID, torchrun run id, PBS/LSF id), else the collect id"),
        C("status", STR, "running (the collect was killed before the end) | ok | failed | interrupted | not_started"),
        C("command", STR, "the command collect ran, as a JSON array of arguments"),
        C("launcher", STR, "torchrun | srun | mpirun | python | ... (from the command's first word)"),
        C("host", STR, "host `stallscope collect` ran on"),
        C("cwd", STR, "working directory of the command"),
        C("started_at_ns", I64, "when the command started, Unix epoch (wall clock of the collect host)", "ns"),
        C("ended_at_ns", I64, "when the command ended, Unix epoch; null while running/killed", "ns"),
        C("duration_s", F64, "wall time of the command", "s"),
        C("exit_code", I32, "the command's exit code (128 + N when killed by signal N; 127 not found); null while running"),
        C("signal", STR, "signal that ended or interrupted the command (SIGINT, SIGTERM, ...); null if none"),
        C("error", STR, "why the command could not start; null otherwise"),
        C("world_size", I32, "world size reported by the ranks (largest), else the number of rank records"),
        C("ranks_recorded", I32, "rank records merged into the manifest"),
        C("stallscope_version", STR, "stallscope version of the collector"),
        C("python_version", STR, "Python version the ranks ran (collect host's when no rank reported)"),
        C("torch_version", STR, "PyTorch version the ranks ran (`torch.__version__`), else the installed one"),
        C("cuda_version", STR, "CUDA runtime PyTorch was built with (`torch.version.cuda`); null for CPU builds"),
        C("nccl_version", STR, "NCCL version PyTorch loaded (`torch.cuda.nccl.version()`), else the installed nvidia-nccl wheel"),
        C("driver_version", STR, "NVIDIA driver version (`nvidia-smi -q`); null where nvidia-smi is unavailable"),
        C("cuda_driver_version", STR, "highest CUDA version the driver supports (`nvidia-smi -q` CUDA Version)"),
        C("nccl_debug_file", STR, "NCCL_DEBUG_FILE the command ran with (collect's `<bundle>/nccl/%h.%p.log` unless the user set one)"),
        C("nccl_logs_in_bundle", BOOL, "true when NCCL_DEBUG_FILE pointed into the bundle"),
        C("notes", STR, "what collect noticed about the setup (user NCCL settings it kept), as a JSON array of sentences"),
        C("manifest_version", I32, "manifest format version"),
        C("file", STR, "path of the manifest inside the bundle"),
    ),
)

MANIFEST_RANKS = TableSpec(
    "manifest_ranks",
    "One row per rank record (written by each rank's `stallscope.collectors.profile`): where the rank ran and"
    " with what. Ingest fills `ranks.host`/`ranks.local_rank` from here when the trace does not say.",
    (
        C("rank", I32, "global rank (launcher environment, else torch.distributed); null if never known"),
        C("world_size", I32, "world size the rank saw"),
        C("local_rank", I32, "rank within its host (LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK, ...)"),
        C("local_world_size", I32, "ranks on its host, when the launcher says"),
        C("node_rank", I32, "index of its node in the job (GROUP_RANK, SLURM_NODEID, ...)"),
        C("host", STR, "host name of the rank's process (`gethostname()`)"),
        C("pid", I64, "process id of the rank"),
        C("launcher", STR, "launcher whose variables gave the rank: torchrun | openmpi | mvapich | pmi | slurm | none"),
        C("backend", STR, "torch.distributed backend (nccl, gloo, ...) once the process group existed; null otherwise"),
        C("device", STR, "device the rank used: `cuda:<i>` (current CUDA device), `cuda` (available, not initialized) or `cpu`"),
        C("device_name", STR, "GPU name (`torch.cuda.get_device_properties`); null on CPU"),
        C("device_uuid", STR, "GPU UUID (matches `nvidia-smi -q` GPU UUID); null on CPU"),
        C("status", STR, "running (the process ended before the profiler stopped) | done"),
        C("started_at_ns", I64, "when the profiler started, Unix epoch (the rank host's clock)", "ns"),
        C("ended_at_ns", I64, "when the profiler stopped, Unix epoch; null if it never did", "ns"),
        C("steps", I32, "training steps the profiler saw (`step()` calls)"),
        C("traces", STR, "the rank's trace files, paths relative to the bundle, as a JSON array"),
        C("torch_version", STR, "`torch.__version__` in the rank's process"),
        C("cuda_version", STR, "`torch.version.cuda` (null for CPU builds)"),
        C("nccl_version", STR, "`torch.cuda.nccl.version()` (null without CUDA)"),
        C("python_version", STR, "Python version of the rank's process"),
        C("profiler", STR, "profiler options (schedule, record_shapes, with_stack, ...) as JSON"),
        C("collect_id", STR, "collect run the rank belonged to (null when profiled without `stallscope collect`)"),
        C("file", STR, "path of the manifest the row came from"),
    ),
)

MANIFEST_ENV = TableSpec(
    "manifest_env",
    "The environment that shapes distributed performance (NCCL_*, TORCH_NCCL_*, CUDA_*, GLOO_*, UCX_*, FI_*,"
    " MASTER_*, ...), as the command got it (`rank` null) and as each rank saw it. Values that look like"
    " secrets (by name: TOKEN, SECRET, PASSWORD, KEY, ...; by content: known token formats, URL passwords)"
    " are stored as `<masked>`.",
    (
        C("rank", I32, "rank whose process saw the variable; null for the environment collect gave the command"),
        C("host", STR, "host of that process (collect's host for `rank` null)"),
        C("name", STR, "variable name"),
        C("value", STR, "value, `<masked>` (or a URL with its password masked) when it looks like a secret"),
        C("masked", BOOL, "true when the value was masked"),
        C("source", STR, "collect (set by `stallscope collect`) | user"),
        C("file", STR, "path of the manifest the row came from"),
    ),
)

MANIFEST_TOPOLOGY = TableSpec(
    "manifest_topology",
    "One row per host and topology probe: `nvidia-smi topo -m`, `nvidia-smi -q`, `lscpu`, NUMA nodes"
    " (`/sys/devices/system/node`), InfiniBand ports (`/sys/class/infiniband`), `ibstat`. A probe that"
    " could not run says so (`status`, `error`) instead of being absent.",
    (
        C("host", STR, "host the probe ran on"),
        C("probe", STR, "nvidia_smi_topo | nvidia_smi_q | lscpu | numa | infiniband | ibstat"),
        C("status", STR, "ok | unavailable (tool or files absent) | failed (error or timeout)"),
        C("command", STR, "the command run or the sysfs directory read"),
        C("seconds", F64, "how long the probe took", "s"),
        C("error", STR, "why it is unavailable or failed (first line); null when ok"),
        C("raw", STR, "the probe's output as text (at most 1 MiB)"),
        C("parsed", STR, "parsed facts as JSON (matrix and affinities; driver/CUDA and per-GPU PCIe link; CPUs and NUMA;"
                         " per-port rate in Gbit/s and state); null when not ok"),
        C("file", STR, "path of the manifest the row came from"),
    ),
)

register(MANIFEST, MANIFEST_RANKS, MANIFEST_ENV, MANIFEST_TOPOLOGY)
