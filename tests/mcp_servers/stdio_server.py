"""A stdio MCP server: `python -m tests.mcp_servers.stdio_server [name] [marker...]`.

With `PERCH_TEST_PIDFILE` set it writes its pid there first, so a test can check that it is
gone after the daemon is. `PERCH_TEST_STDERR` is written to stderr at start (as it is: escape
sequences and all), `PERCH_TEST_STDERR_LINES=N` adds N numbered lines, and with
`PERCH_TEST_IGNORE_EOF` set the server lives on after its stdin closes (it only dies when
killed). Arguments after the name are ignored (a marker a test can find in `ps`)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from tests.mcp_servers.tools import build_server

if __name__ == "__main__":
    pidfile = os.environ.get("PERCH_TEST_PIDFILE")
    if pidfile:
        Path(pidfile).write_text(str(os.getpid()))
    sys.stderr.write(os.environ.get("PERCH_TEST_STDERR", ""))
    for n in range(int(os.environ.get("PERCH_TEST_STDERR_LINES", "0"))):
        sys.stderr.write(f"noise line {n}\n")
    sys.stderr.flush()
    build_server(sys.argv[1] if len(sys.argv) > 1 else "demo").run("stdio")
    while os.environ.get("PERCH_TEST_IGNORE_EOF"):
        time.sleep(3600)
