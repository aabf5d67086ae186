"""The secrets Perch loads itself: `secrets.env_file` and `secrets.credentials_dir`.

`secret_env(section, base, env)` reads the env file the config names (`VAR=value` lines, as
`perch onboard` writes them; `export` and shell quoting allowed) and returns the variables it
adds for `${VAR}` interpolation (a variable set and non-empty in the environment wins), plus
`CREDENTIALS_DIRECTORY` for `${cred:name}` when systemd did not set one. The file must be a
regular file that no other user can read (mode 0600), the directory 0700: anything wider is
refused with one line saying the `chmod` to run. Relative paths are taken from the config's
folder; `~` is the user's home. Nothing here is put into the process environment, so
commands the model runs never inherit it.
"""

from __future__ import annotations

import re
import shlex
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
MAX_ENV_FILE_BYTES = 1_000_000


class SecretSourceError(Exception):
    """A secrets file or folder Perch refuses to read; the message names the key and the fix."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


def parse_env_lines(text: str) -> dict[str, str]:
    """`VAR=value` lines (comments, blank lines and anything else skipped), shell-unquoted."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        match = _ENV_LINE.match(line)
        if match:
            raw = match.group(2).strip()
            try:
                parts = shlex.split(raw)
            except ValueError:
                parts = [raw]
            values[match.group(1)] = parts[0] if parts else ""
    return values


def _place(value: Any, base: Path | None) -> Path:
    path = Path(str(value)).expanduser()
    return path if path.is_absolute() or base is None else base / path


def _private(path: Path, key: str, *, folder: bool) -> None:
    try:
        info = path.stat()
    except FileNotFoundError:
        what = "folder" if folder else "file"
        raise SecretSourceError(
            key,
            f"{path} does not exist; create it (mode {'0700' if folder else '0600'}) or "
            f"run perch onboard, or remove {key} from the config ({what} not found)",
        ) from None
    except OSError as exc:
        raise SecretSourceError(key, f"cannot read {path}: {exc.strerror}") from None
    kind_ok = stat.S_ISDIR(info.st_mode) if folder else stat.S_ISREG(info.st_mode)
    if not kind_ok:
        raise SecretSourceError(key, f"{path} is not a {'folder' if folder else 'regular file'}")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        wanted = "700" if folder else "600"
        raise SecretSourceError(
            key,
            f"{path} can be read by other users (mode {mode:04o}); it holds secrets, so Perch "
            f"refuses it: run chmod {wanted} {path}",
        )


def secret_files(section: Any, base: Path | None) -> list[Path]:
    """The env file the `secrets:` section names (kept from every sandbox), if any."""
    if not isinstance(section, dict) or not section.get("env_file"):
        return []
    return [_place(section["env_file"], base)]


def secret_env(section: Any, base: Path | None, env: Mapping[str, str]) -> dict[str, str]:
    """The variables the `secrets:` section adds to `env` (see the module docstring)."""
    if not isinstance(section, dict):
        return {}
    added: dict[str, str] = {}
    env_file = section.get("env_file")
    if env_file:
        path = _place(env_file, base)
        _private(path, "secrets.env_file", folder=False)
        try:
            with path.open("rb") as handle:
                data = handle.read(MAX_ENV_FILE_BYTES + 1)
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SecretSourceError("secrets.env_file", f"cannot read {path}: {exc}") from None
        if len(data) > MAX_ENV_FILE_BYTES:
            raise SecretSourceError(
                "secrets.env_file", f"{path} is over 1 MB; is it the right file?"
            )
        for name, value in parse_env_lines(text).items():
            if not env.get(name):
                added[name] = value
    folder = section.get("credentials_dir")
    if folder and not env.get("CREDENTIALS_DIRECTORY"):
        path = _place(folder, base)
        _private(path, "secrets.credentials_dir", folder=True)
        added["CREDENTIALS_DIRECTORY"] = str(path)
    return added
