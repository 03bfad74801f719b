"""Generate the reference docs from the code: ``python -m stallscope.docs [--check]``.

``docs/schema.md`` comes from the table specs (``store/schema``), ``docs/views.md`` from the doc
blocks of the SQL views (``store/sql``, ``analysis/sql``), ``docs/rules.md`` from the rule
docstrings. Tests run ``--check`` logic so code and docs never disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def views_markdown() -> str:
    from stallscope.api import views

    lines = ["# SQL views", "",
             "Generated from the doc blocks above each `CREATE VIEW` in `stallscope/store/sql/`,",
             "`stallscope/analysis/sql/` and `stallscope/compress/sql/` by `python -m stallscope.docs`.",
             "Views starting with `_` are helpers; the compress views exist once a compress run is in the store.",
             "Stored tables are in [schema.md](schema.md); `stallscope tables NAME` shows the same docs.", ""]
    for v in views():
        if v.kind != "VIEW":
            continue
        src = Path(v.source).relative_to(Path(__file__).resolve().parents[1]).as_posix()
        lines += [f"## `{v.name}`", "", f"*Defined in `{src}`.* {v.doc}", ""]
        if v.columns:
            lines += ["| column | meaning |", "|---|---|"]
            lines += [f"| `{c}` | {d.replace('|', chr(92) + '|')} |" for c, d in v.columns.items()]
            lines.append("")
    return "\n".join(lines)


def generated() -> dict[Path, str]:
    from stallscope.store.schema import to_markdown

    out = {DOCS / "schema.md": to_markdown(), DOCS / "views.md": views_markdown()}
    try:
        from stallscope.rules.registry import rules_markdown
    except ImportError:
        pass
    else:
        out[DOCS / "rules.md"] = rules_markdown()
    return out


def main(argv: list[str]) -> int:
    stale = []
    for path, text in generated().items():
        if "--check" in argv:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.parent.mkdir(exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print("stale (run python -m stallscope.docs): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
