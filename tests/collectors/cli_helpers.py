"""Helpers for the collector tests: run the real ``stallscope`` CLI in a child process (a module, not a
conftest, so tests import it by name)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for a ``python -m stallscope`` child: this checkout first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra)
    return env


def stallscope(*args: str, env: dict[str, str] | None = None, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stallscope", *args], env=env or cli_env(), capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, **kw)
