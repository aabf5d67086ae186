"""The local terminal channel: lines typed at the prompt become DMs from the owner.

Every line is one `Inbound` in the DM `console:local:dm:<user>`; replies are printed as they
are written. The console needs a terminal: when stdin is not one (a service, `</dev/null`,
a closed stdin, a pipe) it turns itself off with one log line and the daemon runs on without
it. On a terminal it takes the keys one by one (`channels.terminal`): a `you> ` prompt
with what you have typed, and above it the conversation; while a turn runs the prompt line
shows `… thinking`, or `… running <tool>` (with the tool's progress, `(40%)`, when it reports
some), and what you type meanwhile stays on that line, untouched by the reply. Ctrl-D on an
empty line (or the terminal going away) calls `on_eof`, so the daemon can decide whether to
stop. `notice` prints the daemon's own word (what a first Ctrl-C is waiting for) and
`release` gives the terminal back as it was. Logs never go to this terminal while the console
uses it (`perch run` sends them to a file).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import itertools
import logging
import os
import shutil
import sys
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
from channels.terminal import PROMPT, LineEditor, RawMode, Screen

PREFIX = "perch> "
HINT = "Type a message and press Enter to talk to Perch; /help lists commands; Ctrl-D quits.\n"
THINKING = "… thinking"
OFF = "off: stdin is not a terminal"

log = logging.getLogger(__name__)


class ConsoleOptions(ChannelOptions):
    """`channels.console`: on by default; `user` is the owner's name in the session key."""

    enabled: bool = True
    user: str = "owner"

    def owner_ids(self) -> tuple[str, ...]:
        return (self.user,)


def is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:  # closed
        return False


def _width() -> int:
    return shutil.get_terminal_size((80, 24)).columns


class ConsoleChannel:
    name = "console"

    def __init__(
        self,
        user: str = "owner",
        *,
        stdin_fd: int = 0,
        stdout: TextIO | None = None,
        on_eof: Callable[[], None] | None = None,
        terminal: bool | None = None,
        width: Callable[[], int] = _width,
    ) -> None:
        self.user = user
        self._fd = stdin_fd
        self.on = is_terminal(stdin_fd) if terminal is None else terminal
        self.screen = Screen(stdout or sys.stdout, width)
        self._editor = LineEditor()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._raw: RawMode | None = None
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._on_eof = on_eof
        self._task: asyncio.Task[None] | None = None
        self._reading = False
        self._ids = itertools.count(1)
        self._up = False
        self.chat = ChatRef("console", "local", "dm", user)

    @property
    def account(self) -> str:
        return self.chat.account

    async def start(self, on_message: InboundHandler) -> None:
        if not self.on:
            log.info(
                "console: stdin is not a terminal, so the console channel is off (the daemon "
                "runs on; set channels.console.enabled: false to say so in the config)"
            )
            return
        if is_terminal(self._fd):
            self._raw = RawMode(self._fd)
            self._raw.enter()
        self._up = True
        self.screen.show(HINT)
        self.screen.begin()
        loop = asyncio.get_running_loop()
        loop.add_reader(self._fd, self._readable)
        self._reading = True
        self._task = asyncio.create_task(self._dispatch(on_message), name="console-reader")

    async def stop(self) -> None:
        self._up = False
        self._stop_reading()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        self.release()

    def release(self) -> None:
        """Give the terminal back: live rows erased, echo and line editing restored."""
        self.screen.release()
        if self._raw is not None:
            self._raw.restore()

    def notice(self, text: str) -> None:
        """A line of the daemon's own, printed above the prompt."""
        if self._up:
            self.screen.show(text.rstrip("\n") + "\n")

    def status(self) -> ChannelStatus:
        detail = "reading the terminal" if self._up else (OFF if not self.on else "closed")
        return ChannelStatus(self.name, self._up, detail)

    async def send(self, out: Outbound) -> None:
        self.screen.show(PREFIX + out.text.strip() + "\n")

    @contextlib.asynccontextmanager
    async def typing(self, chat: ChatRef) -> AsyncIterator[None]:
        if not self.screen.status:
            self.screen.show(status=THINKING)
        try:
            yield
        finally:
            self.screen.show(status="", tail="")

    def reply_stream(self, chat: ChatRef) -> ReplyStream:
        return _ConsoleStream(self.screen)

    # -- input -------------------------------------------------------------------------------

    def _stop_reading(self) -> None:
        if self._reading:
            self._reading = False
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._fd)

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, 4096)
        except OSError:
            data = b""
        if not data:  # the terminal went away
            self._stop_reading()
            self._lines.put_nowait(None)
            return
        for line in self._editor.feed(self._decoder.decode(data)):
            if line is None:
                self._stop_reading()
            elif line.strip():
                self.screen.show(PROMPT + line + "\n", draft=self._editor.draft)
            self._lines.put_nowait(line)
            if line is None:
                return
        self.screen.show(draft=self._editor.draft)

    async def _dispatch(self, on_message: InboundHandler) -> None:
        stamp = f"{time.time_ns():x}"  # ids never repeat across restarts (the inbox dedupes)
        while (line := await self._lines.get()) is not None:
            text = line.strip()
            if not text:
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
                self.screen.show(f"[console] could not handle that message: {exc}\n")
        self._up = False
        self.screen.show(status="")
        if self._on_eof is not None:
            self._on_eof()


class _ConsoleStream:
    """Prints a reply as it grows: whole lines above, the unfinished one in the live rows."""

    interval = 0.1  # a terminal shows every update; the daemon cleans ten times a second

    def __init__(self, screen: Screen) -> None:
        self._screen = screen
        self._text = ""  # what was shown so far (PREFIX included)
        self._done = 0  # how much of it is printed for good (up to a newline)

    async def tool(self, name: str, fraction: float | None = None) -> None:
        shown = f" ({fraction:.0%})" if fraction is not None else ""
        self._screen.show(status=f"… running {name}{shown}")

    async def update(self, text: str) -> None:
        if not self._text and not text.strip():
            return
        full = PREFIX + text
        if not full.startswith(self._text[: self._done]):
            return  # the printed lines changed: the final text is printed whole at the end
        self._text = full
        cut = max(full.rfind("\n") + 1, self._done)
        self._screen.show(full[self._done : cut], status=THINKING, tail=full[cut:])
        self._done = cut

    async def finish(self, text: str) -> None:
        final = PREFIX + text.strip() if text.strip() else ""
        printed = self._text[: self._done]
        if final and final.startswith(printed):
            self._screen.show(final[self._done :] + "\n", tail="")
        elif final:
            self._screen.show(final + "\n", tail="")
        elif self._text[self._done :]:
            self._screen.show(self._text[self._done :] + "\n", tail="")  # shown stays shown
        self._text, self._done = "", 0

    async def abort(self) -> None:
        rest = self._text[self._done :]
        self._screen.show(rest + "\n" if rest else "", tail="")
        self._text, self._done = "", 0


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
