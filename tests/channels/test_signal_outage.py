"""Signal outages read well in the log: one short line per failure, hints for a temporary 5xx.

The channel against the fake signal-cli-rest-api answering 503s (with an HTML page, as a
proxy in front of a restarting container does).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from channels.base import ChatRef, Outbound
from channels.signal.adapter import SignalApiError, SignalChannel, SignalOptions
from tests.fakes.signal import FakeSignal
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(20)

ALICE = "+15550001111"
UNAVAILABLE_PAGE = (
    "<html>\n<head><title>503 Service Temporarily Unavailable</title></head>\n<body>\n"
    "<center><h1>503 Service Temporarily Unavailable</h1></center>\n</body>\n</html>\n"
)


def make_channel(fake: FakeSignal, **overrides: object) -> SignalChannel:
    settings: dict[str, object] = {
        "typing_interval": 0.05,
        "reconnect_initial": 0.05,
        "reconnect_max": 0.2,
        "retry_initial": 0.01,
    }
    settings.update(overrides)
    options = SignalOptions(number=fake.number, service_url=fake.url, **settings)  # type: ignore[arg-type]
    return SignalChannel(options)


@pytest.fixture
async def fake() -> AsyncIterator[FakeSignal]:
    async with FakeSignal() as server:
        yield server


async def ignore(_: object) -> None:
    return None


def warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


def assert_concise(records: list[logging.LogRecord]) -> None:
    for record in records:
        text = record.getMessage()
        assert record.exc_info is None and record.exc_text is None, text
        assert "\n" not in text and "<html" not in text.lower(), text


async def test_a_503_at_start_says_the_service_is_failing_for_now_in_one_line(
    fake: FakeSignal, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.fail_next("/v1/about", 503, times=3, body=UNAVAILABLE_PAGE)
    channel = make_channel(fake)
    await channel.start(ignore)
    try:
        await fake.wait_connected()
        await eventually(lambda: channel.status().up)
    finally:
        await channel.stop()

    lines = warnings(caplog)
    assert_concise(lines)
    (down,) = lines  # three failures in a row, one line: the status did not change
    text = down.getMessage()
    assert text.startswith(f"signal channel down: signal-cli-rest-api at {fake.url}")
    assert "is failing for now (HTTP 503 on /v1/about)" in text
    assert "retrying in" in text
    assert "service_url" not in text


async def test_a_503_on_the_receive_socket_is_temporary_not_an_unregistered_number(
    fake: FakeSignal, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.fail_next("/v1/receive", 503, times=2, body=UNAVAILABLE_PAGE)
    channel = make_channel(fake)
    await channel.start(ignore)
    try:
        await fake.wait_connected()
    finally:
        await channel.stop()
    lines = warnings(caplog)
    assert_concise(lines)
    (down,) = lines
    assert f"is failing for now (HTTP 503 on /v1/receive/{fake.number})" in down.getMessage()
    assert "registered" not in down.getMessage()


async def test_a_503_page_on_send_logs_one_short_line_per_retry_and_delivers(
    fake: FakeSignal, caplog: pytest.LogCaptureFixture
) -> None:
    channel = make_channel(fake)
    await channel.start(ignore)
    try:
        await fake.wait_connected()
        caplog.set_level(logging.DEBUG)
        fake.fail_next("/v2/send", 503, times=2, body=UNAVAILABLE_PAGE)
        await channel.send(Outbound(ChatRef("signal", fake.number, "dm", ALICE), "hello"))
    finally:
        await channel.stop()
    lines = warnings(caplog)
    assert_concise(lines)
    assert [r.getMessage().split(" in ")[0] for r in lines] == [
        f"Signal message to {ALICE} not sent (HTTP 503: Service Unavailable); retry {n}/4"
        for n in (1, 2)
    ]
    assert len(fake.sent) == 1


async def test_a_503_that_outlasts_the_retries_says_it_is_temporary(fake: FakeSignal) -> None:
    channel = make_channel(fake, send_attempts=2)
    await channel.start(ignore)
    try:
        await fake.wait_connected()
        fake.fail_next("/v2/send", 503, times=2, body=UNAVAILABLE_PAGE)
        with pytest.raises(SignalApiError) as raised:
            await channel.send(Outbound(ChatRef("signal", fake.number, "dm", ALICE), "hello"))
    finally:
        await channel.stop()
    message = str(raised.value)
    assert "(HTTP 503: Service Unavailable)" in message
    assert "failing for now" in message and "try again later" in message
    assert "<html" not in message
