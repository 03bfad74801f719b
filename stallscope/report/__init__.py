"""Reports for people: Markdown (CI job summaries), offline HTML with Altair charts, diffs, and
the merged Perfetto timeline.

``render(doc, fmt=..., store=..., out=...)`` turns a findings document (``stallscope.api.postmortem``)
into the Markdown or HTML text; the charts are computed from the job's views in the store
(:mod:`.data`), drawn with Altair (:mod:`.charts`) and laid out by :mod:`.markdown` / :mod:`.html`.
Altair and vl-convert load only when a report is rendered.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # pragma: no cover
    from stallscope.store.queries import Store

Format = Literal["md", "html"]
ImageMode = Literal["auto", "files", "inline", "none"]


def render(doc: dict[str, Any], *, fmt: Format, store: str | Path | None = None, out: str | Path | None = None,
           images: ImageMode = "auto", charts: bool = True) -> str:
    """The Markdown or HTML post-mortem of ``doc`` for the job it names in ``store``.

    ``images`` (Markdown only): ``files`` writes ``<out stem>-<chart>.png`` beside ``out``;
    ``inline`` embeds them as ``data:`` URIs; ``none`` leaves them out; ``auto`` is ``files`` when
    ``out`` is given, else ``none``. ``charts=False`` skips the data and charts (findings only).
    """
    from stallscope.errors import UsageError

    if fmt not in ("md", "html"):
        raise UsageError(f"unknown report format {fmt!r} (md or html)")
    data: Any = None
    built: list[tuple[Any, Any]] = []
    if charts:
        data, built = job_charts(doc, store=store)
    store_arg = None if store is None else str(store)
    if fmt == "html":
        from stallscope.report.html import render_postmortem as html_report

        return html_report(doc, built, notes=data.notes if data is not None else [], store=store_arg)
    from stallscope.report.markdown import render_postmortem as md_report

    mode = ("files" if out is not None else "none") if images == "auto" else images
    return md_report(doc, built, data, images=mode, out=out, store=store_arg)


def job_charts(doc: dict[str, Any], *, store: "str | Path | Store | None" = None) -> tuple[Any, list[tuple[Any, Any]]]:
    """The report tables and the built charts for the job of ``doc`` (``store``: a path, or an
    open :class:`~stallscope.store.queries.Store` restricted to that job, which is reused)."""
    from stallscope.api import open_store
    from stallscope.report.charts import build_all
    from stallscope.report.data import collect
    from stallscope.store.queries import Store

    job = doc["job"]["id"]
    s = store if isinstance(store, Store) and store.job == job else open_store(store.root if isinstance(store, Store) else store, job=job)
    data = collect(s, doc)
    return data, build_all(data)


__all__ = ["render", "job_charts"]
