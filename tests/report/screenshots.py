"""Regenerate the screenshots of the demo report in docs/ (``python tests/report/screenshots.py``).

Runs ``stallscope demo`` into a temporary folder, then photographs the report with headless
Chromium: the top of the page, and pages showing only some chart sections (the other sections
hidden with an injected style, so no image library is needed to crop).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.report.browser import screenshot  # noqa: E402

#: file -> (sections to keep, or None for the whole page top; window height)
SHOTS: dict[str, tuple[list[str] | None, int]] = {
    "report-overview.png": (None, 1480),
    "report-charts.png": (["heatmap", "breakdown"], 1060),
    "report-timeline.png": (["timeline", "bandwidth"], 1040),
}


def only(html: str, keep: list[str]) -> str:
    """The page with every top-level block hidden except the chart sections ``keep``."""
    ids = ", ".join(f"section#{k}" for k in keep)
    style = (f"<style>main > *:not({ids}) {{ display: none !important; }} main {{ padding-top: 8px; }}</style>")
    # "</head>" also occurs inside the inlined libraries: anchor on the page's own spec script
    marker = '<script type="application/json" id="stallscope-specs">'
    return html.replace(marker, style + marker, 1)


def main() -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if not chromium:
        raise SystemExit("headless Chromium not found (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "stallscope", "demo", "--out", tmp], check=True, cwd=ROOT, capture_output=True)
        report = Path(tmp) / "report.html"
        html = report.read_text()
        for name, (keep, height) in SHOTS.items():
            page = report if keep is None else Path(tmp) / f"{name}.html"
            if keep is not None:
                page.write_text(only(html, keep))
            screenshot(chromium, page, ROOT / "docs" / name, width=1200, height=height)
            print(f"wrote docs/{name}")


if __name__ == "__main__":
    main()
