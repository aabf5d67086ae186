"""The Matrix channel when the homeserver is away or refuses it: `start()` returns with the
status saying so; an outage is retried in the background, a refused token is not."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from channels.base import Inbound
from channels.matrix.adapter import MatrixChannel
from channels.matrix.options import MatrixOptions
from tests.matrix_server import MatrixUser, SynapseServer, register, synapse_server
from tests.waiting import eventually

__all__ = ["synapse_server"]

pytestmark = pytest.mark.timeout(90)


async def _ignore(inbound: Inbound) -> None:
    return None


def _options(homeserver: str, user_id: str, token: str) -> MatrixOptions:
    return MatrixOptions(
        enabled=True,
        homeserver=homeserver,
        user_id=user_id,
        access_token=token,
        connect_timeout=1.0,
        sync_timeout=1.0,
    )


async def test_an_unreachable_homeserver_leaves_start_returning_and_the_status_down(
    tmp_path: Path,
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    channel = MatrixChannel(
        _options(f"http://127.0.0.1:{port}", "@perch:example.org", "syt_x_y"), tmp_path
    )
    await channel.start(_ignore)
    try:
        await eventually(lambda: "cannot reach" in channel.status().detail, 10)
        assert not channel.status().up
        assert "retrying" in channel.status().detail
    finally:
        await channel.stop()
    assert channel.status().detail == "stopped"


async def test_a_refused_token_stops_the_retries_and_says_what_to_fix(
    tmp_path: Path, synapse_server: SynapseServer
) -> None:
    bot: MatrixUser = register(synapse_server, "perch", "Perch")
    channel = MatrixChannel(
        _options(synapse_server.url, bot.user_id, "syt_not_a_token_at_all"), tmp_path
    )
    await channel.start(_ignore)
    try:
        await eventually(lambda: "MATRIX_ACCESS_TOKEN" in channel.status().detail, 10)
        assert not channel.status().up and "M_UNKNOWN_TOKEN" in channel.status().detail
    finally:
        await channel.stop()
