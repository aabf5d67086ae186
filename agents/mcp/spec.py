"""`ServerSpec`: how to reach one MCP server. Kept free of the SDK so the config can name it
without importing `mcp` (the CLI's fast paths never load the SDK)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """How to reach one MCP server (built from `mcp.servers.<name>`)."""

    name: str
    command: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    allow: tuple[str, ...] | None = None
    timeout_s: float = 60.0
    enabled: bool = True
    ping_s: float = 5.0
    first_backoff_s: float = 1.0
    # The argv actually run when it differs from `command` (the server under the sandbox).
    launch: tuple[str, ...] = ()
    # Why this server must not be started (e.g. its sandbox cannot run here); shown as DOWN.
    refused: str = ""

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"

    def where(self) -> str:
        """The program, or the URL without credentials or query (for logs and status)."""
        if self.command:
            return self.command[0]
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"
