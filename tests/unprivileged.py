"""Run a piece of Perch as an unprivileged user (`nobody`), as a service would run.

The code is imported while still root and only then are privileges dropped, so it works from a
checkout nobody else may read (a root-owned 0700 clone, as CI may make). As a non-root user
the code simply runs as that user.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOBODY = 65534

_BOOT = """
import os, sys
sys.path.insert(0, sys.argv[1])
for module in filter(None, sys.argv[2].split(",")):
    __import__(module)
import asyncio.subprocess, asyncio.unix_events, encodings.idna
if os.getuid() == 0:
    os.setgroups([])
    os.setgid({uid})
    os.setuid({uid})
code = sys.argv[3]
sys.argv = ["<unprivileged>", *sys.argv[4:]]
exec(compile(code, "<unprivileged>", "exec"))
"""


def unprivileged_uid() -> int:
    """The uid the code will run as."""
    return NOBODY if os.geteuid() == 0 else os.geteuid()


def run_unprivileged(
    code: str, *args: str, imports: tuple[str, ...], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run `code` (its `sys.argv[1:]` are `args`) with `imports` loaded first, as nobody."""
    return subprocess.run(
        [sys.executable, "-c", _BOOT.format(uid=NOBODY), str(REPO), ",".join(imports), code, *args],
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
