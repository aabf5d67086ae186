"""The files `perch onboard` writes: config.yaml (comments kept), the env file, credentials.

`config_template(path)` reads the existing config, or the shipped `config.yaml` for a new
one, as a round-trip tree (ruamel.yaml), so writing it back keeps every comment and the key
order. `write_config` keeps the previous file as `<name>.bak` and replaces it atomically; the
new file and the backup keep the old file's mode (a 0600 config stays 0600) and, where we may,
its owner and group.
Secrets files are created with mode 0600 (and a credentials directory 0700) before anything
is written into them; an existing env file is edited line by line, never truncated.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ruamel.yaml import YAML

ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")
SHIPPED = Path(__file__).resolve().parents[2] / "config.yaml"
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def _yaml() -> YAML:
    from ruamel.yaml import YAML  # only onboard needs it: kept off the other commands' start

    yaml = YAML()  # round-trip mode
    yaml.preserve_quotes = True
    yaml.width = 120
    return yaml


def config_template(path: Path) -> Any:
    """The tree to edit: `path` if it exists, else the shipped config, else empty."""
    source = path if path.exists() else SHIPPED
    if not source.exists():
        return {}
    data = _yaml().load(source.read_text(encoding="utf-8"))
    return data if data is not None else {}


def config_text(data: Any) -> str:
    buffer = io.StringIO()
    _yaml().dump(data, buffer)
    return buffer.getvalue()


def write_config(path: Path, data: Any) -> None:
    text = config_text(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        old = path.stat()
    except FileNotFoundError:
        old = None
    if old is not None:
        _write_like(path.with_name(path.name + ".bak"), path.read_bytes(), old)
    temporary = path.with_name(f".{path.name}.tmp")
    _write_like(temporary, text.encode("utf-8"), old)
    temporary.replace(path)


def _write_like(target: Path, data: bytes, like: os.stat_result | None) -> None:
    """Write `target` afresh with `like`'s mode (and owner, where allowed) from the start,
    so it is never readable by more people than the file it copies or replaces; without
    `like`, as any new file (0644 less the umask)."""
    target.unlink(missing_ok=True)
    first = stat.S_IMODE(like.st_mode) & 0o600 if like is not None else 0o644
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, first)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if like is not None:
            with contextlib.suppress(PermissionError):
                os.fchown(fd, like.st_uid, like.st_gid)
            os.fchmod(fd, stat.S_IMODE(like.st_mode))
    finally:
        os.close(fd)


def read_env_file(path: Path | None) -> dict[str, str]:
    if path is None or not path.exists():
        return {}
    values = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _ENV_LINE.match(line)
        if match:
            raw = match.group(2).strip()
            try:
                parts = shlex.split(raw)
            except ValueError:
                parts = [raw]
            values[match.group(1)] = parts[0] if parts else ""
    return values


def write_env_file(path: Path, values: dict[str, str]) -> None:
    """Set `values` in the env file (mode 0600), keeping every other line as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "r+", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
        pending = dict(values)
        for i, line in enumerate(lines):
            match = _ENV_LINE.match(line)
            if match and match.group(1) in pending:
                name = match.group(1)
                lines[i] = f"{name}={_quote(pending.pop(name))}"
        lines += [f"{name}={_quote(value)}" for name, value in pending.items()]
        handle.seek(0)
        handle.truncate()
        handle.write("\n".join(lines) + "\n")


def write_credentials(directory: Path, values: dict[str, str]) -> list[str]:
    """One 0600 file per secret in a 0700 directory; the unit's `LoadCredential=` lines."""
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    lines = []
    for name, value in values.items():
        target = directory / name.lower()
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(value)
        lines.append(f"LoadCredential={name.lower()}:{target.resolve()}")
    return lines


def _quote(value: str) -> str:
    return value if re.fullmatch(r"[A-Za-z0-9_./:+@-]*", value) else shlex.quote(value)
