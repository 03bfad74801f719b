-- Views over the Parquet tables of `stallscope compress evaluate` runs
-- (`<store>/compress/<run id>/*.parquet`; column meanings in stallscope/compress/tables.py).
-- They exist once a run has been written to the store.

-- Per-layer latency of every compress run: one row per profiled layer/node execution (ORT node
-- events, PyTorch layer annotations), so per-layer latency of every candidate is a SQL query.
-- @column run_id  compress run folder name
-- @column candidate  candidate name (compress_candidates.name)
-- @column runtime  onnxruntime | torch
-- @column device  cpu | cuda
-- @column provider  ORT execution provider, or torch-cpu / torch-cuda
-- @column batch  batch size of the inference
-- @column run_index  measured inference number (0-based, warm-up excluded)
-- @column layer  PyTorch module path (runtime-inserted nodes keep their node name)
-- @column node  node or annotation name as written in the trace
-- @column op_type  ORT operator (Conv, QLinearConv, ...) or PyTorch module class
-- @column ts_ns  (ns) start on the trace's own clock
-- @column dur_ns  (ns) duration
-- @column trace_file  raw trace file, relative to the run folder
-- @column source  ort_node | torch_layer_cpu | torch_layer_gpu
CREATE OR REPLACE VIEW compress_layer_latency AS
SELECT * FROM read_parquet('{store}/compress/*/layer_latency.parquet', union_by_name = true);

-- Whole-inference latency of every compress run, per measured inference and pass.
-- @column run_id  compress run folder name
-- @column candidate  candidate name
-- @column runtime  onnxruntime | torch
-- @column device  cpu | cuda
-- @column batch  batch size
-- @column run_index  measured inference number (0-based)
-- @column ts_ns  (ns) start on the trace's own clock
-- @column dur_ns  (ns) latency of the whole inference
-- @column trace_file  raw trace file, relative to the run folder
-- @column source  wall (unprofiled timing trace) | ort_model_run | torch_run_cpu | torch_run_gpu
CREATE OR REPLACE VIEW compress_run_latency AS
SELECT * FROM read_parquet('{store}/compress/*/run_latency.parquet', union_by_name = true);

-- Every candidate of every compress run with its metrics (the numbers of report.json).
CREATE OR REPLACE VIEW compress_candidates AS
SELECT * FROM read_parquet('{store}/compress/*/candidates.parquet', union_by_name = true);

-- Every pruning step a compress run attempted, accepted or rolled back.
CREATE OR REPLACE VIEW compress_pruning_steps AS
SELECT * FROM read_parquet('{store}/compress/*/pruning_steps.parquet', union_by_name = true);
