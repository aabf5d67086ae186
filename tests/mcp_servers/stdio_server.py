"""A stdio MCP server: `python -m tests.mcp_servers.stdio_server [name]`.

With `PERCH_TEST_PIDFILE` set it writes its pid there first, so a test can check that it is
gone after the daemon is."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.mcp_servers.tools import build_server

if __name__ == "__main__":
    pidfile = os.environ.get("PERCH_TEST_PIDFILE")
    if pidfile:
        Path(pidfile).write_text(str(os.getpid()))
    build_server(sys.argv[1] if len(sys.argv) > 1 else "demo").run("stdio")
