"""exec against a hostile model: each attack of issue 13 tried through the real tool.

The sandbox tests run wherever bubblewrap works and skip visibly (with the reason) where it
doesn't; the secret filter and the sandbox selection tests run everywhere.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.tools.base import ToolContext
from agents.tools.exec import ExecTool
from agents.tools.exec_env import build_env, looks_like_secret_value
from agents.tools.sandbox import Limits, Sandbox, SandboxUnavailable, select_sandbox
from bot.config.errors import ConfigError
from bot.config.schema import Config
from bot.tools.belt import build_tools
from tests.unprivileged import run_unprivileged
from tests.waiting import eventually

PYTHON3 = "/usr/bin/python3"
HAVE_PYTHON3 = os.path.exists(PYTHON3)


def exists(path: str) -> bool:
    return os.path.exists(path)


def process_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


def ctx_for(ws: Path) -> ToolContext:
    return ToolContext(workspace=ws, session_key="agent:main:test")


def bwrap_sandbox(**kwargs: object) -> Sandbox:
    """A working bwrap sandbox, or a visible skip saying why there is none."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed; apt-get install bubblewrap to run this")
    try:
        return select_sandbox("bwrap", **kwargs)  # type: ignore[arg-type]
    except SandboxUnavailable as exc:
        pytest.skip(f"bwrap cannot run here: {exc}")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


async def test_daemon_environment_is_out_of_reach(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERCH_TEST_API_KEY", "sekrit-api-key-123")
    tool = ExecTool(sandbox=bwrap_sandbox())
    command = (
        "tr '\\0' '\\n' < /proc/$PPID/environ; cat /proc/1/environ; "
        f"cat /proc/{os.getpid()}/environ; cat /proc/*/environ; echo done"
    )
    result = await tool.run({"command": command}, ctx_for(ws))
    assert "done" in result.content
    assert "sekrit-api-key-123" not in result.content
    assert "PERCH_TEST_API_KEY" not in result.content


async def test_the_daemon_and_its_process_group_cannot_be_signalled(ws: Path) -> None:
    sibling = await asyncio.create_subprocess_exec("sleep", "60")  # in this process's group
    try:
        tool = ExecTool(sandbox=bwrap_sandbox())
        command = (
            f"kill -9 $PPID; kill -9 {os.getpid()}; kill -9 {sibling.pid}; "
            f"kill -TERM -- -{os.getpgid(0)}; kill -9 -1; echo still here"
        )
        result = await tool.run({"command": command}, ctx_for(ws))
        assert "still here" in result.content
        assert sibling.returncode is None, "a process outside the sandbox was killed"
        assert process_state(sibling.pid) in ("S", "R"), "the sibling was killed"
    finally:
        sibling.kill()
        await sibling.wait()


def marked_processes(marker: str) -> list[int]:
    """Pids whose command line contains `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


async def test_timeout_kills_everything_the_command_started(ws: Path) -> None:
    tool = ExecTool(sandbox=bwrap_sandbox())
    marker = "301.25"
    command = f"sleep {marker} & setsid sleep {marker} & echo started; wait"
    result = await tool.run({"command": command, "timeout_s": 1}, ctx_for(ws))
    assert result.is_error and "timed out after 1 s" in result.content
    await eventually(lambda: not marked_processes(marker), timeout=10)


@pytest.mark.parametrize("network", [False, True])
async def test_loopback_is_unreachable_without_network(ws: Path, network: bool) -> None:
    if not HAVE_PYTHON3:
        pytest.skip(f"{PYTHON3} is missing; the network test connects with it")
    accepted = asyncio.Event()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        tool = ExecTool(sandbox=bwrap_sandbox(network=network))
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
        result = await tool.run({"command": f'{PYTHON3} -c "{probe}"'}, ctx_for(ws))
        if network:
            assert result.content.startswith("[exit code 0]"), result.content
            await asyncio.wait_for(accepted.wait(), 10)
        else:
            assert not result.content.startswith("[exit code 0]"), result.content
            assert "Connection refused" in result.content or "unreachable" in result.content
            assert not accepted.is_set()
    finally:
        server.close()
        await server.wait_closed()


async def test_only_the_workspace_is_writable(ws: Path, tmp_path: Path) -> None:
    tool = ExecTool(sandbox=bwrap_sandbox())
    outside = tmp_path / "outside.txt"
    command = (
        f"echo x > {outside}; touch /etc/perch-sandbox-test /usr/perch-sandbox-test; "
        "echo inside > inside.txt; echo tmp > /tmp/scratch; cat /tmp/scratch"
    )
    result = await tool.run({"command": command}, ctx_for(ws))
    assert "Read-only file system" in result.content
    assert (ws / "inside.txt").read_text() == "inside\n"
    assert not outside.exists()
    assert not exists("/etc/perch-sandbox-test")
    assert not exists("/usr/perch-sandbox-test")
    for hidden in ("/root", "/home", "/var", "/run"):
        listing = await tool.run({"command": f"ls {hidden}"}, ctx_for(ws))
        assert "No such file or directory" in listing.content


async def test_memory_and_file_size_are_limited(ws: Path) -> None:
    if not HAVE_PYTHON3:
        pytest.skip(f"{PYTHON3} is missing; the memory test allocates with it")
    tool = ExecTool(sandbox=bwrap_sandbox(limits=Limits(memory_mb=256, file_size_mb=1)))
    grab = f"{PYTHON3} -c 'b = bytearray(512 * 1024 * 1024)'"
    result = await tool.run({"command": grab}, ctx_for(ws))
    assert "MemoryError" in result.content
    big = await tool.run({"command": "head -c 5000000 /dev/zero > big.bin"}, ctx_for(ws))
    assert not big.content.startswith("[exit code 0]")
    assert (ws / "big.bin").stat().st_size <= 1024 * 1024


async def test_inside_the_sandbox_no_file_grows_past_the_disk_floor(ws: Path) -> None:
    keep = shutil.disk_usage(ws).free - 4096  # about 4 KB left above the floor
    tool = ExecTool(sandbox=bwrap_sandbox(), keep_free=keep)
    result = await tool.run({"command": "head -c 1000000 /dev/zero > big.bin"}, ctx_for(ws))
    assert not result.content.startswith("[exit code 0]") and "nearly full" in result.content
    assert (ws / "big.bin").stat().st_size < 100_000


_BOMB = """
import os, time
started = failed = 0
for _ in range(300):
    try:
        pid = os.fork()
    except OSError:
        failed += 1
        continue
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    started += 1
print("started", started, "failed", failed)
"""

_FORK_SCRIPT = """
import asyncio, sys
from pathlib import Path
from agents.tools.base import ToolContext
from agents.tools.exec import ExecTool
from agents.tools.sandbox import Limits, select_sandbox

limit = int(sys.argv[2])
tool = ExecTool(sandbox=select_sandbox("bwrap", limits=Limits(processes=limit)))
command = "/usr/bin/python3 bomb.py"
ctx = ToolContext(workspace=Path(sys.argv[1]), session_key="k")
print(asyncio.run(tool.run({"command": command, "timeout_s": 60}, ctx)).content)
"""
EXEC_MODULES = ("agents.tools.base", "agents.tools.exec", "agents.tools.sandbox")


@pytest.fixture
def shared_ws() -> Iterator[Path]:
    """A workspace an unprivileged user can reach (pytest's tmp dirs are root-only)."""
    path = Path(tempfile.mkdtemp(prefix="perch-sandbox-", dir="/tmp"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_fork_bombs_hit_the_process_limit(shared_ws: Path) -> None:
    """As the service user (nobody, when the tests run as root: RLIMIT_NPROC does not bind
    root), from wherever the checkout is: the code is imported before privileges drop."""
    bwrap_sandbox()
    if not HAVE_PYTHON3:
        pytest.skip(f"{PYTHON3} is missing; the fork test forks with it")
    (shared_ws / "bomb.py").write_text(_BOMB)
    done = run_unprivileged(_FORK_SCRIPT, str(shared_ws), "40", imports=EXEC_MODULES)
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    assert "started" in words, done.stdout
    started, failed = int(words[words.index("started") + 1]), int(words[-1])
    assert started <= 40 and failed >= 260, done.stdout


def test_credential_values_never_reach_the_environment() -> None:
    source = {
        "DATABASE_URL": "postgres://perch:hunter2@db.internal:5432/perch",
        "REDIS": "redis://:hunter2@cache:6379/0",
        "UPSTREAM": "sk-ant-api03-abcdefghijklmnop",
        "PLAIN_URL": "https://example.com/path",
        "EDITOR": "vi",
    }
    env = build_env(Path("/ws"), list(source), source)
    assert "DATABASE_URL" not in env and "REDIS" not in env and "UPSTREAM" not in env
    assert env["PLAIN_URL"] == "https://example.com/path" and env["EDITOR"] == "vi"


@given(
    scheme=st.from_regex(r"[a-z][a-z0-9+.-]{0,10}", fullmatch=True),
    user=st.from_regex(r"[A-Za-z0-9._~-]{0,12}", fullmatch=True),
    password=st.from_regex(r"[A-Za-z0-9._~!$&'()*+,;=%-]{1,20}", fullmatch=True),
    host=st.from_regex(r"[a-z0-9.-]{1,20}", fullmatch=True),
)
def test_any_url_with_a_password_is_a_secret(
    scheme: str, user: str, password: str, host: str
) -> None:
    assert looks_like_secret_value(f"{scheme}://{user}:{password}@{host}/x")
    assert not looks_like_secret_value(f"{scheme}://{host}/x")


async def test_database_url_is_not_visible_to_commands(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://perch:hunter2@localhost/perch")
    tool = ExecTool(allow_env=["DATABASE_URL"])
    result = await tool.run({"command": 'echo "[$DATABASE_URL]"'}, ctx_for(ws))
    assert result.content == "[exit code 0]\n[]\n"


def test_auto_without_bwrap_refuses_and_none_must_be_explicit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on this PATH
    with pytest.raises(SandboxUnavailable, match=r"apt-get install bubblewrap.*sandbox: none"):
        select_sandbox("auto")
    assert select_sandbox("none").mode == "none"
    config = Config.model_validate({"agent": {"exec": {"enabled": True}}})
    with pytest.raises(ConfigError, match=r"agent\.exec: exec\.sandbox is auto"):
        build_tools(config)
    config = Config.model_validate({"agent": {"exec": {"enabled": True, "sandbox": "none"}}})
    assert "exec" in build_tools(config)


_HOLDER = """
import time
from bot.process.hardening import make_undumpable
assert make_undumpable()
print("ready", flush=True)
time.sleep(60)
"""
REPO = Path(__file__).resolve().parents[2]


async def test_with_the_host_proc_a_non_dumpable_daemon_keeps_its_environment(ws: Path) -> None:
    """Where bwrap cannot mount its own /proc (inside the shipped unit) the host's is bound
    read-only: the daemon is visible there, but being non-dumpable its environ is not."""
    sandbox = Sandbox("bwrap", bwrap_sandbox().bwrap, mount_proc=False)
    holder = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _HOLDER,
        "perch-holder",
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOLDER_TOKEN": "sekrit-42"},
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        assert (await asyncio.wait_for(holder.stdout.readline(), 30)).strip() == b"ready"
        command = (
            f"tr '\\0' ' ' < /proc/{holder.pid}/cmdline; echo; "
            f"tr '\\0' '\\n' < /proc/{holder.pid}/environ; kill -9 {holder.pid}; echo end"
        )
        result = await ExecTool(sandbox=sandbox).run({"command": command}, ctx_for(ws))
        assert "perch-holder" in result.content  # the host's /proc really is visible
        assert "end" in result.content and "Permission denied" in result.content
        assert "sekrit-42" not in result.content
        assert holder.returncode is None
    finally:
        holder.kill()
        await holder.wait()
