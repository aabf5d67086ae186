"""The CLI's own output through the one redactor: what `perch status`, `doctor`, `store`,
`cron` ... print never shows a password, whatever the daemon or the config said.

`redact_output()` replaces `sys.stdout` and `sys.stderr` with `RedactingStream`s that run
`bot.config.redact.Redactor` over each write (a printed line is one write). `perch run`,
`chat` and `onboard` talk with a person on the terminal and keep the real streams: their log
lines are redacted by the log's own filter.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TextIO

from bot.config.redact import Redactor


class RedactingStream:
    """A text stream that redacts what is written to it, then passes it on."""

    def __init__(self, inner: TextIO, redact: Redactor) -> None:
        self.inner = inner
        self.redact = redact

    def write(self, text: str) -> int:
        self.inner.write(self.redact(text))
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:
        return self.inner.encoding

    def __getattr__(self, name: str) -> object:  # what else a stream has (errors, ...)
        return getattr(self.inner, name)


def redact_output(secrets: Iterable[str] = ()) -> Redactor:
    """Route this process's stdout and stderr through one redactor (returned, so secrets
    learnt later, from the config, can be added to it)."""
    redact = Redactor(secrets)
    if not isinstance(sys.stdout, RedactingStream):
        sys.stdout = RedactingStream(sys.stdout, redact)
    if not isinstance(sys.stderr, RedactingStream):
        sys.stderr = RedactingStream(sys.stderr, redact)
    return redact
