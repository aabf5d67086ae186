"""A port on 127.0.0.1 that never accepts a connection: a blackholed host, locally.

A listener with a backlog of one, whose one slot a connection of our own takes and keeps:
the kernel then drops every further SYN, so a client's connect waits until its connect
timeout, as it would for a host behind a firewall that drops packets.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


@contextlib.contextmanager
def unaccepting_port() -> Iterator[int]:
    with socket.socket() as listener, socket.socket() as filler:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        filler.connect(("127.0.0.1", port))  # takes the one slot; never accepted
        yield port
