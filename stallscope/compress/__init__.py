"""Model compression measured from profiler traces: HQP (Fisher-guided pruning + int8 PTQ).

``stallscope compress evaluate`` builds dense, quant-only, prune-only and HQP candidates of a
classifier, profiles each on this device, and compares accuracy, size and latency. The modules
follow the data:

``data``          ``--data`` loading (.npz or MODULE:FUNC) into train/val/test splits
``examples``      built-in offline ResNet-like and MobileNet-like CNNs on scikit-learn's digits
``training``      training, fine-tuning and accuracy
``cost``          MACs, parameters and layer structure from one traced forward pass
``sensitivity``   diagonal Fisher channel sensitivity from channel-mask gradients
``prune``         iterative structured pruning under an accuracy budget (torch-pruning graph)
``quantize``      ONNX export and ONNX Runtime static int8 QDQ quantization
``latency``       interleaved timing, ORT profiler and torch.profiler traces -> latency tables
``tables``        the Parquet tables of a run and their columns
``evaluate``      candidates, HQP gate, Pareto front, recommendation
``report``        the JSON contract, Markdown and the rich table
``queries``       SQL over a run's tables (DuckDB)

Importing this package imports nothing heavy: torch, onnx and onnxruntime are imported inside
the functions that need them.
"""
