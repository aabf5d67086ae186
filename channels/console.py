"""The local terminal channel: lines typed on stdin become DMs from the owner.

Every line is one `Inbound` in the DM `console:local:dm:<user>`; replies are printed to
stdout, streamed as they are written when the terminal allows it. End of input (Ctrl-D, or
stdin closed) calls `on_eof` so the daemon can decide whether to stop. Reading uses a pipe
reader where stdin supports it and a background thread otherwise (files, /dev/null).

When `interactive` (default: stdin is a terminal) it prints a one-line hint at start (type,
/help, Ctrl-D) and shows `… thinking` while a turn runs (the `typing` indicator), or
`… running <tool>` while the agent uses a tool, erased before the reply is printed. Logs
never go to stdout; `perch run` keeps them off the terminal while the console is on (see
`bot/logs.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import TextIO

from channels.base import (
    Channel,
    ChannelStatus,
    ChatRef,
    Inbound,
    InboundHandler,
    Outbound,
    ReplyStream,
)
from channels.options import ChannelOptions
from channels.plugin import Capabilities, ChannelContext, ChannelPlugin

PREFIX = "perch> "
HINT = "Type a message and press Enter to talk to Perch; /help lists commands; Ctrl-D quits.\n"
THINKING = "… thinking"


class ConsoleOptions(ChannelOptions):
    """`channels.console`: on by default; `user` is the owner's name in the session key."""

    enabled: bool = True
    user: str = "owner"

    def owner_ids(self) -> tuple[str, ...]:
        return (self.user,)


class ConsoleChannel:
    name = "console"

    def __init__(
        self,
        user: str = "owner",
        *,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        on_eof: Callable[[], None] | None = None,
        interactive: bool | None = None,
    ) -> None:
        self.user = user
        self._stdin = stdin or sys.stdin
        self._stdout = stdout or sys.stdout
        if interactive is None:
            isatty = getattr(self._stdin, "isatty", None)
            interactive = bool(isatty and isatty())
        self.interactive = interactive
        self._indicator = False  # "… thinking" is on the current line
        self._on_eof = on_eof
        self._task: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)
        self._up = False
        self.chat = ChatRef("console", "local", "dm", user)

    @property
    def account(self) -> str:
        return self.chat.account

    async def start(self, on_message: InboundHandler) -> None:
        self._up = True
        if self.interactive:
            self._write(HINT)
        self._task = asyncio.create_task(self._read_loop(on_message), name="console-reader")

    async def stop(self) -> None:
        self._up = False
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    def status(self) -> ChannelStatus:
        return ChannelStatus(self.name, self._up, "reading stdin" if self._up else "closed")

    async def send(self, out: Outbound) -> None:
        self._write(PREFIX + out.text.strip() + "\n")

    @contextlib.asynccontextmanager
    async def typing(self, chat: ChatRef) -> AsyncIterator[None]:
        if not self._indicator:
            self._show_indicator(THINKING)
        try:
            yield
        finally:
            self._clear_indicator()

    def reply_stream(self, chat: ChatRef) -> ReplyStream:
        return _ConsoleStream(self._write, self._show_indicator)

    def _show_indicator(self, text: str) -> None:
        if not self.interactive:
            return
        self._clear_indicator()
        self._stdout.write(text)
        self._stdout.flush()
        self._indicator = True

    def _clear_indicator(self) -> None:
        if self._indicator:
            self._indicator = False
            self._stdout.write("\r\033[K")  # back to the line start, erase it
            self._stdout.flush()

    def _write(self, text: str) -> None:
        self._clear_indicator()
        self._stdout.write(text)
        self._stdout.flush()

    async def _read_loop(self, on_message: InboundHandler) -> None:
        # Ids must never repeat across restarts (the inbox dedupes on them).
        stamp = f"{time.time_ns():x}"
        async for line in _lines(self._stdin):
            text = line.rstrip("\r\n")
            if not text.strip():
                continue
            inbound = Inbound(
                chat=self.chat,
                sender_id=self.user,
                sender_name=self.user,
                text=text,
                message_id=f"{stamp}-{next(self._ids)}",
                mentioned=True,
            )
            try:
                await on_message(inbound)
            except Exception as exc:  # never let one message end the console
                self._write(f"[console] could not handle that message: {exc}\n")
        self._up = False
        if self._on_eof is not None:
            self._on_eof()


class _ConsoleStream:
    """Prints the reply as it grows; if the final text differs, prints it whole."""

    interval = 0.1  # a terminal shows every update; the daemon cleans ten times a second

    def __init__(self, write: Callable[[str], None], indicate: Callable[[str], None]) -> None:
        self._write = write
        self._indicate = indicate
        self._shown = ""

    async def tool(self, name: str) -> None:
        if not self._shown:  # mid-line text is never overwritten
            self._indicate(f"… running {name}")

    async def update(self, text: str) -> None:
        if not self._shown:
            if not text.strip():
                return
            self._write(PREFIX)
        if text.startswith(self._shown):
            self._write(text[len(self._shown) :])
            self._shown = text

    async def finish(self, text: str) -> None:
        text = text.strip()
        if self._shown and not text:
            self._write("\n")  # printed text cannot be taken back
        elif self._shown and text.startswith(self._shown.strip()):
            self._write(text[len(self._shown.strip()) :] + "\n")
        elif self._shown:
            self._write("\n" + PREFIX + text + "\n")
        elif text:
            self._write(PREFIX + text + "\n")

    async def abort(self) -> None:
        if self._shown:
            self._write("\n")


async def _lines(stream: TextIO) -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    try:
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stream)
    except (ValueError, OSError, AttributeError, NotImplementedError):
        async for line in _thread_lines(stream):
            yield line
        return
    while True:
        raw = await reader.readline()
        if not raw:
            return
        yield raw.decode("utf-8", errors="replace")


async def _thread_lines(stream: TextIO) -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def pump() -> None:
        try:
            for line in stream:
                loop.call_soon_threadsafe(queue.put_nowait, line)
        except Exception:
            pass
        finally:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=pump, name="console-stdin", daemon=True).start()
    while (line := await queue.get()) is not None:
        yield line


def create(options: ChannelOptions, context: ChannelContext) -> Channel:
    """The console; end of input stops the daemon only when no other channel is enabled."""
    assert isinstance(options, ConsoleOptions)
    return ConsoleChannel(options.user, on_eof=None if context.others else context.request_stop)


PLUGIN = ChannelPlugin(
    key="console",
    options=ConsoleOptions,
    create=create,
    capabilities=Capabilities(
        can_edit=False,
        can_type=False,
        max_len=1_000_000,
        chat_hint="You are replying in a terminal. Plain text and light Markdown read best.",
    ),
)
