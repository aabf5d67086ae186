"""The tools both test servers offer: plain text, an error, images (a tiny PNG, one over the
5 MB cap, a TIFF, audio), structured content, a tool marked destructive, a crash mid-call, a call that never answers, and a tool list that changes at run time."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Audio, Image
from mcp.types import ToolAnnotations

# A 1x1 PNG.
PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def _mark(path: str) -> None:
    Path(path).write_text(str(os.getpid()))


def build_server(name: str) -> MCPServer:
    server = MCPServer(name)

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return f"echo: {text}"

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails with the reason."""
        raise ToolError(f"refused: {reason}")

    @server.tool(structured_output=False)
    def picture() -> list[object]:
        """A caption and a tiny image."""
        return ["a red pixel", Image(data=PIXEL, format="png")]

    @server.tool(structured_output=False)
    def oversized() -> list[object]:
        """An image over the 5 MB cap, a TIFF and a sound: notes, not images."""
        return [
            Image(data=PIXEL + bytes(5_000_001), format="png"),
            Image(data=PIXEL, format="tiff"),
            Audio(data=b"RIFF0000WAVE", format="wav"),
        ]

    @server.tool(annotations=ToolAnnotations(destructiveHint=True))
    def wipe(name: str) -> str:
        """Pretends to delete a record (the server marks it destructive)."""
        return f"wiped {name}"

    @server.tool()
    def weather(city: str) -> dict[str, object]:
        """Structured weather for a city."""
        return {"city": city, "celsius": 21}

    @server.tool()
    def exists(path: str) -> str:
        """Whether the server can see `path`."""
        return "yes" if Path(path).exists() else "no"

    @server.tool()
    def big(size: int) -> str:
        """A long text of `size` characters."""
        return "x" * size

    @server.tool()
    async def crash() -> str:
        """Dies in the middle of the call."""
        os._exit(3)

    @server.tool()
    async def hang(marker: str = "") -> str:
        """Never answers (writes `marker` first, when given, so a test knows it is running)."""
        if marker:
            _mark(marker)
        await asyncio.Event().wait()
        return "unreachable"

    @server.tool()
    async def steps(ctx: Context) -> str:
        """Reports progress (2 of 5, then 5 of 5) before it answers."""
        await ctx.report_progress(2, 5, "two of five")
        await ctx.report_progress(5, 5)
        return "all steps done"

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Adds a tool named `extra` and tells the client the list changed."""

        def extra() -> str:
            """A tool that appeared later."""
            return "extra here"

        server.add_tool(extra, name="extra")
        await ctx.session.send_tool_list_changed()
        return "grown"

    return server
