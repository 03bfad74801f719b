"""Normalized table schemas: every stored table, every column, its type, unit and meaning.

This is the one place where the shape of the store is declared. Parsers (``ingest``) produce
Arrow tables with exactly these schemas, the catalog (``store.catalog``) builds DuckDB views from
them (with the docs attached as ``COMMENT ON``), and ``docs/schema.md`` is generated from them
(``python -m stallscope.store.schema > docs/schema.md``; a test keeps the two in sync).

Conventions: times are integer nanoseconds (``*_ns``) on the rank's own trace clock unless the
column says ``aligned``; sizes are bytes; ``rank`` is the global rank; every table also has the
hive partition column ``job`` added by the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

#: bumped when a stored table changes shape; written into Parquet metadata and job metadata
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Column:
    """One column: name, Arrow type, unit (``None`` if unitless) and meaning."""

    name: str
    type: pa.DataType
    doc: str
    unit: str | None = None


@dataclass(frozen=True)
class TableSpec:
    """A stored table: what one row is, where it comes from, and its columns."""

    name: str
    doc: str
    columns: tuple[Column, ...]
    #: the stage that writes it (``ingest`` or ``analysis``), for the docs
    stage: str = "ingest"
    #: columns besides text that Parquet dictionary-encodes (integers that repeat from row to row:
    #: pids, devices, ranks); text columns always are (``ingest.writer.parquet_options``)
    dictionary: tuple[str, ...] = ()
    _schema: pa.Schema | None = field(default=None, compare=False, repr=False)

    @property
    def schema(self) -> pa.Schema:
        meta = {b"stallscope.table": self.name.encode(), b"stallscope.schema_version": str(SCHEMA_VERSION).encode()}
        return pa.schema([pa.field(c.name, c.type) for c in self.columns], metadata=meta)

    def empty(self) -> pa.Table:
        return self.schema.empty_table()

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)


_REGISTRY: dict[str, TableSpec] = {}
_FAMILY: dict[str, str] = {}
#: documentation order of the table families (modules of this package)
FAMILIES = ("trace", "nccl", "manifest", "ingest", "analysis")


def register(*specs: TableSpec) -> None:
    import sys

    family = sys._getframe(1).f_globals.get("__name__", "").rsplit(".", 1)[-1]
    for spec in specs:
        if spec.name in _REGISTRY and _REGISTRY[spec.name] != spec:
            raise RuntimeError(f"table {spec.name} registered twice with different specs")
        _REGISTRY[spec.name] = spec
        _FAMILY[spec.name] = family


def tables() -> dict[str, TableSpec]:
    """All registered table specs, in registration order (imports every family once)."""
    # import order = documentation order
    from stallscope.store.schema import trace  # noqa: F401
    from stallscope.store.schema import nccl  # noqa: F401
    from stallscope.store.schema import manifest  # noqa: F401
    from stallscope.store.schema import ingest  # noqa: F401
    from stallscope.store.schema import analysis  # noqa: F401

    order = {f: i for i, f in enumerate(FAMILIES)}
    names = sorted(_REGISTRY, key=lambda n: (order.get(_FAMILY.get(n, ""), len(order)), list(_REGISTRY).index(n)))
    return {n: _REGISTRY[n] for n in names}


def table(name: str) -> TableSpec:
    return tables()[name]


def C(name: str, type_: pa.DataType, doc: str, unit: str | None = None) -> Column:  # noqa: N802
    """Shorthand used by the table modules."""
    return Column(name, type_, doc, unit)


def to_markdown() -> str:
    """Render every stored table as Markdown (the body of ``docs/schema.md``)."""
    lines = [
        "# Store schema",
        "",
        "Generated from `stallscope/store/schema/` by `python -m stallscope.store.schema > docs/schema.md`;",
        "a test fails when this file and the code disagree. Every table also has the hive partition",
        "column `job` (VARCHAR). Times are integer nanoseconds on the rank's own trace clock unless",
        "the column says *aligned*. Views defined in SQL (with their own column docs) are listed by",
        "`stallscope tables` and in [views.md](views.md).",
        "",
    ]
    for spec in tables().values():
        lines += [f"## `{spec.name}`", "", f"*Written by `{spec.stage}`.* {spec.doc}", "", "| column | type | unit | meaning |", "|---|---|---|---|"]
        for c in spec.columns:
            doc = c.doc.replace("|", "\\|")
            lines.append(f"| `{c.name}` | {c.type} | {c.unit or ''} | {doc} |")
        lines.append("")
    return "\n".join(lines)
