"""The console entry point: a bug of ours is one line on stderr and exit 3, never a traceback."""

from __future__ import annotations

import pytest

from stallscope.cli import main as cli_main


def test_internal_error_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def boom(*_a: object, **_k: object) -> None:
        raise ValueError("something we did not expect")

    monkeypatch.delenv("STALLSCOPE_DEBUG", raising=False)
    monkeypatch.setattr(cli_main.cli, "main", boom)
    with pytest.raises(SystemExit) as exc:
        cli_main.main(["jobs"])
    err = capsys.readouterr().err
    assert exc.value.code == 3
    assert err.count("\n") == 1 and "internal error: ValueError: something we did not expect" in err
    assert "Traceback" not in err


def test_debug_env_reraises(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_a: object, **_k: object) -> None:
        raise ValueError("shown with its traceback")

    monkeypatch.setenv("STALLSCOPE_DEBUG", "1")
    monkeypatch.setattr(cli_main.cli, "main", boom)
    with pytest.raises(ValueError):
        cli_main.main(["jobs"])
