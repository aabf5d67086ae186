"""The console channel: keys in, the conversation above a live prompt line out, EOF reported;
off (with one log line) when stdin is not a terminal."""

from __future__ import annotations

import asyncio
import io
import logging
import os
from pathlib import Path

import pytest

from channels.base import Inbound, Outbound, ShowsTools
from channels.console import HINT, PREFIX, THINKING, ConsoleChannel
from channels.terminal import PROMPT, LineEditor, Screen, fit_end
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.harness import running_daemon
from tests.terminal_view import TerminalView
from tests.waiting import eventually


class Out(io.StringIO):
    """What the console printed, and the screen it makes."""

    def view(self) -> TerminalView:
        view = TerminalView()
        view.feed(self.getvalue())
        return view


def console(**kwargs: object) -> tuple[ConsoleChannel, int, Out]:
    read_fd, write_fd = os.pipe()
    out = Out()
    channel = ConsoleChannel("ada", stdin_fd=read_fd, stdout=out, terminal=True, **kwargs)  # type: ignore[arg-type]
    return channel, write_fd, out


async def test_typed_lines_become_owner_dms_and_ctrl_d_is_end_of_input() -> None:
    eof = asyncio.Event()
    channel, keys, out = console(on_eof=eof.set)
    got: list[Inbound] = []

    async def handle(inbound: Inbound) -> None:
        got.append(inbound)

    await channel.start(handle)
    os.write(keys, b"hello thr\x7fere\r\r   \rsecond line\rdraft\x15\x04")
    await asyncio.wait_for(eof.wait(), 5)
    await channel.stop()
    assert [i.text for i in got] == ["hello there", "second line"]
    assert {i.chat.kind for i in got} == {"dm"} and got[0].chat.chat_id == "ada"
    assert got[0].message_id != got[1].message_id
    assert not channel.status().up
    rows = out.view().rows()
    assert rows[0] == HINT.strip() and f"{PROMPT}hello there" in rows


async def test_typing_during_a_reply_keeps_the_indicator_line_whole() -> None:
    channel, keys, out = console()
    seen: list[str] = []

    async def handle(inbound: Inbound) -> None:
        seen.append(inbound.text)

    await channel.start(handle)
    async with channel.typing(channel.chat):
        assert out.view().last() == f"{THINKING}  {PROMPT}"
        os.write(keys, b"next question")
        await eventually(lambda: out.view().last() == f"{THINKING}  {PROMPT}next question")
        stream = channel.reply_stream(channel.chat)
        assert isinstance(stream, ShowsTools)
        await stream.tool("web_fetch", 0.4)
        assert out.view().last() == f"… running web_fetch (40%)  {PROMPT}next question"
        await stream.update("First line\nsecond li")
        assert out.view().rows()[-2:] == ["second li", f"{THINKING}  {PROMPT}next question"]
        await stream.finish("First line\nsecond line.")
    view = out.view()
    assert view.rows()[-3:] == [f"{PREFIX}First line", "second line.", f"{PROMPT}next question"]
    os.write(keys, b"!\r")
    await eventually(lambda: seen == ["next question!"])
    await channel.stop()


async def test_a_final_text_that_differs_from_the_preview_is_printed_whole() -> None:
    channel, _, out = console()
    stream = channel.reply_stream(channel.chat)
    await stream.update("<think>hmm")
    await stream.finish("Hi")
    await channel.send(Outbound(channel.chat, "second"))
    assert [row for row in out.view().rows() if row] == [f"{PREFIX}Hi", f"{PREFIX}second"]


def test_the_live_line_keeps_its_end_within_the_width() -> None:
    out = Out()
    screen = Screen(out, lambda: 20)
    screen.begin()
    screen.show(draft="a" * 40)
    assert out.view().last() == "…" + "a" * 18
    assert fit_end("日本語のテキスト", 9) == "…テキスト"  # wide characters take two columns


def test_the_line_editor_drops_escape_sequences_and_edits_words() -> None:
    editor = LineEditor()
    assert editor.feed("ab\x1b[Dc\x1bOA d\x17e\r") == ["abc e"]
    assert editor.feed("x\x04") == [] and editor.draft == "x"
    assert editor.feed("\x15\x04") == [None]


async def test_without_a_terminal_the_console_is_off_with_one_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    read_fd, write_fd = os.pipe()
    channel = ConsoleChannel(stdin_fd=read_fd, stdout=Out())
    assert not channel.on

    async def handle(inbound: Inbound) -> None:
        raise AssertionError("nothing is read")

    with caplog.at_level(logging.INFO, logger="channels.console"):
        await channel.start(handle)
    assert [r.getMessage() for r in caplog.records if "console" in r.getMessage()] == [
        "console: stdin is not a terminal, so the console channel is off (the daemon runs on; "
        "set channels.console.enabled: false to say so in the config)"
    ]
    assert channel.status().detail == "off: stdin is not a terminal"
    await channel.stop()
    os.close(write_fd)
    os.close(read_fd)


async def test_a_turn_on_the_console_shows_its_tool_then_the_reply(tmp_path: Path) -> None:
    channel, keys, out = console()
    async with FakeAnthropic() as fake, running_daemon(tmp_path, fake, {"console": channel}):
        fake.queue(Reply.tool_use([("list_dir", {"path": "."})]), Reply.text("Two files."))
        os.write(keys, b"what is there?\r")
        await eventually(lambda: f"{PREFIX}Two files." in out.view().rows(), timeout=30)
    assert "… running list_dir" in out.getvalue()
    assert out.view().rows()[:2] == [HINT.strip(), f"{PROMPT}what is there?"]
