"""exec's limits hold per command, not per process: processes, memory and the disk.

What the host offers decides how (agents/tools/sandbox.py): a cgroup per command where Perch
may manage cgroups (a delegated v2 cgroup; v1 hierarchies as root), else RLIMIT_NPROC inside
the sandbox's own user namespace (Perch not root). Each test runs on what this machine has,
and skips, saying why, only where the kernel lacks the feature.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.tools.base import ToolContext
from agents.tools.exec import ExecTool
from agents.tools.sandbox import Limits, Sandbox, SandboxUnavailable, select_sandbox
from tests.unprivileged import run_unprivileged
from tests.waiting import eventually

PYTHON3 = "/usr/bin/python3"
MB = 1024 * 1024

# Forks until the limit stops it, says so with a file, and holds its processes until told.
FLOOD = """
import os, sys, time
children = 0
while children < 2000:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(120)
        os._exit(0)
    children += 1
with open("full.tmp", "w") as out:
    out.write(str(children))
os.rename("full.tmp", "full")  # whole when it appears
while not os.path.exists("stop"):
    time.sleep(0.02)
print("flood held", children)
"""
OTHER = "for i in 1 2 3 4 5 6 7 8; do sleep 0.01 & done; wait; echo other-ok"


def cgroup_home() -> str:
    """Where this host lets Perch give each command a cgroup ("" where it does not)."""
    try:
        from agents.tools.cgroups import CgroupHome
    except ImportError:  # older code: no cgroups at all, nothing to skip on
        return "unknown"
    home = CgroupHome.find()
    return home.describe() if home is not None else ""


def sandbox(**kwargs: object) -> Sandbox:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed; apt-get install bubblewrap")
    if not os.path.exists(PYTHON3):
        pytest.skip(f"{PYTHON3} is missing; these commands run it")
    try:
        return select_sandbox("bwrap", **kwargs)  # type: ignore[arg-type]
    except SandboxUnavailable as exc:
        pytest.skip(f"bwrap cannot run here: {exc}")


@pytest.fixture
def shared_ws() -> Iterator[Path]:
    """A workspace an unprivileged user can write (pytest's tmp dirs are root-only)."""
    path = Path(tempfile.mkdtemp(prefix="perch-limits-", dir="/tmp"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_a_fork_flood_in_one_command_leaves_other_sessions_exec_working(
    shared_ws: Path,
) -> None:
    box = sandbox(limits=Limits(processes=40))
    if not cgroup_home() and os.geteuid() == 0:
        pytest.skip("RLIMIT_NPROC does not bind root and no cgroup can be managed here")
    (shared_ws / "flood.py").write_text(FLOOD)
    tool = ExecTool(sandbox=box)
    flood = asyncio.ensure_future(
        tool.run(
            {"command": f"{PYTHON3} flood.py", "timeout_s": 60},
            ToolContext(workspace=shared_ws, session_key="agent:main:a"),
        )
    )
    try:
        await eventually(lambda: (shared_ws / "full").exists() or flood.done(), 30)
        assert not flood.done(), flood.result().content
        assert int((shared_ws / "full").read_text()) < 40
        other = await tool.run(
            {"command": OTHER}, ToolContext(workspace=shared_ws, session_key="agent:main:b")
        )
        assert other.content == "[exit code 0]\nother-ok\n", other.content
    finally:
        (shared_ws / "stop").write_text("")
        first = await flood
    assert "flood held" in first.content and "limit of 40 processes" in first.content


_TWO_SESSIONS = """
import asyncio, os, sys
from pathlib import Path
from agents.tools.base import ToolContext
from agents.tools.exec import ExecTool
from agents.tools.sandbox import Limits, select_sandbox

async def main() -> None:
    ws = Path(sys.argv[1])
    tool = ExecTool(sandbox=select_sandbox("bwrap", limits=Limits(processes=40)))
    flood = asyncio.ensure_future(tool.run(
        {"command": "/usr/bin/python3 flood.py", "timeout_s": 60},
        ToolContext(workspace=ws, session_key="a")))
    async with asyncio.timeout(30):
        while not (ws / "full").exists() and not flood.done():
            await asyncio.sleep(0.02)
    other = await tool.run({"command": sys.argv[2]}, ToolContext(workspace=ws, session_key="b"))
    (ws / "stop").write_text("")
    first = await flood
    print("OTHER", repr(other.content))
    print("FLOOD", repr(first.content))

asyncio.run(main())
"""


def test_as_the_service_user_one_flood_leaves_the_other_sessions_exec_working(
    shared_ws: Path,
) -> None:
    """Perch as its own unprivileged user in a plain terminal: no cgroup to manage, so each
    command's processes are counted in its own user namespace, apart from the others'."""
    sandbox()
    (shared_ws / "flood.py").write_text(FLOOD)
    done = run_unprivileged(
        _TWO_SESSIONS,
        str(shared_ws),
        OTHER,
        imports=("agents.tools.base", "agents.tools.exec", "agents.tools.sandbox"),
    )
    assert done.returncode == 0, done.stderr
    assert "OTHER '[exit code 0]\\nother-ok\\n'" in done.stdout, done.stdout
    assert "flood held" in done.stdout, done.stdout
    held = int(done.stdout.split("flood held", 1)[1].split()[0].strip("\\n'"))
    assert held < 40, done.stdout


# Three processes that each fill 150 MB and hold it until told: 450 MB in all.
HOG = """
import subprocess, sys
fill = "import sys; b = b'x' * (150 << 20); print('ready', flush=True); sys.stdin.read()"
kids = [subprocess.Popen([sys.executable, "-c", fill], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True) for _ in range(3)]
ready = [k.stdout.readline().strip() == "ready" for k in kids]
for k in kids:
    k.stdin.close()
    k.wait()
print("ready", sum(ready), "of 3")
"""


async def test_memory_is_limited_for_the_whole_command(tmp_path: Path) -> None:
    box = sandbox(limits=Limits(memory_mb=256))
    if not cgroup_home():
        pytest.skip("no cgroup can be managed here (not delegated, or no pids/memory controller)")
    (tmp_path / "hog.py").write_text(HOG)
    result = await ExecTool(sandbox=box).run(
        {"command": f"{PYTHON3} hog.py"}, ToolContext(workspace=tmp_path, session_key="k")
    )
    assert "ready 3 of 3" not in result.content, result.content
    assert "memory limit (256 MB for all its processes together)" in result.content


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A 64 MB filesystem of its own (a tmpfs), so the test fills no real disk."""
    path = Path(tempfile.mkdtemp(prefix="perch-disk-", dir="/tmp"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m,mode=0777", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        path.rmdir()
        pytest.skip(f"a tmpfs of its own needs root (CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)
        path.rmdir()


async def test_the_disk_floor_holds_for_the_whole_command(small_disk: Path) -> None:
    """Many files each far below the room left, together far above it: the command is
    stopped at the floor and told so; the disk keeps (about) what Perch keeps free."""
    floor = 32 * MB
    writes = "i=0; while [ $i -lt 60 ]; do head -c 1048576 /dev/zero > f$i; i=$((i+1)); done"
    result = await ExecTool(sandbox=sandbox(), keep_free=floor).run(
        {"command": f"{writes}; echo wrote-all"},
        ToolContext(workspace=small_disk, session_key="k"),
    )
    free = shutil.disk_usage(small_disk).free
    assert result.is_error and "wrote-all" not in result.content, result.content
    assert "reached the space kept free" in result.content
    # Checked every millisecond near the floor: a write or two may pass it, never the rest.
    assert free >= floor // 2, f"{free / MB:.1f} MB left of a {floor / MB:.0f} MB floor"


def _v2_with_controllers() -> Path | None:
    """The cgroup v2 mount point if its root gives its children pids and memory."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" - ")
        if len(fields) == 2 and fields[1].startswith("cgroup2 "):
            point = Path(fields[0].split()[4])
            enabled = set((point / "cgroup.subtree_control").read_text().split())
            if {"pids", "memory"} <= enabled:
                return point
    return None


_IN_DELEGATED_V2 = """
import asyncio, sys
from pathlib import Path
from agents.tools.base import ToolContext
from agents.tools.exec import ExecTool
from agents.tools.sandbox import Limits, select_sandbox

async def main() -> None:
    ws = Path(sys.argv[1])
    tool = ExecTool(sandbox=select_sandbox("bwrap", limits=Limits(processes=40, memory_mb=256)))
    print("COUNTING", tool.sandbox.counting())
    flood = asyncio.ensure_future(tool.run(
        {"command": "/usr/bin/python3 flood.py", "timeout_s": 60},
        ToolContext(workspace=ws, session_key="a")))
    async with asyncio.timeout(30):
        while not (ws / "full").exists() and not flood.done():
            await asyncio.sleep(0.02)
    other = await tool.run({"command": sys.argv[2]}, ToolContext(workspace=ws, session_key="b"))
    (ws / "stop").write_text("")
    print("OTHER", repr(other.content))
    print("FLOOD", repr((await flood).content))
    hog = await tool.run({"command": "/usr/bin/python3 hog.py"}, ToolContext(workspace=ws, session_key="c"))
    print("HOG", repr(hog.content))

asyncio.run(main())
"""


def test_a_delegated_cgroup_v2_gives_each_command_its_own(shared_ws: Path) -> None:
    """Under systemd with `Delegate=yes` the service's cgroup is Perch's to manage: the
    daemon moves itself into a leaf and each command gets a child with pids.max and
    memory.max. Made here by hand: a v2 cgroup marked delegated, the test's daemon in it."""
    sandbox()
    point = _v2_with_controllers()
    if point is None:
        pytest.skip(
            "this kernel's cgroup v2 hierarchy offers no pids and memory controllers (here "
            "they are bound to cgroup v1 hierarchies), so a delegated v2 cgroup cannot exist"
        )
    if os.geteuid() != 0:
        pytest.skip("making a delegated cgroup to test with needs root")
    (shared_ws / "flood.py").write_text(FLOOD)
    (shared_ws / "hog.py").write_text(HOG)
    home = point / f"perch-test-{os.getpid()}"
    home.mkdir()
    try:
        os.setxattr(home, "trusted.delegate", b"1")
        procs = home / "cgroup.procs"
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                _IN_DELEGATED_V2,
                str(shared_ws),
                OTHER,
            ],
            cwd=Path(__file__).resolve().parents[2],
            preexec_fn=lambda: procs.write_text("0"),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        for child in sorted(home.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if child.is_dir():
                child.rmdir()
        home.rmdir()
    assert done.returncode == 0, done.stderr
    assert "COUNTING a cgroup v2 per command" in done.stdout, done.stdout
    assert "OTHER '[exit code 0]\\nother-ok\\n'" in done.stdout, done.stdout
    assert "limit of 40 processes" in done.stdout and "ready 3 of 3" not in done.stdout
    assert "memory limit (256 MB for all its processes together)" in done.stdout


_FILL_TMP = """
import asyncio, sys
from pathlib import Path
from agents.tools.base import ToolContext
from agents.tools.exec import ExecTool
from agents.tools.sandbox import Limits, select_sandbox

async def main() -> None:
    tool = ExecTool(sandbox=select_sandbox("bwrap", limits=Limits(tmp_mb=64)))
    command = (
        "for n in 1 2 3; do dd if=/dev/zero of=/tmp/fill$n bs=1M count=100 2>&1 | tail -1; done; "
        "df -k /tmp | tail -1"
    )
    done = await tool.run({"command": command}, ToolContext(workspace=Path(sys.argv[1]), session_key="a"))
    print(done.content)

asyncio.run(main())
"""


def test_as_the_service_user_exec_tmp_is_a_sized_tmpfs(shared_ws: Path) -> None:
    """Three 100 MB files into /tmp with `tmp_mb: 64`, Perch not root: the tmpfs is full at
    64 MB (its pages are no process's memory: no rlimit would have stopped them)."""
    sandbox()
    done = run_unprivileged(
        _FILL_TMP,
        str(shared_ws),
        imports=("agents.tools.base", "agents.tools.exec", "agents.tools.sandbox"),
    )
    assert done.returncode == 0, done.stderr
    copied = [line for line in done.stdout.splitlines() if "copied" in line]
    assert sum(int(line.split()[0]) for line in copied) <= 64 * MB, done.stdout  # not 300 MB
    size_kb, used_kb = map(int, done.stdout.strip().splitlines()[-1].split()[1:3])
    assert size_kb <= 64 * 1024 and used_kb <= 64 * 1024, done.stdout
