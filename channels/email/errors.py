"""A mail server's error in one line for the log, the status and `perch doctor`: the error's
type and its words, whitespace folded, cut at 200 characters (never a password: the IMAP and
SMTP clients do not put one in their errors)."""

from __future__ import annotations


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:200] if text else type(exc).__name__
