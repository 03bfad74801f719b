"""Where the analysis stage keeps its documented SQL views."""

from __future__ import annotations

from pathlib import Path

ANALYSIS_SQL = Path(__file__).parent / "sql"
