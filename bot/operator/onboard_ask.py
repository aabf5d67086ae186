"""How `perch onboard` asks: one question at a time, each answer checked when it is given.

`Asker.ask(question, default, secret=..., check=...)` reads a line (a secret without echo,
through `getpass`, when stdin is a terminal), takes the default on Enter, runs `check` on the
answer and asks again, saying why, while `check` names a problem. With `--yes` nothing is
asked: the default (a flag's value) is checked once and a problem stops the wizard. End of
input stops it too, with nothing written.
"""

from __future__ import annotations

import getpass
import sys
from collections.abc import Callable

Check = Callable[[str], "str | None"]  # the problem with an answer, or None


class OnboardError(Exception):
    """Stops the wizard with one line for the person running it."""


def _read_line(prompt: str) -> str:
    return input(prompt)


def _read_secret(prompt: str) -> str:
    if sys.stdin is not None and sys.stdin.isatty():
        return getpass.getpass(prompt)  # no echo; never read from another terminal
    return input(prompt)  # piped answers (scripts, tests): nothing to hide from


class Asker:
    """Asks only what the flags left open; with `interactive=False`, never asks at all."""

    def __init__(
        self,
        interactive: bool,
        read: Callable[[str], str] = _read_line,
        read_secret: Callable[[str], str] = _read_secret,
    ) -> None:
        self.interactive = interactive
        self._read = read
        self._read_secret = read_secret

    def ask(
        self, question: str, default: str = "", *, secret: bool = False, check: Check | None = None
    ) -> str:
        if not self.interactive:
            problem = check(default) if check else None
            if problem:
                raise OnboardError(problem)
            return default
        shown = ("set, Enter keeps it" if secret else default) if default else ""
        prompt = f"{question}{f' [{shown}]' if shown else ''}: "
        while True:
            try:
                answer = (self._read_secret if secret else self._read)(prompt).strip()
            except EOFError:
                raise OnboardError(
                    "input ended before the setup was complete; nothing written"
                ) from None
            value = answer or default
            problem = check(value) if check else None
            if not problem:
                return value
            print(f"  {problem}; try again.")

    def confirm(self, question: str, default: bool) -> bool:
        if not self.interactive:
            return default
        answer = self.ask(question + (" [Y/n]" if default else " [y/N]")).lower()
        return default if not answer else answer.startswith("y")


def not_empty(what: str) -> Check:
    return lambda value: None if value.strip() else f"{what} is needed"


def one_of(choices: tuple[str, ...], what: str) -> Check:
    return lambda value: None if value in choices else f"{what}: choose {' or '.join(choices)}"
