"""Where Perch's files are: the config file, its template, and the state files by the database.

`config_path(given)` is the config file a command uses: `--config PATH`, else `$PERCH_CONFIG`,
else `./config.yaml` when the working directory is a Perch checkout, else
`$XDG_CONFIG_HOME/perch/config.yaml` (`~/.config/perch/config.yaml`). The shipped template
(every key, its default and a comment) is package data: `template_text()`. The daemon's
state directory is the database's folder: the control socket (`socket_path`), the status
file (`status_path`) and, while the console talks on the terminal, the log (`log_path`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path

from bot.config.schema import Config

SOCKET_NAME = "perch.sock"
STATUS_NAME = "status.json"
LOG_NAME = "perch.log"


def is_checkout(folder: Path) -> bool:
    """True when `folder` is the top of a Perch source tree (a clone or a copy of one)."""
    return (folder / "pyproject.toml").is_file() and (folder / "bot/operator/cli.py").is_file()


def user_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CONFIG_HOME/perch/config.yaml`, else `~/.config/perch/config.yaml`."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path(env.get("HOME") or "~") / ".config"
    return root.expanduser() / "perch" / "config.yaml"


def config_path(given: str | None, environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if given:
        return Path(given).expanduser()
    if env.get("PERCH_CONFIG"):
        return Path(env["PERCH_CONFIG"]).expanduser()
    if is_checkout(Path.cwd()):
        return Path("config.yaml")
    return user_config_path(env)


def template_text() -> str:
    """The shipped config template (`bot/config/template.yaml`, installed with the package)."""
    return files("bot.config").joinpath("template.yaml").read_text(encoding="utf-8")


def socket_path(config: Config) -> Path:
    """The control socket: in the state directory, next to the database."""
    return config.db_path.with_name(SOCKET_NAME)


def status_path(config: Config) -> Path:
    """What the running daemon last said of itself (`perch status` without a socket)."""
    return config.db_path.with_name(STATUS_NAME)


def log_path(config: Config) -> Path:
    """Where the log goes while the console owns the terminal: `logging.file`, else
    `perch.log` in the state directory."""
    if config.logging.file is not None:
        return config.resolve(config.logging.file)
    return config.db_path.with_name(LOG_NAME)
