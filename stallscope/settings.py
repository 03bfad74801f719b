"""Settings declared once, as data, resolved config file < ``STALLSCOPE_*`` env < command-line flag.

The config file is TOML at ``$STALLSCOPE_CONFIG`` or ``~/.config/stallscope/config.toml``::

    store = "/data/stallscope"
    workers = 2
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str

    @property
    def env(self) -> str:
        return "STALLSCOPE_" + self.name.upper().replace("-", "_")


SETTINGS: tuple[Setting, ...] = (
    Setting("store", None, "store directory (default: the per-user data dir)"),
    Setting("workers", None, "parallel ingest workers (default: one per CPU core, at most one per file)"),
    Setting("format", "table", "default output format of `sql` and `jobs`"),
)


def _config_file() -> Path:
    env = os.environ.get("STALLSCOPE_CONFIG")
    if env:
        return Path(env).expanduser()
    return Path("~/.config/stallscope/config.toml").expanduser()


def _file_values() -> dict[str, Any]:
    path = _config_file()
    if not path.is_file():
        return {}
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - python 3.10
        return {}
    from stallscope.errors import UsageError

    try:
        return tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, OSError) as exc:
        raise UsageError(f"{path}: invalid config file ({exc})") from None


def resolve(name: str, flag: Any = None) -> Any:
    """The effective value of a setting: flag if given, else env, else config file, else default."""
    setting = next(s for s in SETTINGS if s.name == name)
    if flag is not None:
        return flag
    if setting.env in os.environ and os.environ[setting.env] != "":
        return os.environ[setting.env]
    values = _file_values()
    if name in values:
        return values[name]
    return setting.default
