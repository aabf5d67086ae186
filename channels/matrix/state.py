"""What the Matrix channel keeps across restarts, in its folder of the daemon's state directory.

`AccountState` owns one account's folder (`<state>/matrix/<user>/`, mode 0700): the crypto
store nio keeps there (SQLite: Olm and Megolm sessions, device keys, trust), `device.json`
(the device a password login made and its token; mode 0600),
`identities.json` (each person's cross-signing master key, pinned the first time it is seen),
`pickle_key` (what the crypto store is encrypted with, made once; mode 0600), and
`sync_token` (the last `/sync` position whose events were all handed on, so nothing is
answered twice across a restart, and nothing missed while down is lost).
"""

from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]")


@dataclass(frozen=True, slots=True)
class Device:
    """A device of the bot's account: its id and its access token (empty when the config
    gives one)."""

    device_id: str
    access_token: str


class AccountState:
    """The state folder of one Matrix account (see the module docstring)."""

    def __init__(self, root: Path, user_id: str) -> None:
        self.folder = root / _UNSAFE.sub("_", user_id.lstrip("@"))

    def prepare(self) -> Path:
        """The folder, made (0700) if missing."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        return self.folder

    # -- the device ------------------------------------------------------------------------

    def device(self) -> Device | None:
        try:
            data = json.loads((self.folder / "device.json").read_text())
            return Device(str(data["device_id"]), str(data["access_token"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save_device(self, device_id: str, access_token: str) -> Device:
        device = Device(device_id, access_token)
        _write_private(self.prepare() / "device.json", json.dumps(asdict(device)))
        return device

    def pickle_key(self) -> str:
        """The crypto store's key: made the first time, the same ever after."""
        path = self.prepare() / "pickle_key"
        try:
            kept = path.read_text().strip()
        except FileNotFoundError:
            kept = ""
        if not kept:
            kept = secrets.token_urlsafe(32)
            _write_private(path, kept)
        return kept

    # -- the people's cross-signing identities, pinned on first sight -----------------------

    def identities(self) -> dict[str, str]:
        """User id -> the master key first seen for them."""
        try:
            data = json.loads((self.folder / "identities.json").read_text())
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def save_identities(self, identities: dict[str, str]) -> None:
        _write_private(self.prepare() / "identities.json", json.dumps(identities, sort_keys=True))

    # -- the sync position -----------------------------------------------------------------

    def sync_token(self) -> str | None:
        try:
            token = (self.folder / "sync_token").read_text().strip()
        except OSError:
            return None
        return token or None

    def save_sync_token(self, token: str) -> None:
        _write_private(self.prepare() / "sync_token", token)


def _write_private(path: Path, text: str) -> None:
    """Write `text` to `path` atomically, readable by the owner only."""
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(temporary, path)
