"""Nothing secret shows inside the sandbox, wherever it lives on the host.

Every `${file:}` and `${cred:}` path, the credentials directory, the config folder and the
state directory (database, control socket) are masked in exec's sandbox (and MCP servers',
which are built the same way), also where they sit under a folder the sandbox shows: `/etc`,
or a folder bound into it. The IPC namespace is the sandbox's own.
"""

from __future__ import annotations

import os
import shutil
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from agents.tools.base import ToolContext
from agents.tools.exec import ExecTool
from agents.tools.sandbox import Sandbox, SandboxUnavailable, select_sandbox
from bot.config.load import load_config
from bot.tools.belt import build_tools

SECRET = "sk-ant-masked-secret-0123456789"


def working_bwrap() -> str:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed; apt-get install bubblewrap")
    try:
        return select_sandbox("bwrap").bwrap
    except SandboxUnavailable as exc:
        pytest.skip(f"bwrap cannot run here: {exc}")


@pytest.fixture
def etc_dir() -> Iterator[Path]:
    """A folder under /etc, as the README's `${file:/etc/perch/...}` example has it."""
    if os.geteuid() != 0:
        pytest.skip("a secret under /etc needs root to create")
    path = Path("/etc") / f"perch-test-{uuid.uuid4().hex[:10]}"
    path.mkdir(mode=0o700)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def exec_of(tmp_path: Path, settings: dict[str, object], env: dict[str, str]) -> ExecTool:
    """The exec tool `perch run` would build from this config."""
    folder = tmp_path / "conf"
    folder.mkdir()
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump({"agent": {"exec": {"enabled": True}}, **settings}))
    tool = build_tools(load_config(path, env)).get("exec")
    assert isinstance(tool, ExecTool)
    return tool


async def test_a_file_secret_outside_the_config_folder_is_masked(
    tmp_path: Path, etc_dir: Path
) -> None:
    working_bwrap()
    key = etc_dir / "anthropic_key"
    key.write_text(SECRET)
    (etc_dir / "other").write_text("beside it")
    tool = exec_of(tmp_path, {"providers": {"anthropic": {"api_key": f"${{file:{key}}}"}}}, {})
    ws = tmp_path / "ws"
    ws.mkdir()
    result = await tool.run(
        {"command": f"cat {key}; echo; ls -a {etc_dir}; echo end"},
        ToolContext(workspace=ws, session_key="k"),
    )
    assert "end" in result.content
    assert SECRET not in result.content


async def test_the_credentials_directory_is_masked(tmp_path: Path, etc_dir: Path) -> None:
    working_bwrap()
    (etc_dir / "anthropic_api_key").write_text(SECRET)
    (etc_dir / "telegram_bot_token").write_text("123:telegram-secret")
    settings = {"providers": {"anthropic": {"api_key": "${cred:anthropic_api_key}"}}}
    tool = exec_of(tmp_path, settings, {"CREDENTIALS_DIRECTORY": str(etc_dir)})
    ws = tmp_path / "ws"
    ws.mkdir()
    result = await tool.run(
        {"command": f"ls {etc_dir}; cat {etc_dir}/*; echo end"},
        ToolContext(workspace=ws, session_key="k"),
    )
    assert "end" in result.content
    assert "telegram_bot_token" not in result.content and "telegram-secret" not in result.content
    assert SECRET not in result.content


async def test_the_ipc_namespace_is_the_sandboxes_own(tmp_path: Path) -> None:
    tool = ExecTool(sandbox=Sandbox("bwrap", working_bwrap()))
    result = await tool.run(
        {"command": "readlink /proc/self/ns/ipc"}, ToolContext(workspace=tmp_path, session_key="k")
    )
    assert result.content.startswith("[exit code 0]\nipc:[")
    assert os.readlink("/proc/self/ns/ipc") not in result.content


async def test_a_state_directory_inside_a_bound_folder_is_masked_with_its_socket(
    tmp_path: Path,
) -> None:
    """An MCP server's folder may hold the state directory: the database and the control
    socket stay out of reach all the same."""
    state = tmp_path / "data"
    state.mkdir()
    (state / "perch.db").write_text("the database")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(state / "perch.sock"))
    listener.listen()
    try:
        box = Sandbox("bwrap", working_bwrap(), network=True, hide=(state,))
        connect = (
            "import socket; s = socket.socket(socket.AF_UNIX); "
            f"s.connect('{state}/perch.sock'); print('CONNECTED')"
        )
        probe = f'ls -a {state}; cat {state}/perch.db 2>/dev/null; python3 -c "{connect}" 2>/dev/null; echo end'

        result = await ExecTool(sandbox=box).run(
            {"command": probe}, ToolContext(workspace=tmp_path, session_key="k")
        )
    finally:
        listener.close()
    assert "end" in result.content
    assert "the database" not in result.content and "CONNECTED" not in result.content
    assert "perch.db" not in result.content
