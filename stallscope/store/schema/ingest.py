"""Tables describing the ingest itself: which files were read and what was skipped."""

from __future__ import annotations

import pyarrow as pa

from stallscope.store.schema import C, TableSpec, register

FILES = TableSpec(
    "files",
    "Every file found in the bundle, what ingest recognized it as, and what came of it.",
    (
        C("file", pa.string(), "path inside the bundle (archives: `archive.tar.gz!member`)"),
        C("kind", pa.string(), "kineto | nccl_log | manifest | execution_trace | unknown"),
        C("status", pa.string(), "ok | partial (kept what was valid) | skipped | failed"),
        C("bytes", pa.int64(), "size as stored", "bytes"),
        C("sha256", pa.string(), "content hash as stored"),
        C("rank", pa.int32(), "rank the file belongs to, when known"),
        C("rows", pa.int64(), "rows written from it (events for traces, lines for logs)"),
    ),
)

INGEST_WARNINGS = TableSpec(
    "ingest_warnings",
    "Everything ingest skipped or doubted, one line each: truncated traces, unreadable files, unknown lines.",
    (
        C("file", pa.string(), "path inside the bundle"),
        C("rank", pa.int32(), "rank, when known"),
        C("code", pa.string(), "truncated | corrupt_gzip | not_json | empty | not_a_trace | duplicate_rank | profiling_windows (a rank's several trace files read as one) | unknown_lines | bad_event | unsupported | ..."),
        C("message", pa.string(), "one line for humans, naming the file"),
        C("byte_offset", pa.int64(), "offset in the (decompressed) file where the problem starts, when meaningful", "bytes"),
        C("count", pa.int64(), "how many items this warning covers (e.g. unknown lines), else 1"),
    ),
)

register(FILES, INGEST_WARNINGS)
