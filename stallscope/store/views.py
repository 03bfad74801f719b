"""Load documented SQL view files, in order, from the folders that hold them.

Each stage keeps its SQL next to its code (``store/sql`` for table-level conveniences,
``analysis/sql`` for physics); files are applied in name order within a folder (``10_*.sql``
before ``20_*.sql``) and folders in the order given, so a view may use any view defined before it.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from stallscope.store.sqldoc import SqlView, parse_sql_file

STORE_SQL = Path(__file__).parent / "sql"


def load_views(dirs: Iterable[Path]) -> list[SqlView]:
    out: list[SqlView] = []
    for d in dirs:
        out.extend(_load_dir(Path(d)))
    return out


@lru_cache(maxsize=None)
def _load_dir(d: Path) -> tuple[SqlView, ...]:
    views: list[SqlView] = []
    for f in sorted(d.glob("*.sql")):
        views.extend(parse_sql_file(f))
    return tuple(views)
