"""Papercuts of a new user's first steps, each as it was met: `perch mcp list` before the
workspace exists names the missing working directory (not "program not found"); `perch init`
makes the data folder private (0700, as `perch run` makes its own); a config without a
`providers:` block takes the key from ANTHROPIC_API_KEY; a config naming a platform this
install lacks says that it is not installed (a disabled section is ignored)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.config.errors import ConfigError
from bot.config.load import load_config, require_api_key
from bot.operator.cli import main
from tests.mcp_servers.running import REPO


def test_mcp_list_before_the_workspace_exists_names_the_missing_folder(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "agent: {workspace: ./workspace}\n"
        "mcp:\n  servers:\n"
        f"    notes: {{command: ['{sys.executable}', '-c', 'pass']}}\n"
        "channels: {console: {enabled: false}}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "bot.operator.cli", "mcp", "list", "--config", str(config)],
        capture_output=True, text=True, timeout=60, cwd=REPO, env=dict(os.environ),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"working directory not found: {tmp_path / 'workspace'}" in proc.stdout
    assert "program not found" not in proc.stdout


def test_init_makes_the_data_folder_private(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    assert main(["init", "--config", str(config)]) == 0
    data = load_config(config, {}, lenient=True).db_path.parent
    assert data.is_dir() and data.stat().st_mode & 0o777 == 0o700


def test_a_config_without_providers_takes_the_key_from_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("agent: {model: claude-sonnet-5-5}\n")
    loaded = load_config(config, {"ANTHROPIC_API_KEY": "sk-ant-from-env"})
    require_api_key(loaded)  # no "api_key is empty: set ANTHROPIC_API_KEY" while it is set
    assert loaded.providers.anthropic.api_key == "sk-ant-from-env"
    assert loaded.providers.anthropic.base_url == "https://api.anthropic.com"
    assert "sk-ant-from-env" in loaded.secret_values()  # redacted like a written key
    with pytest.raises(ConfigError, match="api_key is empty: set ANTHROPIC_API_KEY"):
        require_api_key(load_config(config, {}))


_LOAD_WITHOUT_SLACK = """
import sys
sys.modules["channels.slack"] = None  # the slack subpackage removed from this install
from bot.config.errors import ConfigError
from bot.config.load import load_config
try:
    load_config(sys.argv[1], {})
except ConfigError as exc:
    print(exc)
else:
    print("loaded")
"""


@pytest.mark.parametrize(
    ("section", "said"),
    [
        ("slack: {enabled: false, bot_token: x}", "loaded"),
        ("slack: {bot_token: x}", "loaded"),  # off unless enabled
        ("slack: {enabled: true}", "channels.slack: the slack platform is not installed"),
        ("slak: {enabled: true}", "channels.slak: unknown key"),  # a typo stays a typo
    ],
)
def test_a_platform_this_install_lacks_is_named_as_not_installed(
    tmp_path: Path, section: str, said: str
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"channels:\n  console: {{enabled: false}}\n  {section}\n")
    proc = subprocess.run(
        [sys.executable, "-c", _LOAD_WITHOUT_SLACK, str(config)],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert said in proc.stdout, proc.stdout + proc.stderr
