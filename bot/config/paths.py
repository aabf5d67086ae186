"""Where Perch's files are: the config file, its template, and the state files by the database.

`config_path(given)` is the config file a command uses: `--config PATH`, else `$PERCH_CONFIG`,
else, when the working directory is a Perch checkout, its `./config.local.yaml` (your own
copy, ignored by git) if there is one and `./config.yaml` (the tracked default) if not, else
`$XDG_CONFIG_HOME/perch/config.yaml` (`~/.config/perch/config.yaml`). `edited_config_path`
is the file a command that changes the config writes: the same, except that in a checkout it
is always `./config.local.yaml`, so the tracked default stays as shipped.

The shipped template (every key, its default and a comment) is the checkout's top-level
`config.yaml`, the one source: a wheel carries it as data (`share/perch/config.yaml`) and
`template_text()` reads whichever is there. The daemon's state directory is the database's
folder: the control socket (`socket_path`), the status file (`status_path`) and, while the
console talks on the terminal, the log (`log_path`).
"""

from __future__ import annotations

import os
import site
import sys
from collections.abc import Mapping
from pathlib import Path

from bot.config.schema import Config

SOCKET_NAME = "perch.sock"
STATUS_NAME = "status.json"
LOG_NAME = "perch.log"
CONFIG_NAME = "config.yaml"
LOCAL_NAME = "config.local.yaml"  # a checkout's own settings, ignored by git
CHECKOUT = Path(__file__).resolve().parents[2]  # the source tree, when running from one


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
        local = Path(LOCAL_NAME)
        return local if local.is_file() else Path(CONFIG_NAME)
    return user_config_path(env)


def edited_config_path(given: str | None, environ: Mapping[str, str] | None = None) -> Path:
    """The file `perch onboard` and `perch mcp add` write: `config_path`'s, except that in a
    checkout it is `./config.local.yaml` (made from the tracked `config.yaml` the first time)."""
    env = os.environ if environ is None else environ
    if not given and not env.get("PERCH_CONFIG") and is_checkout(Path.cwd()):
        return Path(LOCAL_NAME)
    return config_path(given, env)


def shipped_config_path() -> Path:
    """The shipped `config.yaml`: the checkout's own when the code runs from one (an editable
    install), else the copy the wheel put under `<prefix>/share/perch/`."""
    if is_checkout(CHECKOUT):
        return CHECKOUT / CONFIG_NAME
    prefixes = [Path(sys.prefix), Path(site.getuserbase())]  # a venv or system install; --user
    for prefix in prefixes:
        candidate = prefix / "share" / "perch" / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return prefixes[0] / "share" / "perch" / CONFIG_NAME


def template_text() -> str:
    """The shipped config template's text (`shipped_config_path`)."""
    path = shipped_config_path()
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path}: the shipped config template is missing; reinstall Perch "
            "(pip install --force-reinstall perch) or pass --config PATH"
        ) from None


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
