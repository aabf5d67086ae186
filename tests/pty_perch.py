"""`perch run` on a pseudo-terminal, as a person at a terminal runs it.

`PtyPerch.start(config, env)` starts the daemon with stdin and stdout on a pty (stderr stays a
pipe for the test); `say` types a line, `expect` waits for text to appear on the screen,
`screen` is what the terminal shows (`tests.terminal_view`), `finish` ends input with Ctrl-D
and waits for the exit code and stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import sys
import termios
from pathlib import Path

from tests.terminal_view import TerminalView


class PtyPerch:
    def __init__(self, proc: asyncio.subprocess.Process, master: int) -> None:
        self.proc = proc
        self.master = master
        self.raw = ""
        self.view = TerminalView()
        self._changed = asyncio.Event()
        asyncio.get_running_loop().add_reader(master, self._read)

    @classmethod
    async def start(cls, config: Path, env: dict[str, str] | None = None) -> PtyPerch:
        master, slave = pty.openpty()
        attrs = termios.tcgetattr(slave)
        attrs[6][termios.VINTR] = b"\x03"
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.operator.cli", "run", "--config", str(config),
            stdin=slave, stdout=slave, stderr=asyncio.subprocess.PIPE,
            env=env if env is not None else dict(os.environ), cwd=config.parent,
            start_new_session=True, preexec_fn=_controlling_terminal,
        )  # fmt: skip
        os.close(slave)
        return cls(proc, master)

    def _read(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.master)
        text = data.decode("utf-8", "replace")
        self.raw += text
        self.view.feed(text)
        self._changed.set()

    def screen(self) -> list[str]:
        return self.view.rows()

    async def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    async def say(self, text: str) -> None:
        await self.type(text + "\r")

    async def expect(self, fragment: str, timeout: float = 20) -> None:
        """Wait until `fragment` is in what was printed (escape sequences and all)."""
        await self.until(lambda: fragment in self.raw, timeout, fragment)

    async def until(self, condition: object, timeout: float = 20, what: object = "") -> None:
        async def wait() -> None:
            while not condition():  # type: ignore[operator]
                self._changed.clear()
                if self.proc.returncode is not None:
                    raise AssertionError(f"perch exited before {what!r}: {self.screen()}")
                await asyncio.wait_for(self._changed.wait(), timeout)

        try:
            await asyncio.wait_for(wait(), timeout)
        except TimeoutError:
            raise AssertionError(f"never saw {what!r}; screen: {self.screen()}") from None

    async def finish(self, timeout: float = 30) -> tuple[int, str]:
        """Ctrl-D on an empty line (the only channel: the daemon stops); exit code, stderr."""
        if self.proc.returncode is None:
            await self.type("\x15\x04")
        _, err = await asyncio.wait_for(self.proc.communicate(), timeout)
        self._drain()
        self.close()
        assert self.proc.returncode is not None
        return self.proc.returncode, err.decode()

    def _drain(self) -> None:
        """Read what the exited process left in the terminal."""
        os.set_blocking(self.master, False)
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EAGAIN, or EIO once every writer is gone
                return
            if not data:
                return
            text = data.decode("utf-8", "replace")
            self.raw += text
            self.view.feed(text)

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.master)
        with contextlib.suppress(OSError):
            os.close(self.master)


def _controlling_terminal() -> None:
    """Make stdin (the pty) the session's controlling terminal, so Ctrl-C sends SIGINT."""
    import fcntl

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
