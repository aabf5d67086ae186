"""A Streamable HTTP MCP server: `python -m tests.mcp_servers.http_server [name]`.

It listens on 127.0.0.1 at a port the OS picks and prints `PORT <n>` on stdout once it
accepts connections; the MCP endpoint is `/mcp`. Besides the tools both test servers offer,
`traceparent` answers with the W3C `traceparent` header its call's HTTP request carried."""

from __future__ import annotations

import asyncio
import socket
import sys

import uvicorn
from mcp.server.mcpserver import Context

from tests.mcp_servers.tools import build_server


async def main(name: str) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    mcp = build_server(name)

    @mcp.tool()
    def traceparent(ctx: Context) -> str:
        """The traceparent header this call's HTTP request carried ("none": none)."""
        return (ctx.headers or {}).get("traceparent", "none")

    app = mcp.streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if serving.done():
            await serving
            return
        await asyncio.sleep(0.01)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await serving


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "web"))
