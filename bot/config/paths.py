"""Where Perch's files are: the config file, and the state files next to the database.

`config_path(given)` is the config file a command uses: `--config PATH`, else `./config.yaml`,
else `$PERCH_CONFIG`. The daemon's state directory is the database's folder: the control
socket (`socket_path`) and the status file (`status_path`) live there.
"""

from __future__ import annotations

import os
from pathlib import Path

from bot.config.schema import Config

SOCKET_NAME = "perch.sock"
STATUS_NAME = "status.json"


def config_path(given: str | None) -> Path:
    if given:
        return Path(given)
    local = Path("config.yaml")
    if local.exists():
        return local
    env = os.environ.get("PERCH_CONFIG")
    return Path(env) if env else local


def socket_path(config: Config) -> Path:
    """The control socket: in the state directory, next to the database."""
    return config.db_path.with_name(SOCKET_NAME)


def status_path(config: Config) -> Path:
    """What the running daemon last said of itself (`perch status` without a socket)."""
    return config.db_path.with_name(STATUS_NAME)
