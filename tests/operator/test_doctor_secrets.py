"""`perch doctor` and `perch store migrate` with secrets missing: every failure counted, an
unset `${...}` reported and never used, nothing sent to a public host without a key."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import pytest

from tests.fakes.anthropic import FakeAnthropic

pytestmark = pytest.mark.timeout(90)
REPO = Path(__file__).resolve().parents[2]


def bare_env() -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"),
            "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1"}  # fmt: skip


async def perch(cwd: Path, *args: str, net: bool = True) -> tuple[int, str]:
    command = [sys.executable, "-m", "bot.operator.cli", *args]
    if not net:  # a network namespace with nothing in it: no host at all can be reached
        command = ["unshare", "--net", "--", *command]
    proc = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env=bare_env(), cwd=cwd,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


def summary_count(out: str) -> int:
    match = re.search(r"Doctor: (\d+) of \d+ checks failed", out)
    assert match, out
    return int(match.group(1))


async def test_the_failure_count_is_the_number_of_fail_lines_and_unset_refs_are_never_used(
    tmp_path: Path,
) -> None:
    async with FakeAnthropic() as fake:
        (tmp_path / "config.yaml").write_text(
            "providers:\n"
            "  anthropic: {api_key: '${ANTHROPIC_API_KEY}', base_url: '${cred:model_url}'}\n"
            f"  local: {{kind: openai, base_url: '{fake.base_url}/v1', api_key: '${{LOCAL_KEY}}'}}\n"
            "agent: {fallbacks: [local/qwen3]}\n"
            "mcp:\n  servers:\n    gh: {command: [gh-mcp], env: {GITHUB_TOKEN: '${GITHUB_TOKEN}'}}\n"
            "channels: {console: {enabled: false}}\n"
        )
        code, out = await perch(tmp_path, "doctor", "--config", "config.yaml")
        assert fake.requests == []  # nothing was sent with a literal "${LOCAL_KEY}" as key
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert code == 1 and summary_count(out) == len(fails), out
    assert "unreachable" not in out and "UnsupportedProtocol" not in out  # no URL "${cred:...}"
    assert "FAIL  model: not checked" in out and "FAIL  model local: not checked" in out
    assert "FAIL  mcp gh: not started" in out and "GITHUB_TOKEN" in out


async def test_no_request_goes_to_a_public_host_without_a_key(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "agent: {fallbacks: [openai/gpt-5-mini]}\n"
        "providers:\n  anthropic: {api_key: ''}\n"
        "  openai: {kind: openai, base_url: 'https://api.openai.com/v1', api_key: ''}\n"
        "channels: {console: {enabled: false}}\n"
    )
    code, out = await perch(tmp_path, "doctor", "--config", "config.yaml", net=False)
    assert code == 1
    assert "FAIL  model: no API key, so nothing was sent" in out
    assert "FAIL  model openai: no API key, so nothing was sent" in out
    assert summary_count(out) == out.count("\nFAIL")


async def test_store_migrate_needs_no_model_key(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "providers:\n  anthropic: {api_key: '${ANTHROPIC_API_KEY}'}\n"
        "channels: {console: {enabled: false}}\n"
    )
    code, out = await perch(
        tmp_path,
        "store",
        "migrate",
        "--config",
        "config.yaml",
        "--to",
        "postgresql://u@127.0.0.1:9/x",
    )
    assert code == 1 and "nothing to migrate" in out  # got past the config: no key asked for
    assert "ANTHROPIC_API_KEY" not in out
