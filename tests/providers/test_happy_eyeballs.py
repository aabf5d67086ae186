"""Happy Eyeballs on outgoing connections: a dead IPv6 path costs a fraction of a second.

The test runs this file as a program inside a network and mount namespace it makes
(`unshare`, as root): loopback only, and an /etc/hosts where `dual.perch.test` is ::1 first,
then 127.0.0.1. On ::1 each port takes no connection (a listener whose one backlog slot is
taken: further SYNs are dropped, as behind a firewall); on 127.0.0.1 the same port serves
the fake Bot API, Anthropic and OpenAI APIs. The Telegram request and both model providers,
each with a one-second connect timeout, must get their answer: without Happy Eyeballs the
IPv6 attempt alone would use up that second. Nothing leaves the namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

NAME = "dual.perch.test"
HOSTS = f"127.0.0.1 localhost\n::1 localhost ip6-localhost\n::1 {NAME}\n127.0.0.1 {NAME}\n"
ROOT = Path(__file__).resolve().parents[2]


def _namespaces_available() -> str | None:
    if os.geteuid() != 0:
        return "needs root to make a network namespace"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "needs unshare and ip (util-linux, iproute2)"
    return None


def test_a_name_with_a_dead_ipv6_path_is_reached_over_ipv4_within_a_second(
    tmp_path: Path,
) -> None:
    missing = _namespaces_available()
    if missing is not None:
        pytest.skip(missing)
    hosts = tmp_path / "hosts"
    hosts.write_text(HOSTS)
    script = (
        f"ip link set lo up && mount --bind {hosts} /etc/hosts && "
        f"exec {sys.executable} -m tests.providers.test_happy_eyeballs"
    )
    done = subprocess.run(
        ["unshare", "--net", "--mount", "--", "sh", "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["first address"] == "::1"  # the dead path is tried first
    assert seen["::1 directly"] == "no answer within 1 s"  # it is dead, not refusing
    assert seen["telegram"] == "@perch_he_bot"
    assert seen["anthropic"] == "echo: over IPv4"
    assert seen["openai"] == "echo: over IPv4"


# -- the program run inside the namespace -------------------------------------------------------


@contextlib.contextmanager
def dual_stack_port() -> Iterator[tuple[int, socket.socket]]:
    """A port whose ::1 side drops connections, and a socket bound to its 127.0.0.1 side."""
    with (
        socket.socket(socket.AF_INET6) as dead,
        socket.socket(socket.AF_INET6) as filler,
        socket.socket(socket.AF_INET) as live,
    ):
        dead.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        dead.bind(("::1", 0))
        dead.listen(0)
        port = dead.getsockname()[1]
        filler.connect(("::1", port))  # takes the one slot; never accepted
        live.bind(("127.0.0.1", port))
        yield port, live


async def probe() -> dict[str, str]:
    from telegram import Bot

    from agents.model import ModelRequest
    from agents.providers.anthropic import AnthropicClient
    from agents.providers.openai import OpenAIClient
    from channels.telegram.request import AiohttpRequest
    from tests.fakes.anthropic import FakeAnthropic
    from tests.fakes.openai import FakeOpenAI
    from tests.fakes.telegram import FakeTelegram

    seen: dict[str, str] = {}
    infos = socket.getaddrinfo(NAME, 80, type=socket.SOCK_STREAM)
    seen["first address"] = str(infos[0][4][0])
    question = ModelRequest(
        model="m",
        system=[{"type": "text", "text": "You are Perch."}],
        messages=[{"role": "user", "content": [{"type": "text", "text": "over IPv4"}]}],
    )
    with dual_stack_port() as (tg_port, tg_sock), dual_stack_port() as (a_port, a_sock):
        try:
            async with asyncio.timeout(1):
                await asyncio.open_connection("::1", tg_port)
            seen["::1 directly"] = "answered"
        except TimeoutError:
            seen["::1 directly"] = "no answer within 1 s"

        telegram = FakeTelegram(username="perch_he_bot")
        tg_sock.close()  # the fake binds 127.0.0.1:tg_port itself
        await telegram.start(tg_port)
        try:
            request = AiohttpRequest(connect_timeout=1.0)
            url = f"http://{NAME}:{tg_port}/bot"
            async with Bot(telegram.token, base_url=url, request=request) as bot:
                me = await bot.get_me()
            seen["telegram"] = f"@{me.username}"
        finally:
            await telegram.stop()

        async with FakeAnthropic(sock=a_sock):
            client = AnthropicClient("k", f"http://{NAME}:{a_port}", connect_timeout=1.0)
            try:
                answer = await client.complete(question)
            finally:
                await client.aclose()
            seen["anthropic"] = str(answer.content[0].get("text"))

    with dual_stack_port() as (o_port, o_sock):
        async with FakeOpenAI(sock=o_sock):
            other = OpenAIClient("k", f"http://{NAME}:{o_port}/v1", connect_timeout=1.0)
            try:
                answer = await other.complete(question)
            finally:
                await other.aclose()
            seen["openai"] = str(answer.content[0].get("text"))
    return seen


if __name__ == "__main__":
    print(json.dumps(asyncio.run(probe())))
