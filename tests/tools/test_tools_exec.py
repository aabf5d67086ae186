"""exec: output and exit codes, output cap, timeout and cancel kill the whole process group,
and the environment is scrubbed of secrets."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.cancel import Cancelled
from agents.tools.base import ToolContext, ToolError
from agents.tools.exec import ExecTool
from agents.tools.exec_env import SECRET_MARKERS, build_env, is_secret_name
from tests.waiting import eventually


def ctx_for(ws: Path) -> ToolContext:
    return ToolContext(workspace=ws, session_key="agent:main:test")


def process_gone(pid: int) -> bool:
    """True if `pid` no longer runs (absent, or a zombie nobody has reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


async def test_combined_output_and_exit_code(tmp_path: Path) -> None:
    result = await ExecTool().run({"command": "echo out; echo err >&2; exit 3"}, ctx_for(tmp_path))
    assert result.content == "[exit code 3]\nout\nerr\n"
    assert not result.is_error


async def test_runs_in_the_workspace_with_home_set_to_it(tmp_path: Path) -> None:
    result = await ExecTool().run({"command": 'pwd; echo "$HOME"'}, ctx_for(tmp_path))
    assert result.content == f"[exit code 0]\n{tmp_path}\n{tmp_path}\n"


async def test_no_output_and_no_stdin(tmp_path: Path) -> None:
    result = await ExecTool().run({"command": "cat"}, ctx_for(tmp_path))
    assert result.content == "[exit code 0]\n(no output)"


async def test_signal_death_is_reported(tmp_path: Path) -> None:
    result = await ExecTool().run({"command": "kill -TERM $$"}, ctx_for(tmp_path))
    assert result.content.startswith("[killed by signal 15]")


async def test_long_output_keeps_head_and_tail_and_marks_the_cut(tmp_path: Path) -> None:
    command = "echo START; yes middle | head -n 20000; echo END"
    result = await ExecTool(max_output_chars=200).run({"command": command}, ctx_for(tmp_path))
    body = result.content.split("\n", 1)[1]
    assert body.startswith("START\nmiddle")
    assert body.endswith("middle\nEND\n")
    assert (
        "[... output truncated: 140,010 bytes in total; showing the first 100 and the last 100"
        in body
    )
    assert len(body) < 400


async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    command = "sleep 30 & echo $! > child.pid; echo started; wait"
    result = await asyncio.wait_for(
        ExecTool().run({"command": command, "timeout_s": 0.5}, ctx_for(tmp_path)), timeout=10
    )
    assert result.is_error
    assert result.content == (
        "[timed out after 0.5 s; the command's process group was killed]\nstarted\n"
    )
    child = int((tmp_path / "child.pid").read_text())
    await eventually(lambda: process_gone(child))


async def test_background_jobs_do_not_outlive_the_command(tmp_path: Path) -> None:
    command = "sleep 30 >/dev/null 2>&1 & echo $! > bg.pid; echo done"
    result = await asyncio.wait_for(ExecTool().run({"command": command}, ctx_for(tmp_path)), 10)
    assert result.content == "[exit code 0]\ndone\n"
    bg = int((tmp_path / "bg.pid").read_text())
    await eventually(lambda: process_gone(bg))


async def test_background_job_holding_the_output_is_killed_after_a_grace(tmp_path: Path) -> None:
    command = "sleep 30 & echo $! > bg.pid; echo done"
    result = await asyncio.wait_for(ExecTool().run({"command": command}, ctx_for(tmp_path)), 10)
    assert result.content == (
        "[exit code 0]\ndone\n\n[background processes still holding the output were killed]"
    )
    bg = int((tmp_path / "bg.pid").read_text())
    await eventually(lambda: process_gone(bg))


async def test_cancel_token_kills_the_group_and_raises_cancelled(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    command = "sleep 30 & echo $! > child.pid; wait"
    task = asyncio.create_task(ExecTool().run({"command": command}, ctx))
    await eventually(
        lambda: (tmp_path / "child.pid").exists() and (tmp_path / "child.pid").read_text()
    )
    ctx.cancel.cancel("cancelled by user")
    with pytest.raises(Cancelled, match="cancelled by user"):
        await asyncio.wait_for(task, timeout=5)
    child = int((tmp_path / "child.pid").read_text())
    await eventually(lambda: process_gone(child))


async def test_an_already_cancelled_run_starts_nothing(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    ctx.cancel.cancel("stopped")
    with pytest.raises(Cancelled):
        await ExecTool().run({"command": "touch ran"}, ctx)
    assert not (tmp_path / "ran").exists()


async def test_task_cancellation_also_kills_the_group(tmp_path: Path) -> None:
    command = "sleep 30 & echo $! > child.pid; wait"
    task = asyncio.create_task(ExecTool().run({"command": command}, ctx_for(tmp_path)))
    await eventually(
        lambda: (tmp_path / "child.pid").exists() and (tmp_path / "child.pid").read_text()
    )
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    child = int((tmp_path / "child.pid").read_text())
    await eventually(lambda: process_gone(child))


async def test_secrets_never_reach_the_command_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-should-not-leak")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:tg-should-not-leak")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-should-not-leak")
    monkeypatch.setenv("PERCH_EXTRA", "visible")
    monkeypatch.setenv("UNLISTED", "hidden")
    monkeypatch.setenv("TZ", "Europe/Paris")
    tool = ExecTool(allow_env=["PERCH_EXTRA", "GITHUB_TOKEN", "ANTHROPIC_API_KEY", "MISSING"])
    result = await tool.run({"command": "env"}, ctx_for(tmp_path))
    env = dict(line.split("=", 1) for line in result.content.splitlines()[1:] if "=" in line)
    assert "should-not-leak" not in result.content
    assert env["PERCH_EXTRA"] == "visible"
    assert env["HOME"] == str(tmp_path)
    assert env["TZ"] == "Europe/Paris"
    assert {"UNLISTED", "MISSING", "GITHUB_TOKEN", "ANTHROPIC_API_KEY"}.isdisjoint(env)
    assert set(env) <= {"PATH", "HOME", "LANG", "TZ", "PERCH_EXTRA", "PWD", "SHLVL", "_"}


def test_build_env_has_the_fixed_names_even_from_an_empty_environment(tmp_path: Path) -> None:
    env = build_env(tmp_path, allow_env=["HOME"], source={"HOME": "/root"})
    assert env == {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(tmp_path)}


@given(
    prefix=st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ_abc", max_size=8),
    marker=st.sampled_from(SECRET_MARKERS),
    suffix=st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ_abc0123", max_size=8),
    lower=st.booleans(),
)
def test_any_name_containing_a_secret_marker_is_never_passed(
    prefix: str, marker: str, suffix: str, lower: bool
) -> None:
    name = prefix + (marker.lower() if lower else marker) + suffix
    assert is_secret_name(name)
    env = build_env(Path("/w"), allow_env=[name], source={name: "secret-value"})
    assert "secret-value" not in env.values()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({}, "missing required argument 'command'"),
        ({"command": ["ls"]}, "'command' must be a string"),
        ({"command": "  "}, "'command' is empty"),
        ({"command": "ls", "timeout_s": "5"}, "'timeout_s' must be a number"),
        ({"command": "ls", "timeout_s": True}, "'timeout_s' must be a number"),
        ({"command": "ls", "timeout_s": 0}, r"must be > 0 and <= 600"),
        ({"command": "ls", "timeout_s": 601}, r"must be > 0 and <= 600"),
    ],
)
async def test_bad_arguments_raise_tool_errors(
    tmp_path: Path, args: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ToolError, match=fragment):
        await ExecTool().run(args, ctx_for(tmp_path))


async def test_missing_workspace_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="does not exist"):
        await ExecTool().run({"command": "true"}, ctx_for(tmp_path / "nope"))


def test_description_says_it_is_not_a_sandbox() -> None:
    assert "Not a sandbox" in ExecTool().description
    assert os.path.exists("/bin/sh")


async def test_a_command_cannot_write_past_the_disk_floor_but_can_delete(tmp_path: Path) -> None:
    # A model with exec could otherwise fill the disk the history lives on, file by file.
    (tmp_path / "old.log").write_bytes(b"x" * 10_000)
    keep = shutil.disk_usage(tmp_path).free - 4096  # about 4 KB left above the floor
    command = "head -c 1000000 /dev/zero > big; echo wrote; rm old.log && echo deleted"
    result = await ExecTool(keep_free=keep).run({"command": command}, ctx_for(tmp_path))
    assert (tmp_path / "big").stat().st_size < 100_000  # stopped near the 4 KB headroom
    assert not (tmp_path / "old.log").exists() and "deleted" in result.content
    assert "the disk is nearly full" in result.content
    roomy = await ExecTool(keep_free=0).run(
        {"command": "head -c 100000 /dev/zero > ok"}, ctx_for(tmp_path)
    )
    assert (tmp_path / "ok").stat().st_size == 100_000 and "nearly full" not in roomy.content
