"""Turning foreign exceptions (torch, ONNX, ONNX Runtime, user code) into one-line CompressErrors.

User models, factories and exporters fail with long multi-line messages and tracebacks. The CLI
shows one line, so each step that runs foreign code is wrapped in :func:`as_compress_error`,
which names the step and keeps the first meaningful line of the original message.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import re

from stallscope.errors import CompressError, StallscopeError

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def first_line(exc: BaseException, *, limit: int = 300) -> str:
    """``ExcType: first non-empty line of the message``, cut to ``limit`` characters."""
    lines = [line.strip() for line in _ANSI.sub("", str(exc)).splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def export_summary(exc: BaseException, *, limit: int = 300) -> str:
    """The informative line of a ``torch.onnx`` export error.

    The exporter's message opens with generic advice and names the real failure (e.g. "No ONNX
    function found for <OpOverload(op='prims.bessel_j0')>") under "## Exception summary".
    """
    text = _ANSI.sub("", str(exc))
    if "## Exception summary" in text:
        for line in text.split("## Exception summary", 1)[1].splitlines():
            line = line.strip()
            if line.startswith("<class "):
                detail = re.sub(r"^<class '[\w.]+'>:\s*", "", line)
                return detail if len(detail) <= limit else detail[: limit - 3] + "..."
    return first_line(exc, limit=limit)


@contextmanager
def as_compress_error(step: str) -> Iterator[None]:
    """Re-raise anything but a StallscopeError as ``CompressError(f"{step}: {first line}")``.

    KeyboardInterrupt passes through untouched so that Ctrl-C still interrupts.
    """
    try:
        yield
    except StallscopeError:
        raise
    except Exception as exc:
        raise CompressError(f"{step}: {first_line(exc)}") from exc
