"""Previews that pay: a reply done within `gateway.preview_after` (1 s) is sent once, with no
streamed preview (a preview costs a message and an edit: twice the platform calls its pace
allows); a reply still being written after that shows its preview as before."""

from __future__ import annotations

import math
from pathlib import Path

from bot.kernel.delivery import Preview
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon

OPEN_DMS = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}


class Recorder:
    """A reply stream that records what a preview hands it."""

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self.updates: list[str] = []

    async def update(self, text: str) -> None:
        self.updates.append(text)

    async def finish(self, text: str) -> None:
        self.updates.append(f"final: {text}")

    async def abort(self) -> None:
        return None


async def test_nothing_is_previewed_before_it_is_due() -> None:
    now = [100.0]
    stream = Recorder()
    preview = Preview(stream, clock=lambda: now[0], first_after=1.0)
    await preview.feed("Hello")
    now[0] = 100.4
    await preview.feed(", Ada")
    await preview.call_ended("Hello, Ada")  # done in 0.4 s: the final reply says it all
    assert stream.updates == []
    preview.close()


async def test_a_reply_still_being_written_when_due_is_previewed() -> None:
    now = [100.0]
    stream = Recorder()
    preview = Preview(stream, clock=lambda: now[0], first_after=1.0)
    await preview.feed("Hello")
    now[0] = 101.2
    await preview.feed(", Ada")
    assert stream.updates == ["Hello, Ada"]
    await preview.call_ended("Hello, Ada, and more")
    assert stream.updates[-1] == "Hello, Ada, and more"
    preview.close()


async def test_a_stream_without_previews_stays_without() -> None:
    stream = Recorder(interval=math.inf)
    preview = Preview(stream, first_after=1.0)
    await preview.feed("Hello")
    await preview.call_ended("Hello")
    assert stream.updates == [] and not preview.enabled


async def test_a_quick_reply_through_the_daemon_is_one_message_and_no_preview(
    tmp_path: Path,
) -> None:
    async with FakeAnthropic() as fake:
        chan = MemoryChannel("telegram")
        # (5 s, not the shipped 1 s, and a first turn to load the SDK: a busy machine is slow)
        settings = {**OPEN_DMS, "gateway.preview_after": "5s"}
        async with running_daemon(tmp_path, fake, {"telegram": chan}, settings):
            await chan.say("first")
            await chan.wait_sent(1, timeout=30)
            shown = len(chan.previews)
            fake.queue(Reply.text("Hello there, Ada, how are you today?", chunk=3))
            await chan.say("hi")
            await chan.wait_sent(2, timeout=30)
    assert chan.previews[shown:] == []
    assert chan.texts()[1] == "Hello there, Ada, how are you today?"
