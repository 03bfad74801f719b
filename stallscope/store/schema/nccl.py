"""NCCL debug-log and watchdog tables (filled in by the NCCL log parser)."""
