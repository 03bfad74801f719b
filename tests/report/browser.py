"""Drive headless Chromium for the report tests: the DOM after scripts ran, and console output.

``--dump-dom`` prints the document after the page settled; ``--virtual-time-budget`` lets timers
and promises run (vega-embed renders asynchronously) without waiting in real time. With
``--enable-logging=stderr`` Chromium writes every console message as an ``INFO:CONSOLE`` line on
stderr (all levels look alike there, so the page itself also records errors in ``data-*``
attributes of ``<body>``; see stallscope/report/templates/page.html).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio"]


@dataclass
class Page:
    dom: str
    console: list[str]   #: console messages of the page (any level)
    body: dict[str, str]  #: attributes of <body> after rendering

    @property
    def svg_count(self) -> int:
        return len(re.findall(r"<svg\b", self.dom))

    def charts(self) -> dict[str, tuple[int, int]]:
        """chart id -> (Vega SVGs inside its container, drawn paths inside them)."""
        out = {}
        for m in re.finditer(r'<div id="chart-([a-z_]+)"[^>]*>(.*?)</section>', self.dom, flags=re.S):
            svgs = re.findall(r'<svg[^>]*class="marks".*?</svg>', m.group(2), flags=re.S)
            out[m.group(1)] = (len(svgs), sum(len(re.findall(r"<path\b", s)) for s in svgs))
        return out


def load(chromium: str, html: Path, *, budget_ms: int = 20000, timeout_s: int = 120) -> Page:
    """Open ``html`` in headless Chromium and return the rendered DOM and console messages."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        r = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
                            f"--virtual-time-budget={budget_ms}", "--dump-dom", html.resolve().as_uri()],
                           capture_output=True, text=True, timeout=timeout_s)
    console = [line for line in r.stderr.splitlines() if ":CONSOLE" in line]
    # the inlined libraries mention "<body>" in strings: the real tag is the last one before <main>
    head = r.stdout.split("<main>", 1)[0]
    tags = re.findall(r"<body([^>]*)>", head)
    body = dict(re.findall(r'([\w-]+)="([^"]*)"', tags[-1])) if tags else {}
    if r.returncode != 0 and not r.stdout:
        raise RuntimeError(f"chromium exited {r.returncode}: {r.stderr[-2000:]}")
    return Page(r.stdout, console, body)


def screenshot(chromium: str, html: Path, png: Path, *, width: int = 1280, height: int = 1600, budget_ms: int = 20000) -> None:
    """A PNG of the page's first ``height`` pixels at ``width`` (as a user sees it)."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                        f"--virtual-time-budget={budget_ms}", f"--screenshot={png.resolve()}", html.resolve().as_uri()],
                       capture_output=True, text=True, timeout=120, check=True)
