"""`systemd/install.sh` in a throwaway root, then `perch run` as the service user under the
unit's restrictions, to READY: the "service install that starts" check.

A private mount namespace (`unshare -m`) gets its own copies of /etc, /opt and /var/lib, and
the checkout is mounted read-only, so nothing on the host changes. install.sh runs there as
root (offline: the venv it keeps finds its dependencies in the test's venv through a .pth
file). Then the unit is reproduced as systemd would start it, read from the unit file and
its drop-ins: `ProtectSystem=strict` (every mount read-only but the `ReadWritePaths=` and
`StateDirectory=`), `PrivateTmp=`, `ProtectHome=`, `MemoryDenyWriteExecute=` (the kernel's
PR_SET_MDWE, which kills Node.js as systemd's filter does), `User=`, `WorkingDirectory=`,
`Environment=`, `EnvironmentFile=`, the credentials, `NOTIFY_SOCKET`, `ExecStart=`. The
daemon must say READY over the notify socket as that user, answer `perch status`, list its
Node.js MCP server (installed with `--mcp-node`) and run a chat turn against the fake model.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import struct
import subprocess
import sysconfig
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.fakes.anthropic import FakeAnthropic

pytestmark = pytest.mark.timeout(300)
REPO = Path(__file__).resolve().parents[2]
KEY = "sk-ant-service-0123456789"
MDWE = (
    "import ctypes, os, sys; ctypes.CDLL(None).prctl(65, 1, 0, 0, 0); "  # PR_SET_MDWE
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def unit_settings(unit: Path, dropins: list[Path]) -> dict[str, list[str]]:
    """The [Service] settings of a unit after its drop-ins (an empty value resets a list)."""
    settings: dict[str, list[str]] = {}
    for path in [unit, *dropins]:
        section = ""
        for line in path.read_text().splitlines():
            line = line.strip()
            if line.startswith("["):
                section = line
            elif section == "[Service]" and "=" in line and not line.startswith("#"):
                key, value = line.split("=", 1)
                settings[key] = [] if not value else [*settings.get(key, []), value]
    return settings


def run_script(root: Path, unit: dict[str, list[str]], notify: str) -> str:
    """The shell that starts ExecStart as systemd would under `unit`."""
    state = [f"/var/lib/{d}" for d in unit.get("StateDirectory", [])]
    writable = [*state, *(p for v in unit.get("ReadWritePaths", []) for p in v.split())]
    env = {"HOME": "/var/lib/perch", "PATH": "/usr/local/bin:/usr/bin:/bin"}
    for value in unit.get("Environment", []):
        env.update(item.split("=", 1) for item in shlex.split(value))
    for value in unit.get("EnvironmentFile", []):
        for line in (
            (root / "etc" / value.lstrip("-/").removeprefix("etc/")).read_text().splitlines()
        ):
            if "=" in line and not line.lstrip().startswith("#"):
                key, item = line.split("=", 1)
                env[key.strip()] = item.strip()
    env["CREDENTIALS_DIRECTORY"] = "/var/lib/.perch-credentials"
    env["NOTIFY_SOCKET"] = "@" + notify
    user = unit["User"][-1]
    command = shlex.split(unit["ExecStart"][-1])
    if unit.get("MemoryDenyWriteExecute", ["no"])[-1] == "yes":
        command = ["/usr/bin/python3", "-c", MDWE, *command]
    lines = ["set -eu"]
    lines += [f"mount --bind {w} {w}" for w in writable]
    if unit.get("ProtectSystem", [""])[-1] == "strict":
        skip = "|".join(["/proc", "/proc/*", "/sys", "/sys/*", "/dev", "/dev/*", *writable])
        lines.append(
            'findmnt -rn -o TARGET | sort -u | while read -r m; do case "$m" in '
            f'{skip}) ;; *) mount -o remount,bind,ro "$m" ;; esac; done'
        )
    if unit.get("PrivateTmp", ["no"])[-1] == "yes":
        lines += private_tmp()
    if unit.get("ProtectHome", ["no"])[-1] == "yes":
        lines.append(
            "for h in /home /root /run/user; do [ -d $h ] && mount -t tmpfs -o ro,mode=0 tmpfs $h; done; true"
        )
    lines.append(f"cd {unit['WorkingDirectory'][-1]}")
    assignments = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
    lines.append(
        f"exec setpriv --reuid={user} --regid={user} --init-groups --no-new-privs -- "
        f"env -i {assignments} {shlex.join(command)}"
    )
    return "\n".join(lines)


def private_tmp() -> list[str]:
    """`PrivateTmp=`: an empty /tmp, in which a checkout (and the test's venv) that lives under
    /tmp stays visible, read-only, as the test's own scaffolding: an installed Perch keeps its
    dependencies in /opt, this one finds them in the test's venv."""
    kept = list(dict.fromkeys([str(REPO), sysconfig.get_paths()["purelib"]]))
    kept = [p for p in kept if p.startswith("/tmp/") and not p.startswith(str(REPO) + "/")]
    lines = ["mount --bind /tmp /mnt"] if kept else []  # the host's /tmp, for a moment
    lines.append("mount -t tmpfs tmpfs /tmp")
    for path in kept:
        lines += [f"mkdir -p {path}", f"mount --bind /mnt{path.removeprefix('/tmp')} {path}"]
    return [*lines, "umount -l /mnt"] if kept else lines


def mounts(root: Path) -> str:
    """The throwaway root: its own /etc, /opt and /var/lib; the checkout read-only."""
    return (
        f"mount --bind {root}/etc /etc && mount --bind {root}/opt /opt && "
        f"mount --bind {root}/var-lib /var/lib && "
        f"mount --bind {REPO} {REPO} && mount -o remount,bind,ro {REPO}\n"
    )


def install_script(root: Path, fake_url: str) -> str:
    site = sysconfig.get_paths()["purelib"]
    node = json.dumps(
        {
            "mcpServers": {
                "node": {"command": "node", "args": ["/opt/perch/tests/mcp_servers/node_server.js"]}
            }
        }
    )
    return f"""set -eux
cp -a /etc {root}/etc
mkdir -p {root}/opt {root}/var-lib
{mounts(root)}
/usr/bin/python3 -m venv --without-pip /opt/perch/.venv
echo {site} > /opt/perch/.venv/lib/python3.11/site-packages/perch_test_dependencies.pth
PIP_NO_INDEX=1 PIP_NO_BUILD_ISOLATION=0 PIP_DISABLE_PIP_VERSION_CHECK=1 {REPO}/systemd/install.sh --mcp-node
printf %s {KEY} > /etc/perch/credentials/anthropic_api_key
echo ANTHROPIC_BASE_URL={fake_url} >> /etc/perch/env
/opt/perch/.venv/bin/perch mcp add --config /etc/perch/config.yaml --json '{node}'
chown root:perch /etc/perch/config.yaml && chmod 0640 /etc/perch/config.yaml
install -d -m 0500 -o perch -g perch /var/lib/.perch-credentials
for f in /etc/perch/credentials/*; do install -m 0400 -o perch -g perch "$f" /var/lib/.perch-credentials/; done
"""


def notify_socket() -> tuple[socket.socket, str]:
    name = f"perch-test-{uuid.uuid4().hex[:12]}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    sock.settimeout(120)
    return sock, name


def wait_ready(sock: socket.socket, daemon: subprocess.Popen[str]) -> tuple[int, int]:
    """(pid, uid) of the process that sent READY=1; a daemon that exits first fails the test
    with what it said."""
    deadline = time.monotonic() + 120
    sock.settimeout(0.5)
    while True:
        try:
            data, ancillary, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(12))
        except TimeoutError:
            if daemon.poll() is not None:
                _, err = daemon.communicate(timeout=10)
                pytest.fail(f"the service exited ({daemon.returncode}) before READY: {err[-3000:]}")
            assert time.monotonic() < deadline, "no READY=1 within 120 s"
            continue
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid, uid, _ = struct.unpack("iII", payload[:12])
                if b"READY=1" in data:
                    return pid, uid


@pytest.fixture
def fake_model() -> Iterator[str]:
    import asyncio
    import threading

    loop = asyncio.new_event_loop()
    server = FakeAnthropic(api_key=KEY)
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.__aenter__())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert started.wait(30)
    yield server.base_url
    asyncio.run_coroutine_threadsafe(server.__aexit__(None, None, None), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)


@pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace and a service user need root")
def test_install_sh_gives_a_service_that_starts_and_answers_under_the_unit(
    tmp_path: Path, fake_model: str
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    sock, name = notify_socket()
    installed = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "bash", "-c",
         install_script(root, fake_model)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-3000:]
    config = yaml.safe_load((root / "etc" / "perch" / "config.yaml").read_text())
    assert config["store"]["path"] == "/var/lib/perch/perch.db"
    assert config["agent"]["workspace"] == "/var/lib/perch/workspace"
    assert config["channels"]["console"]["enabled"] is False
    assert config["logging"]["format"] == "json"
    assert config["providers"]["anthropic"]["api_key"] == "${cred:anthropic_api_key}"
    assert "# MCP servers whose tools join" in (root / "etc/perch/config.yaml").read_text()
    assert (root / "etc/systemd/system/perch.service.d/mcp-node.conf").exists()

    # The same namespace again, with the daemon started as the unit would start it.
    unit_dir = root / "etc/systemd/system"
    unit = unit_settings(
        unit_dir / "perch.service", sorted((unit_dir / "perch.service.d").glob("*.conf"))
    )
    assert unit["MemoryDenyWriteExecute"][-1] == "no"  # the drop-in --mcp-node added
    start = "set -eu\n" + mounts(root)
    daemon = subprocess.Popen(
        ["unshare", "-m", "--propagation", "private", "bash", "-c",
         start + f"exec unshare -m --propagation private bash -c {shlex.quote(run_script(root, unit, name))}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        pid, uid = wait_ready(sock, daemon)
        assert uid == pwd_uid(root, "perch") != 0
        as_service = ["nsenter", "-t", str(pid), "-m", "--", "setpriv", "--reuid=perch",
                      "--regid=perch", "--init-groups", "--", "env", "-i", "HOME=/var/lib/perch",
                      "PERCH_CONFIG=/etc/perch/config.yaml",
                      "PATH=/usr/bin:/bin", "/opt/perch/.venv/bin/perch"]  # fmt: skip
        status = subprocess.run([*as_service, "status"], capture_output=True, text=True, timeout=60)
        assert status.returncode == 0 and "Perch is running" in status.stdout, status.stderr
        deadline = time.monotonic() + 60  # the server starts in the background after READY
        while True:
            listed = subprocess.run(
                [*as_service, "mcp", "list"], capture_output=True, text=True, timeout=60
            )
            if "node (stdio node): up, 1 tool(s)" in listed.stdout:
                break
            assert "starting" in listed.stdout and time.monotonic() < deadline, listed.stdout
            time.sleep(0.2)
        chat = subprocess.run(
            [*as_service, "chat", "-m", "hello service"], capture_output=True, text=True, timeout=60
        )
        assert chat.returncode == 0 and "hello service" in chat.stdout, chat.stderr
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=60)
        sock.close()
    assert daemon.returncode == 0, err[-3000:]
    logged = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert logged and any("Perch ready" in entry["msg"] for entry in logged)
    assert KEY not in err


def pwd_uid(root: Path, user: str) -> int:
    for line in (root / "etc" / "passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == user:
            return int(fields[2])
    raise AssertionError(f"{user} was not created")


def test_an_existing_config_keeps_its_settings_but_not_what_the_unit_forbids(
    tmp_path: Path,
) -> None:
    from bot.operator.service_config import main

    path = tmp_path / "config.yaml"
    path.write_text(
        "# mine\nagent: {workspace: ./workspace, model: claude-x}\nstore:\n  path: ./data/perch.db\n"
        "channels:\n  console: {enabled: true}\nlogging: {format: text}\n"
    )
    assert main([str(path), "--state-dir", "/var/lib/perch", "--credentials", "a,b"]) == 0
    text = path.read_text()
    data = yaml.safe_load(text)
    assert text.startswith("# mine") and data["agent"]["model"] == "claude-x"
    assert data["agent"]["workspace"] == "/var/lib/perch/workspace"
    assert data["store"]["path"] == "/var/lib/perch/perch.db"
    assert data["channels"]["console"]["enabled"] is False
    assert data["logging"]["format"] == "text"  # the owner's choice, kept
    assert (tmp_path / "config.yaml.bak.1").exists()
    assert main([str(path), "--state-dir", "/var/lib/perch"]) == 0  # nothing left to change
    assert not (tmp_path / "config.yaml.bak.2").exists()


def test_node_dies_under_memory_deny_write_execute_which_the_drop_in_lifts() -> None:
    probe = ["/usr/bin/python3", "-c", MDWE, "/usr/bin/node", "-e", "console.log(6 * 7)"]
    if not Path("/usr/bin/node").exists():
        pytest.skip("Node.js is not installed here")
    assert subprocess.run(probe, capture_output=True, timeout=60).returncode != 0
    assert subprocess.run(probe[3:], capture_output=True, timeout=60).stdout.strip() == b"42"
    dropin = (REPO / "systemd" / "mcp-node.conf").read_text()
    assert "MemoryDenyWriteExecute=no" in dropin
    unit = unit_settings(REPO / "systemd" / "perch.service", [REPO / "systemd" / "mcp-node.conf"])
    assert unit["MemoryDenyWriteExecute"][-1] == "no"
