"""The console channel: stdin lines in, printed replies out, EOF reported."""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path

from channels.base import Inbound, Outbound, ShowsTools
from channels.console import HINT, PREFIX, THINKING, ConsoleChannel
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.harness import running_daemon
from tests.waiting import eventually


async def test_lines_become_owner_dms_and_eof_is_reported() -> None:
    read_fd, write_fd = os.pipe()
    stdin = os.fdopen(read_fd, "r")
    out = io.StringIO()
    eof = asyncio.Event()
    got: list[Inbound] = []
    channel = ConsoleChannel("ada", stdin=stdin, stdout=out, on_eof=eof.set)

    async def handle(inbound: Inbound) -> None:
        got.append(inbound)

    await channel.start(handle)
    os.write(write_fd, b"hello there\n\n   \nsecond line\n")
    os.close(write_fd)
    await asyncio.wait_for(eof.wait(), 5)
    await channel.stop()
    assert [i.text for i in got] == ["hello there", "second line"]
    assert {i.chat.kind for i in got} == {"dm"} and got[0].chat.chat_id == "ada"
    assert got[0].message_id != got[1].message_id
    assert not channel.status().up


async def test_streamed_reply_is_printed_once_and_completed() -> None:
    out = io.StringIO()
    channel = ConsoleChannel(stdout=out, stdin=io.StringIO(""))
    stream = channel.reply_stream(channel.chat)
    await stream.update("Hel")
    await stream.update("Hello wor")
    await stream.finish("Hello world.")
    await channel.send(Outbound(channel.chat, "second"))
    assert out.getvalue() == f"{PREFIX}Hello world.\n{PREFIX}second\n"


async def test_final_text_that_differs_from_the_preview_is_printed_whole() -> None:
    out = io.StringIO()
    channel = ConsoleChannel(stdout=out, stdin=io.StringIO(""))
    stream = channel.reply_stream(channel.chat)
    await stream.update("<think>hmm</think> Hi")
    await stream.finish("Hi")
    assert out.getvalue().endswith(f"\n{PREFIX}Hi\n")


async def test_interactive_console_hints_at_start_and_shows_thinking_until_the_reply() -> None:
    out = io.StringIO()
    channel = ConsoleChannel(stdout=out, stdin=io.StringIO(""), interactive=True)

    async def ignore(inbound: Inbound) -> None:
        return None

    await channel.start(ignore)
    await channel.stop()
    assert out.getvalue() == HINT and "/help" in HINT and "Ctrl-D" in HINT
    async with channel.typing(channel.chat):
        assert out.getvalue().endswith(THINKING)
        stream = channel.reply_stream(channel.chat)
        assert isinstance(stream, ShowsTools)
        await stream.tool("web_fetch")
        assert out.getvalue().endswith(f"{THINKING}\r\033[K… running web_fetch")
        await stream.update("Hi")
        await stream.finish("Hi there")
    erase = "\r\033[K"
    assert out.getvalue() == f"{HINT}{THINKING}{erase}… running web_fetch{erase}{PREFIX}Hi there\n"
    async with channel.typing(channel.chat):
        pass  # a silent turn: the indicator is erased, nothing else printed
    assert out.getvalue().endswith(f"{PREFIX}Hi there\n{THINKING}\r\033[K")


async def test_console_on_a_pipe_prints_no_hint_or_indicator() -> None:
    out = io.StringIO()
    channel = ConsoleChannel(stdout=out, stdin=io.StringIO(""))
    assert not channel.interactive
    async with channel.typing(channel.chat):
        await channel.send(Outbound(channel.chat, "plain"))
    assert out.getvalue() == f"{PREFIX}plain\n"


async def test_a_turn_on_the_interactive_console_shows_its_tool_then_the_reply(
    tmp_path: Path,
) -> None:
    read_fd, write_fd = os.pipe()
    out = io.StringIO()
    console = ConsoleChannel(stdin=os.fdopen(read_fd, "r"), stdout=out, interactive=True)
    async with FakeAnthropic() as fake, running_daemon(tmp_path, fake, {"console": console}) as d:
        fake.queue(Reply.tool_use([("list_dir", {"path": "."})]), Reply.text("Two files."))
        os.write(write_fd, b"what is there?\n")
        assert d.gateway is not None
        await eventually(lambda: out.getvalue().endswith("Two files.\n"), timeout=30)
        os.close(write_fd)
    shown = out.getvalue()
    assert shown.startswith(HINT)
    assert f"{THINKING}\r\033[K… running list_dir\r\033[K{PREFIX}Two files.\n" in shown
