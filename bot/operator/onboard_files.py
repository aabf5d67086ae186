"""The files `perch onboard` writes: config.yaml (comments kept), the env file, credentials.

`config_template(path)` reads the existing config, or for a new one the checkout's tracked
`config.yaml` beside a `config.local.yaml`, else the shipped template
(`bot.config.paths.template_text`), as a round-trip tree (ruamel.yaml), so
writing it back keeps every comment and the key order; `set_key` edits it by dotted key.
`write_config` keeps the previous file as `<name>.bak.N` (the next free number, so no run
overwrites an earlier backup) and replaces it atomically, creating missing folders. The
new file and the backup keep the old file's mode (a 0600 config stays 0600) and, where we may,
its owner and group.
Secrets files are created with mode 0600 (and a credentials directory 0700) before anything
is written into them; an existing env file is edited line by line, never truncated.
`earlier_secrets` finds the env file a re-run reads its defaults from, `secret_refs` the
`${VAR}` references of a channel's section.
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

from bot.config.paths import CONFIG_NAME, LOCAL_NAME, template_text
from bot.config.secret_sources import parse_env_lines

if TYPE_CHECKING:
    from ruamel.yaml import YAML

ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")  # lines to edit


def _yaml() -> YAML:
    from ruamel.yaml import YAML  # only onboard needs it: kept off the other commands' start
    from ruamel.yaml.resolver import VersionedResolver

    class Yaml11(VersionedResolver):
        """YAML 1.1 as Perch's loader reads it: `off`, `yes`... are quoted when they are text."""

        @property
        def processing_version(self) -> tuple[int, int]:
            return (1, 1)

    yaml = YAML()  # round-trip mode
    yaml.Resolver = Yaml11
    yaml.preserve_quotes = True
    yaml.width = 120
    yaml.representer.add_representer(
        type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null")
    )
    return yaml


def config_template(path: Path) -> Any:
    """The tree to edit: `path` if it exists; a new `config.local.yaml` starts as the tracked
    `config.yaml` beside it; anything else as the shipped template."""
    tracked = path.with_name(CONFIG_NAME)
    if path.exists():
        text = path.read_text(encoding="utf-8")
    elif path.name == LOCAL_NAME and tracked.is_file():
        text = tracked.read_text(encoding="utf-8")
    else:
        text = template_text()
    data = _yaml().load(text)
    return data if data is not None else _yaml().load("{}")


def config_text(data: Any) -> str:
    buffer = io.StringIO()
    _yaml().dump(data, buffer)
    return buffer.getvalue()


def set_key(data: Any, dotted: str, value: Any) -> None:
    """Set `a.b.c` in a round-trip tree, creating the mappings on the way."""
    node = data
    *parents, leaf = dotted.split(".")
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[leaf] = value


def next_backup(path: Path) -> Path:
    """`<name>.bak.N` with the next number not yet used."""
    taken = [
        int(p.name.rsplit(".", 1)[1])
        for p in path.parent.glob(f"{path.name}.bak.*")
        if p.name.rsplit(".", 1)[1].isdigit()
    ]
    return path.with_name(f"{path.name}.bak.{max(taken, default=0) + 1}")


def write_config(path: Path, data: Any) -> Path | None:
    """Write the tree to `path` atomically; returns the backup of the old file, if any."""
    text = config_text(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        old = path.stat()
    except FileNotFoundError:
        old = None
    backup = None
    if old is not None:
        backup = next_backup(path)
        _write_like(backup, path.read_bytes(), old)
    temporary = path.with_name(f".{path.name}.tmp")
    _write_like(temporary, text.encode("utf-8"), old)
    temporary.replace(path)
    return backup


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
    if path is None or not path.is_file():
        return {}
    try:
        return parse_env_lines(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return {}


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


def store_secrets(path: Path, data: Any, place: str, target: Path, values: dict[str, str]) -> None:
    """Write the secrets to the env file or credentials directory `target` and name it in
    the config tree (`secrets.env_file` / `secrets.credentials_dir`), so Perch finds them."""
    beside = target.resolve().parent == path.resolve().parent
    named = target.name if beside else str(target.resolve())  # relative: moves with the folder
    if place == "env":
        write_env_file(target, values)
        set_key(data, "secrets.env_file", named)
        set_key(data, "secrets.credentials_dir", None)
        print(f"Secrets written to {target} (mode 0600); Perch reads it itself (secrets.env_file).")
        return
    lines = write_credentials(target, values)
    set_key(data, "secrets.credentials_dir", named)
    set_key(data, "secrets.env_file", None)
    print(
        f"Secrets written to {target}/ (mode 0600 each; secrets.credentials_dir names it). "
        "For a systemd unit, add instead (systemctl edit perch):\n" + "\n".join(lines)
    )
    _point_at_credentials(data, values)


def _point_at_credentials(data: Any, values: dict[str, str]) -> None:
    """Make each `${VAR}` of a stored secret read the credential: `${cred:var}`."""
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, str):
                match = ENV_REF.fullmatch(value)
                if match and match.group(1) in values:
                    data[key] = "${cred:" + match.group(1).lower() + "}"
            else:
                _point_at_credentials(value, values)


def earlier_secrets(path: Path, data: Any, secrets_path: str | None) -> Path:
    """The env file a re-run reads its defaults from (`secrets_path`: `--secrets-path`)."""
    if secrets_path:
        return Path(secrets_path).expanduser()
    named = (data.get("secrets") or {}).get("env_file")
    if named:
        found = Path(str(named)).expanduser()
        return found if found.is_absolute() else path.parent / found
    return path.parent / "perch.env"


def secret_refs(section: Any, prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, variable, its `:-` default) of each `${VAR}` value in a channel's section,
    nested sections' too (`imap.password`)."""
    found = []
    for key, value in section.items():
        if isinstance(value, dict):
            found.extend(secret_refs(value, f"{prefix}{key}."))
        match = ENV_REF.fullmatch(value) if isinstance(value, str) else None
        if match:
            found.append((f"{prefix}{key}", match.group(1), match.group(2) or ""))
    return found
