"""Documented SQL views: parse the doc block above each ``CREATE VIEW`` in a ``.sql`` file.

Format (one block per view, Perfetto-stdlib style)::

    -- What the view holds, in a sentence or a paragraph.
    -- More prose lines...
    -- @column instance_id  id of the collective instance -> collective_instances.instance_id
    -- @column wait_ns      (ns) time this member waited for the last arrival
    CREATE OR REPLACE VIEW collective_members AS
    SELECT ...;

Views whose name starts with ``_`` are helpers (documented too, hidden from ``stallscope tables``).
The catalog attaches the prose and the column docs to DuckDB with ``COMMENT ON``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_CREATE_RE = re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP\s+|TEMPORARY\s+)?(VIEW|TABLE|MACRO)\s+([A-Za-z_][A-Za-z0-9_]*)", re.I)
_BLANK = "\x00"
_COL_RE = re.compile(r"^@column\s+([A-Za-z_][A-Za-z0-9_]*)\s+(.*)$")


@dataclass
class SqlView:
    name: str
    kind: str  #: VIEW | TABLE | MACRO
    doc: str
    columns: dict[str, str] = field(default_factory=dict)
    sql: str = ""
    source: str = ""

    @property
    def helper(self) -> bool:
        return self.name.startswith("_")


def parse_sql_file(path: str | Path) -> list[SqlView]:
    """Split a file into statements with their doc blocks (statements end with ``;`` at line end)."""
    text = Path(path).read_text()
    views: list[SqlView] = []
    doc_lines: list[str] = []
    stmt_lines: list[str] = []
    current: SqlView | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if current is None:
            if stripped.startswith("--"):
                doc_lines.append(stripped[2:].strip())
                continue
            if not stripped:
                if doc_lines and doc_lines[-1] != _BLANK:
                    doc_lines.append(_BLANK)
                continue
            m = _CREATE_RE.match(line)
            if not m:
                doc_lines = []
                continue
            current = SqlView(name=m.group(2), kind=m.group(1).upper(), doc="", source=str(path))
            prose, cols = [], {}
            # only the block directly above the statement documents it
            block = _last_block(doc_lines)
            for d in block:
                cm = _COL_RE.match(d)
                if cm:
                    cols[cm.group(1)] = cm.group(2).strip()
                elif cols and d and not d.startswith("@"):
                    last = list(cols)[-1]
                    cols[last] += " " + d
                else:
                    prose.append(d)
            current.doc = " ".join(p for p in prose if p).strip()
            current.columns = cols
            doc_lines = []
            stmt_lines = [line]
            if stripped.endswith(";"):
                current.sql = "\n".join(stmt_lines)
                views.append(current)
                current = None
            continue
        stmt_lines.append(line)
        if stripped.endswith(";") and not stripped.startswith("--"):
            current.sql = "\n".join(stmt_lines)
            views.append(current)
            current = None
    return views


def _last_block(lines: list[str]) -> list[str]:
    while lines and lines[-1] == _BLANK:
        lines = lines[:-1]
    if _BLANK in lines:
        idx = len(lines) - 1 - lines[::-1].index(_BLANK)
        return lines[idx + 1 :]
    return lines
