"""Secrets read from files while the config is loaded: `${file:/path}` and `${cred:name}`.

`${file:/abs/path}` is replaced by the file's content; `${cred:name}` by the systemd credential
`name` (the file `$CREDENTIALS_DIRECTORY/name` that `LoadCredential=name:...` provides), so the
environment need hold no secret. One trailing newline is dropped. `${cred:name}` is the same as
`${file:${CREDENTIALS_DIRECTORY}/name}` (environment references are expanded first), but says
what is missing when the unit lacks the credential. A file that is missing, unreadable, not
UTF-8 or over 64 KiB is a `ConfigError` naming the key and the file, never the content; a
string that took a secret is a `SecretText`, whose repr hides it in validation messages.
Every path read is recorded (`Config.secret_files`): the exec and MCP sandboxes mask them and
the layout check keeps them out of the workspace.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from bot.config.errors import ConfigError

MAX_SECRET_BYTES = 65536
_SECRET_REF = re.compile(r"\$\{(file|cred):([^}]*)\}")
_CRED_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@-]*$")


class SecretText(str):
    """A config string holding a secret read from a file; its repr never shows it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'<secret from a file>'"


def _config_error(message: str) -> Exception:
    return ConfigError(message)


def _secret_file(kind: str, ref: str, env: Mapping[str, str], key: str) -> Path:
    ref = ref.strip()
    if kind == "file":
        if not ref.startswith("/"):
            raise _config_error(
                f"{key}: ${{file:{ref}}} needs an absolute path, e.g. ${{file:/etc/perch/token}}"
            )
        return Path(ref)
    if not _CRED_NAME.match(ref):
        raise _config_error(
            f"{key}: ${{cred:{ref}}} is not a credential name (letters, digits, _ . @ -)"
        )
    directory = env.get("CREDENTIALS_DIRECTORY")
    if not directory:
        raise _config_error(
            f"{key}: ${{cred:{ref}}} needs a systemd credential but $CREDENTIALS_DIRECTORY is "
            f"not set; run under the unit with LoadCredential={ref}:/etc/perch/credentials/{ref}"
            f", or use ${{file:/path}}"
        )
    return Path(directory) / ref


def read_secret(
    kind: str, ref: str, env: Mapping[str, str], key: str, seen: list[Path] | None = None
) -> str:
    """The content of the file a `${file:...}`/`${cred:...}` reference names, or ConfigError.
    The path is added to `seen` first, readable or not (the sandboxes mask every one)."""
    path = _secret_file(kind, ref, env, key)
    if seen is not None:
        seen.append(path)
    what = f"credential {ref!r} ({path})" if kind == "cred" else f"secret file {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(MAX_SECRET_BYTES + 1)
    except OSError as exc:
        hint = (
            f"add LoadCredential={ref}:/etc/perch/credentials/{ref} to the unit"
            if kind == "cred"
            else "create it (readable by the daemon's user only) or fix the path"
        )
        raise _config_error(f"{key}: cannot read {what}: {exc.strerror}; {hint}") from None
    if len(data) > MAX_SECRET_BYTES:
        raise _config_error(
            f"{key}: {what} is over {MAX_SECRET_BYTES} bytes; is it the right file?"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _config_error(f"{key}: {what} is not UTF-8 text") from None
    return text.removesuffix("\n").removesuffix("\r")


def expand_secret_refs(
    value: str, env: Mapping[str, str], key: str, seen: list[Path] | None = None
) -> str:
    """`value` with every `${file:...}`/`${cred:...}` replaced (a SecretText if any was);
    the files' paths are added to `seen`."""
    if "${" not in value:
        return value
    found = False

    def substitute(match: re.Match[str]) -> str:
        nonlocal found
        found = True
        return read_secret(match.group(1), match.group(2), env, key, seen)

    result = _SECRET_REF.sub(substitute, value)
    return SecretText(result) if found else result
