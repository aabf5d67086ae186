"""The `mcp:` config section: which MCP servers to connect and how.

`mcp.servers.<name>` is either a stdio server (`command: [argv...]`, or `command: program`
with `args: [...]` as server READMEs write it; optional `env`, `cwd`)
or a Streamable HTTP server (`url:`, optional `headers`). Every server takes `tools:` (an
allow-list of the server's own tool names, `*` suffix allowed; default all), `timeout_s` per
call (60) and `enabled`. A stdio server runs under the exec sandbox (bubblewrap) by default
when bwrap works here (`sandbox` unset; with the network, which `network: false` takes away);
`sandbox: true` insists (the server is not started without a working bwrap) and `sandbox:
false` opts out (warned about at start); see `bot.tools.mcp`. `server_specs(config)` turns
the section into the platform-free `ServerSpec`s of `agents.mcp`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.mcp.spec import ServerSpec


class McpServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: list[str] | None = Field(None, min_length=1)
    args: list[str] = Field(default_factory=list)  # as server READMEs write it: command + args
    env: dict[str, str] = Field(default_factory=dict)
    cwd: Path | None = None
    url: str | None = Field(None, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    tools: list[str] | None = None
    timeout_s: float = Field(60, gt=0)
    enabled: bool = True
    sandbox: bool | None = None  # None: sandboxed when bwrap works here
    network: bool = True  # inside the sandbox (npx fetching its package, a fetch server)

    @model_validator(mode="before")
    @classmethod
    def _command_string(cls, data: Any) -> Any:
        """`command: npx` with `args: [...]` (every server README's shape) is one argv."""
        if isinstance(data, dict) and isinstance(data.get("command"), str):
            data = {**data, "command": [data["command"]]}
        return data

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if self.args and self.command is None:
            raise ValueError("args belong to a stdio server: give command: <program> with them")
        if self.args:
            self.command = [*(self.command or []), *self.args]
            self.args = []
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "give either command: [program, args...] (a stdio server) or url: "
                "http(s)://... (a Streamable HTTP server), not both or neither"
            )
        if self.url is not None and (self.env or self.cwd is not None):
            raise ValueError("env and cwd belong to stdio servers (command:), not to url:")
        if self.command is not None and self.headers:
            raise ValueError("headers belong to HTTP servers (url:), not to command:")
        if self.url is not None and self.sandbox:
            raise ValueError("sandbox: true applies to stdio servers (command:), not to url:")
        if not self.network and self.sandbox is False:
            raise ValueError(
                "network: false needs the sandbox (an unsandboxed server has the host's network)"
            )
        return self


class McpConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    servers: dict[str, McpServerConfig] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names(self) -> McpConfig:
        for name in self.servers:
            if not name or len(name) > 30 or not all(c.isalnum() or c in "-_" for c in name):
                raise ValueError(
                    f"server name {name!r}: use 1-30 letters, digits, '-' or '_' (it becomes "
                    "the prefix of the tool names, <server>__<tool>)"
                )
            if "__" in name:
                raise ValueError(f"server name {name!r}: '__' is reserved as the separator")
        return self


def server_specs(mcp: McpConfig, base: Path | None = None) -> list[ServerSpec]:
    """The configured servers as `ServerSpec`s; a relative `cwd` is taken from `base`."""
    specs: list[ServerSpec] = []
    for name, server in mcp.servers.items():
        cwd = server.cwd
        if cwd is not None and base is not None and not cwd.is_absolute():
            cwd = (base / cwd).resolve()
        specs.append(
            ServerSpec(
                name=name,
                command=tuple(server.command or ()),
                env=dict(server.env),
                cwd=cwd,
                url=server.url or "",
                headers=dict(server.headers),
                allow=tuple(server.tools) if server.tools is not None else None,
                timeout_s=server.timeout_s,
                enabled=server.enabled,
            )
        )
    return specs


def mcp_secrets(mcp: McpConfig) -> list[str]:
    """Values the redactor must hide: every header value, the value of every `env` entry
    (a server prints its `GITHUB_PAT` on stderr whatever the variable is called), and the
    query and credentials of each URL."""
    secrets: list[str] = []
    for server in mcp.servers.values():
        secrets.extend(server.headers.values())
        for header in server.headers.values():
            secrets.extend(header.split()[1:])  # the token of "Bearer <token>"
        secrets.extend(server.env.values())
        if server.url:
            parts = urlsplit(server.url)
            secrets.extend(p for p in (parts.query, parts.password) if p)
    return secrets
