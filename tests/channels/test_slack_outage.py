"""A Slack Socket Mode connection cut without a close frame is noticed and replaced quickly.

slack-bolt against the fake Slack. The ping interval is left at 10 s where the test is about
a dropped TCP connection: the reconnect must not wait for the next ping. The bounded waits
are the only timing the tests assert.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from channels.base import ChatRef, Outbound
from channels.slack.adapter import SlackDeliveryError
from tests.channels.test_slack import message, running
from tests.fakes.slack import TEAM_ID, FakeSlack
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(20)

SLOW_PING = 10.0  # Bolt's default: what a cut connection used to wait for
NOTICED_WITHIN = 4.0  # "a few seconds": the bound on seeing the second connection


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    server = FakeSlack()
    await server.start()
    yield server
    await server.stop()


@pytest.mark.parametrize("reset", [True, False], ids=["tcp-reset", "tcp-fin"])
async def test_a_socket_dropped_without_a_close_frame_is_replaced_before_the_next_ping(
    fake: FakeSlack, reset: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="channels.slack")
    async with running(fake, ping_interval=SLOW_PING) as (channel, inbox):
        await fake.wait_connections(1)
        await fake.drop_socket(clean=False, reset=reset)
        await fake.wait_connections(2, timeout=NOTICED_WITHIN)
        await fake.push_event(message(fake, "still there?"))
        assert (await inbox.get()).text == "still there?"
        await eventually(lambda: channel.status().up)

    downs = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in downs] == [
        "slack is down: socket mode connection lost; reconnecting"
    ]
    assert all(r.exc_info is None for r in caplog.records)


async def test_a_socket_that_goes_silent_is_replaced_once_a_pong_is_missing(
    fake: FakeSlack,
) -> None:
    async with running(fake, ping_interval=0.5) as (channel, inbox):
        await fake.wait_connections(1)
        fake.stall_socket()  # no FIN, no reset: only the missing pong tells
        await fake.wait_connections(2, timeout=NOTICED_WITHIN)
        await fake.push_event(message(fake, "back"))
        assert (await inbox.get()).text == "back"
        await eventually(lambda: channel.status().up)


async def test_a_cut_while_slack_is_unreachable_keeps_retrying_until_it_returns(
    fake: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="channels.slack")
    async with running(fake, ping_interval=SLOW_PING) as (channel, inbox):
        await fake.wait_connections(1)
        for _ in range(3):  # the SDK's own two retries, then ours with backoff
            fake.fail_next(
                "apps.connections.open", 503, retry_after=None, error="service_unavailable"
            )
        await fake.drop_socket(clean=False)
        await fake.wait_connections(2, timeout=NOTICED_WITHIN + 2)
        await fake.push_event(message(fake, "recovered"))
        assert (await inbox.get()).text == "recovered"
        await eventually(lambda: channel.status().up)
    assert all(r.exc_info is None for r in caplog.records)
    assert all("\n" not in r.getMessage() for r in caplog.records)


async def test_a_502_page_on_send_says_slack_is_failing_for_now_in_one_line_each(
    fake: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    page = "<html><body><h1>502 Bad Gateway</h1>\n<p>upstream</p></body></html>"
    async with running(fake) as (channel, _inbox):
        caplog.set_level(logging.DEBUG, logger="channels.slack")
        for _ in range(3):  # the first try and the SDK's two retries of a server error
            fake.fail_next("chat.postMessage", 502, retry_after=None, page=page)
        with pytest.raises(SlackDeliveryError) as raised:
            await channel.send(Outbound(ChatRef("slack", TEAM_ID, "dm", "D100"), "hello"))
    assert str(raised.value) == (
        "Slack chat.postMessage to D100 failed: Slack is failing for now "
        "(HTTP 502, still after retries); try again later"
    )
    assert all(r.exc_info is None for r in caplog.records)
    assert not any("<html" in r.getMessage() for r in caplog.records)
