"""Shared fixtures: paths to the real data in ../shared and a fresh store per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = (ROOT / ".." / "shared").resolve()
if not SHARED.exists() and os.environ.get("STALLSCOPE_SHARED"):
    SHARED = Path(os.environ["STALLSCOPE_SHARED"])
TRACES = SHARED / "traces"
LOGS = SHARED / "logs"


def pytest_configure(config: pytest.Config) -> None:
    if not TRACES.exists():
        raise pytest.UsageError(f"real test data not found at {SHARED} (set STALLSCOPE_SHARED)")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture(autouse=True)
def _isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Never touch the user's store or config from a test."""
    monkeypatch.setenv("STALLSCOPE_STORE", str(tmp_path / "default-store"))
    monkeypatch.setenv("STALLSCOPE_CONFIG", str(tmp_path / "no-config.toml"))
