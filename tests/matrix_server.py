"""A real Synapse homeserver for the Matrix channel's tests, one per test session.

`synapse_server` (session scope) runs Synapse from its own venv (`make synapse` makes
`.venv-synapse`; CI's `.ci/run` calls it) on 127.0.0.1 and a free port, in a temp dir:
SQLite, the client API only (no federation listener), registration by shared secret only,
the `rc_*` rate limits raised so tests never wait on them. Without that venv the Matrix tests
skip, saying why. `register(server, name)` makes a fresh user through
`/_synapse/admin/v1/register` (HMAC-SHA1 over nonce, name, password, "notadmin" or
"admin"); `limit_messages` gives one user a message rate of its own (the admin API).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SYNAPSE_PYTHON = ROOT / ".venv-synapse" / "bin" / "python"
NO_SYNAPSE = "no Synapse venv (.venv-synapse): run `make synapse` to test against a real homeserver"
SERVER_NAME = "perch.test"
_START_TIMEOUT = 90.0

_FAST = {"per_second": 1000, "burst_count": 1000}


@dataclass(frozen=True, slots=True)
class SynapseServer:
    url: str  # the client-server API base, e.g. http://127.0.0.1:8008
    shared_secret: str
    log: Path


@dataclass(frozen=True, slots=True)
class MatrixUser:
    user_id: str
    password: str
    access_token: str
    device_id: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(folder: Path, port: int, shared_secret: str) -> dict[str, object]:
    return {
        "server_name": SERVER_NAME,
        "pid_file": str(folder / "homeserver.pid"),
        "public_baseurl": f"http://127.0.0.1:{port}/",
        "listeners": [
            {
                "port": port,
                "bind_addresses": ["127.0.0.1"],
                "type": "http",
                "tls": False,
                "x_forwarded": False,
                "resources": [{"names": ["client"], "compress": False}],
            }
        ],
        "database": {"name": "sqlite3", "args": {"database": str(folder / "homeserver.db")}},
        "media_store_path": str(folder / "media"),
        "signing_key_path": str(folder / "signing.key"),
        "registration_shared_secret": shared_secret,
        "enable_registration": False,
        "report_stats": False,
        "macaroon_secret_key": secrets.token_hex(16),
        "form_secret": secrets.token_hex(16),
        "trusted_key_servers": [],
        "suppress_key_server_warning": True,
        "federation_domain_whitelist": [],
        "presence": {"enabled": False},
        "url_preview_enabled": False,
        "rc_message": _FAST,
        "rc_registration": _FAST,
        "rc_login": {"address": _FAST, "account": _FAST, "failed_attempts": _FAST},
        "rc_joins": {"local": _FAST, "remote": _FAST},
        "rc_joins_per_room": _FAST,
        "rc_invites": {"per_room": _FAST, "per_user": _FAST, "per_issuer": _FAST},
        "rc_admin_redaction": _FAST,
        "rc_key_requests": _FAST,
        "rc_3pid_validation": _FAST,
        "rc_media_create": _FAST,
        "rc_room_creation": _FAST,
        "rc_delayed_event_mgmt": _FAST,
    }


def _signing_key() -> str:
    """An ed25519 signing key in Synapse's file format: "ed25519 <version> <seed>"."""
    seed = base64.b64encode(os.urandom(32)).decode().rstrip("=")
    return f"ed25519 a_{secrets.token_hex(2)} {seed}\n"


def _get(url: str, timeout: float = 5.0) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        data = json.loads(response.read())
    assert isinstance(data, dict)
    return data


def _post(url: str, body: dict[str, object], timeout: float = 10.0) -> dict[str, object]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        data = json.loads(response.read())
    assert isinstance(data, dict)
    return data


def _wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"Synapse exited with {process.returncode}:\n{tail}")
        try:
            _get(f"{url}/_matrix/client/versions", timeout=1.0)
            return
        except OSError:
            time.sleep(0.2)  # nothing announces readiness but the port answering
    raise RuntimeError(f"Synapse did not answer within {_START_TIMEOUT:g} s (log: {log})")


@pytest.fixture(scope="session")
def synapse_server() -> Iterator[SynapseServer]:
    if not SYNAPSE_PYTHON.exists():
        pytest.skip(NO_SYNAPSE)
    with tempfile.TemporaryDirectory(prefix="perch-synapse-") as tmp:
        folder = Path(tmp)
        port = _free_port()
        shared_secret = secrets.token_hex(16)
        (folder / "signing.key").write_text(_signing_key())
        config = folder / "homeserver.yaml"
        config.write_text(json.dumps(_config(folder, port, shared_secret)))  # JSON is YAML
        log = folder / "synapse.log"
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(SYNAPSE_PYTHON), "-m", "synapse.app.homeserver", "-c", str(config)],
                cwd=folder,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_until_up(url, process, log)
            yield SynapseServer(url, shared_secret, log)
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def register(
    server: SynapseServer, name: str, displayname: str = "", *, admin: bool = False
) -> MatrixUser:
    """A fresh user on `server` (name made unique), logged in with one device."""
    username = f"{name}{secrets.token_hex(3)}"
    password = secrets.token_hex(12)
    endpoint = f"{server.url}/_synapse/admin/v1/register"
    nonce = _get(endpoint)["nonce"]
    assert isinstance(nonce, str)
    mac = hmac.new(server.shared_secret.encode(), digestmod=hashlib.sha1)
    role = b"admin" if admin else b"notadmin"
    mac.update(b"\x00".join([nonce.encode(), username.encode(), password.encode(), role]))
    body: dict[str, object] = {
        "nonce": nonce,
        "username": username,
        "password": password,
        "admin": admin,
        "mac": mac.hexdigest(),
    }
    if displayname:
        body["displayname"] = displayname
    made = _post(endpoint, body)
    return MatrixUser(
        str(made["user_id"]), password, str(made["access_token"]), str(made["device_id"])
    )


def limit_messages(
    server: SynapseServer, admin: MatrixUser, user_id: str, per_second: float, burst: int
) -> None:
    """Give `user_id` a message rate of its own (Synapse's admin API), tighter than the
    session's raised `rc_message`."""
    quoted = urllib.parse.quote(user_id)
    request = urllib.request.Request(
        f"{server.url}/_synapse/admin/v1/users/{quoted}/override_ratelimit",
        json.dumps({"messages_per_second": per_second, "burst_count": burst}).encode(),
        {"Content-Type": "application/json", "Authorization": f"Bearer {admin.access_token}"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
