"""The `mcp:` config section, the model-facing tool names, result mapping, and the live tool
registry that MCP tools join and leave."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from agents.mcp.manager import tool_name
from agents.mcp.results import MAX_IMAGES, map_result
from agents.tools.base import Tool, ToolContext, ToolRegistry, ToolResult
from bot.config.errors import ConfigError
from bot.config.load import load_config
from bot.config.mcp import server_specs


def load(tmp_path: Path, servers: dict[str, Any], env: dict[str, str] | None = None) -> Any:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"mcp": {"servers": servers}}))
    return load_config(path, env or {})


def test_both_transports_with_defaults_and_secrets_from_the_environment(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        {
            "files": {"command": ["npx", "server-files"], "env": {"TOKEN": "${GH_TOKEN}"}},
            "web": {"url": "https://mcp.example/mcp", "headers": {"Authorization": "${AUTH}"}},
        },
        {"GH_TOKEN": "ghp_1", "AUTH": "Bearer x"},
    )
    files, web = server_specs(config.mcp, tmp_path)
    assert files.command == ("npx", "server-files") and files.env == {"TOKEN": "ghp_1"}
    assert files.timeout_s == 60 and files.enabled and files.allow is None
    assert files.transport == "stdio" and web.transport == "http"
    assert web.headers == {"Authorization": "Bearer x"}


def test_an_empty_section_is_the_default(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("agent: {}\n")
    assert load_config(path, {}).mcp.servers == {}


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ({"x": {}}, "mcp.servers.x: give either command: [program, args...]"),
        ({"x": {"command": ["a"], "url": "http://h/mcp"}}, "not both or neither"),
        ({"x": {"url": "ftp://h"}}, "mcp.servers.x.url"),
        ({"x": {"url": "http://h/mcp", "env": {"A": "b"}}}, "env and cwd belong to stdio"),
        ({"x": {"command": ["a"], "headers": {"A": "b"}}}, "headers belong to HTTP servers"),
        ({"x": {"url": "http://h/mcp", "sandbox": True}}, "sandbox: true applies to stdio"),
        ({"x": {"command": ["a"], "sandbox": False, "network": False}}, "network: false needs"),
        ({"x": {"command": ["a"], "timeout_s": 0}}, "mcp.servers.x.timeout_s"),
        ({"x": {"command": ["a"], "tool": ["a"]}}, "mcp.servers.x.tool: unknown key"),
        ({"a.b": {"command": ["a"]}}, "server name 'a.b'"),
        ({"a__b": {"command": ["a"]}}, "'__' is reserved"),
    ],
)
def test_bad_server_entries_get_one_clear_line(
    tmp_path: Path, servers: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, servers)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_sandbox_false_is_accepted_and_relative_cwd_is_resolved(tmp_path: Path) -> None:
    config = load(tmp_path, {"x": {"command": ["a"], "sandbox": False, "cwd": "srv"}})
    (spec,) = server_specs(config.mcp, tmp_path)
    assert spec.cwd == tmp_path / "srv"


@given(st.text(min_size=1, max_size=30), st.text(min_size=1, max_size=80))
def test_tool_names_are_always_valid_for_the_model_api(server: str, tool: str) -> None:
    name = tool_name(server, tool)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name)


def test_plain_names_are_kept() -> None:
    assert tool_name("github", "create_issue") == "github__create_issue"
    assert tool_name("fs", "read.file") == "fs__read_file"


def result(content: list[Any], structured: Any = None, error: bool = False) -> ToolResult:
    return map_result(
        types.CallToolResult(content=content, structured_content=structured, is_error=error)
    )


def test_results_map_to_text_the_model_can_read() -> None:
    text = types.TextContent(type="text", text="hello")
    image = types.ImageContent(type="image", data="aGVsbG8=", mime_type="image/png")
    assert result([text]) == ToolResult("hello")
    assert result([text], {"result": "hello"}) == ToolResult("hello")
    png = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="},
    }
    shown = result([text, image])  # any valid base64 of an allowed type is passed on
    assert shown.content == "hello\n[image image/png, 5 bytes: attached below]"
    assert shown.images == (png,)
    assert result([image]).content == "[image image/png, 5 bytes: attached below]"
    svg = types.ImageContent(type="image", data="aGVsbG8=", mime_type="image/svg+xml")
    tiff = types.ImageContent(type="image", data="aGVsbG8=", mime_type="image/tiff")
    broken = types.ImageContent(type="image", data="not base64!", mime_type="image/png")
    for unshown in (svg, tiff, broken):
        assert result([unshown]).images == () and "bytes: not shown (" in result([unshown]).content
    assert result([text, tiff]).content == (
        "hello\n[image image/tiff, 5 bytes: not shown (only PNG, JPEG, GIF and WebP are)]"
    )
    assert "not valid base64" in result([broken]).content
    audio = types.AudioContent(type="audio", data="aGVsbG8=", mime_type="audio/wav")
    assert result([audio]) == ToolResult("[audio audio/wav, 5 bytes: not shown as text]")
    many = result([image] * (MAX_IMAGES + 1))
    assert len(many.images) == MAX_IMAGES
    assert many.content.endswith("[image image/png, 5 bytes: not shown (only 4 images per result)]")
    assert result([], {"a": 1}).content == '{\n "a": 1\n}'
    assert result([types.TextContent(type="text", text='{"a": 1}')], {"a": 1}).content == '{"a": 1}'
    # Structured content is sent once: an image is not repeated as base64 text beside it.
    with_image = result([image], {"image": "aGVsbG8=", "format": "png"})
    assert "aGVsbG8=" not in with_image.content and with_image.images == (png,)
    assert result([text], {"summary": "hello", "rows": [1, 2]}).content == "hello"
    assert result([text], error=True) == ToolResult("hello", is_error=True)
    assert result([], error=True).is_error
    link = types.ResourceLink(type="resource_link", uri="file:///x", name="x")
    assert result([link]).content == "[resource file:///x]"


class Named:
    def __init__(self, name: str) -> None:
        self.name = name
        self.description = name
        self.input_schema: dict[str, Any] = {"type": "object"}

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(self.name)


class Source:
    def __init__(self) -> None:
        self.generation = 0
        self.current: list[Tool] = []

    def tools(self) -> Sequence[Tool]:
        return self.current

    def set(self, *names: str) -> None:
        self.current = [Named(n) for n in names]
        self.generation += 1


def test_the_registry_follows_its_providers_and_caches_the_schema_list() -> None:
    source = Source()
    registry = ToolRegistry([Named("read_file")], [source]).restricted(deny=["srv__secret"])
    child = registry.restricted(allow=["read_file", "srv__*"], deny=["srv__write"])
    first = registry.schemas()
    assert registry.schemas() is first  # nothing changed: the same list, no rebuild
    assert registry.names == ["read_file"]

    source.set("srv__echo", "srv__secret", "srv__write", "read_file")
    assert registry.names == ["read_file", "srv__echo", "srv__write"]
    assert registry.schemas() is not first
    assert child.names == ["read_file", "srv__echo"]
    assert isinstance(registry.get("read_file"), Named) and "srv__echo" in registry

    source.set()  # the server went away
    assert registry.names == ["read_file"] and "srv__echo" not in child


def test_urls_and_secrets_never_show_in_status_or_logs(tmp_path: Path) -> None:
    from bot.config.mcp import mcp_secrets

    config = load(
        tmp_path,
        {
            "web": {
                "url": "https://user:pw-123456@mcp.example:8443/mcp?api_key=abcdef123",
                "headers": {"Authorization": "Bearer tok-123456789"},
            },
            "cli": {"command": ["x"], "env": {"GITHUB_TOKEN": "ghp_abcdef", "LEVEL": "warn"}},
        },
    )
    web = next(s for s in server_specs(config.mcp) if s.name == "web")
    assert web.where() == "https://mcp.example:8443/mcp"
    secrets = mcp_secrets(config.mcp)
    assert {"Bearer tok-123456789", "tok-123456789", "ghp_abcdef", "pw-123456"} <= set(secrets)
    assert "api_key=abcdef123" in secrets
    assert "warn" in secrets  # every env value, whatever its name (short ones are not masked)


async def test_a_refused_server_is_down_with_the_reason_and_never_started(tmp_path: Path) -> None:
    from agents.mcp.manager import McpManager
    from agents.mcp.spec import ServerSpec
    from tests.waiting import eventually

    marker = tmp_path / "started"
    spec = ServerSpec("boxed", command=("touch", str(marker)), refused="bwrap is missing")
    manager = McpManager([spec])
    manager.start()
    await manager.wait_settled(5)
    status = manager.status()["boxed"]
    assert (status["state"], status["error"], status["attempts"]) == ("down", "bwrap is missing", 0)
    await manager.stop()
    await eventually(lambda: manager.status()["boxed"]["state"] == "stopped")
    assert not marker.exists()
