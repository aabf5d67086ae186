"""Shell command lines as words, and the command patterns of `agent.exec.ask` / `.allow`.

`simple_commands(line)` reads a `/bin/sh -c` line the way the approval rules need it: every
simple command it would run, as words (quotes removed), through `;`, `&&`, `||`, `|`, `&`,
newlines, subshells, `$(...)` and backticks, `sh -c '...'`, `eval ...` (a shell that reads a
script file or stdin, and `source`, make the line unreadable), the commands that run
another (`env`, `sudo`, `xargs`, `nice`, `timeout`, `nohup`, ...: every word after them is
also tried as the start of a command) and `find -exec ... ;`. It returns None for a line it
cannot read (an unclosed quote): the caller asks then.

A `CommandPattern` is shell words too: the program (a glob on the program's base name), then
argument globs. How it matches depends on the list it is in, and the rule is the same for
every program:
- in `ask` a pattern matches when **each** of its argument globs matches some word of the
  command (`rm` asks for any `rm`; `find -delete` for a `find` with `-delete`);
- in `allow` a pattern matches when **every** word of the command matches one of its
  globs (`rm -* inbox/*` allows `rm -f inbox/a` but not `rm inbox/a notes.md`).
Paths are normalised before matching (`inbox/../x` is `x`); a word with a shell expansion
(`$`, a backtick, `{`, `~`) is matched by no allow glob, since what it becomes is unknown.
Matching is decided on what the shell would see, never on substrings: `echo rm` is no `rm`.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

# Characters that end one simple command when they stand outside quotes.
_SEPARATOR_CHARS = set(";&|()\n")
# Words that open a compound command or negate one: the command starts after them.
_KEYWORDS = {"{", "}", "!", "if", "then", "else", "elif", "fi", "do", "done", "while", "until"}
# Programs that run the command their later words name.
_WRAPPERS = {
    "env", "sudo", "doas", "command", "builtin", "exec", "nice", "nohup", "time", "timeout",
    "xargs", "stdbuf", "ionice", "setsid", "chronic", "busybox", "chroot", "unbuffer", "flock",
    "watch", "strace", "ltrace", "runuser", "su", "taskset", "chrt", "systemd-run", "fakeroot",
}  # fmt: skip
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "fish"}
_EXPANSION = set("$`{~")
_HIDDEN_PROGRAM = _EXPANSION | set("*?[")
_FROM_INPUT = "${words from input}"  # what xargs appends: unknown, so never allowed
_MAX_DEPTH = 8  # nested sh -c / $(...) deeper than this: unreadable, so asked


def simple_commands(line: str) -> list[list[str]] | None:
    """Every simple command `line` would run, as words; None if it cannot be read."""
    found: list[list[str]] = []
    return found if _collect(line, found, 0) else None


def _collect(line: str, found: list[list[str]], depth: int) -> bool:
    if depth > _MAX_DEPTH:
        return False
    segments = _segments(line)
    if segments is None:
        return False
    for inner in _substitutions(line):  # wherever they stand, quoted or not: asking more is safe
        if not _collect(inner, found, depth + 1):
            return False
    for segment in segments:
        try:
            words = shlex.split(segment, comments=False, posix=True)
        except ValueError:
            return False
        while words and words[0] in _KEYWORDS:
            words = words[1:]
        if words and not _add(words, found, depth):
            return False
    return True


def _segments(line: str) -> list[str] | None:
    """`line` cut at its unquoted separators (`;`, `&`, `|`, `(`, `)`, newline); None if a
    quote is left open. A redirection stays a word of its command (`2>/dev/null`)."""
    segments: list[str] = []
    current: list[str] = []
    quote = ""
    escaped = False
    for char in line:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\" and quote != "'":
            current.append(char)
            escaped = True
        elif quote:
            current.append(char)
            if char == quote:
                quote = ""
        elif char in "'\"":
            current.append(char)
            quote = char
        elif char in _SEPARATOR_CHARS:
            segments.append("".join(current))
            current = []
        else:
            current.append(char)
    if quote or escaped:
        return None
    segments.append("".join(current))
    return [s for s in segments if s.strip()]


def _substitutions(word: str) -> list[str]:
    """The bodies of `$(...)`, `<(...)`, `>(...)` and backtick substitutions in a line."""
    bodies: list[str] = []
    i = 0
    while i < len(word):
        if word[i : i + 2] in ("$(", "<(", ">("):
            depth, j = 1, i + 2
            while j < len(word) and depth:
                depth += {"(": 1, ")": -1}.get(word[j], 0)
                j += 1
            bodies.append(word[i + 2 : j - 1] if depth == 0 else word[i + 2 :])
            i = j
        elif word[i] == "`":
            end = word.find("`", i + 1)
            bodies.append(word[i + 1 :] if end < 0 else word[i + 1 : end])
            i = len(word) if end < 0 else end + 1
        else:
            i += 1
    return bodies


def _add(words: list[str], found: list[list[str]], depth: int) -> bool:
    while words and "=" in words[0] and not words[0].startswith("="):  # VAR=value cmd
        name = words[0].split("=", 1)[0]
        if not name.replace("_", "a").isalnum():
            break
        words = words[1:]
    if not words:
        return True
    found.append(words)
    program = program_name(words[0])
    if program in ("source", "."):
        return False  # runs a file this reader cannot see
    if program in _SHELLS or program == "eval":
        script = _shell_script(words) if program in _SHELLS else " ".join(words[1:])
        if script is None or not _collect(script, found, depth + 1):
            return False  # a shell reading a script file or stdin: unseen, so unreadable
    if program in _WRAPPERS:  # any later word may be the command it runs
        fed = [_FROM_INPUT] if program == "xargs" else []  # xargs adds words from its input
        for start in range(1, len(words)):
            if not _add([*words[start:], *fed], found, depth + 1):
                return False
    if program == "find":
        for start, word in enumerate(words):
            if word in ("-exec", "-execdir", "-ok", "-okdir") and start + 1 < len(words):
                rest = words[start + 1 :]
                end = next((i for i, w in enumerate(rest) if w in (";", "\\;", "+")), len(rest))
                if rest[:end] and not _add(rest[:end], found, depth + 1):
                    return False
    return True


def _shell_script(words: list[str]) -> str | None:
    """The script of `sh -c SCRIPT` (None when the shell reads a file or stdin)."""
    for i, word in enumerate(words[1:], 1):
        if word.startswith("-") and "c" in word[1:] and not word.startswith("--"):
            return words[i + 1] if i + 1 < len(words) else ""
    return None


def program_name(word: str) -> str:
    """What a command word runs, by base name (`/usr/bin/rm` and `\\rm` are `rm`)."""
    return posixpath.basename(word.lstrip("\\"))


def normalise_word(word: str) -> str:
    """A path-like word with `.` and `..` resolved (`./inbox/../x` -> `x`); others as given."""
    if "/" not in word and word not in (".", ".."):
        return word
    normal = posixpath.normpath(word)
    return normal + "/" if word.endswith("/") and normal != "/" else normal


@dataclass(frozen=True, slots=True)
class CommandPattern:
    """One entry of `agent.exec.ask` or `.allow` (see the module docstring)."""

    program: str
    arguments: tuple[str, ...]
    text: str

    @classmethod
    def parse(cls, text: str) -> CommandPattern:
        """Read a pattern; ValueError saying why it cannot be one."""
        try:
            words = shlex.split(text)
        except ValueError as exc:
            raise ValueError(f"command pattern {text!r}: {exc}") from None
        if not words:
            raise ValueError("a command pattern cannot be empty")
        return cls(words[0], tuple(normalise_word(w) for w in words[1:]), text)

    def _program_matches(self, words: Sequence[str]) -> bool:
        return fnmatchcase(program_name(words[0]), self.program)

    def asks(self, words: Sequence[str]) -> bool:
        """Each argument glob matches some word of the command (any program args if none)."""
        if not words or not self._program_matches(words):
            return False
        args = [normalise_word(w) for w in words[1:]]
        return all(any(fnmatchcase(a, glob) for a in args) for glob in self.arguments)

    def allows(self, words: Sequence[str]) -> bool:
        """Every word of the command matches one of the argument globs (any if none)."""
        if not words or not self._program_matches(words):
            return False
        if not self.arguments:
            return True
        operands_only = False  # after `--`, every word is a file, even `-rf`
        for word in words[1:]:
            if word == "--" and not operands_only:
                operands_only = True
                continue
            normal = normalise_word(word)
            operand = operands_only or normal != word or not word.startswith("-") or word == "-"
            globs = [g for g in self.arguments if not (operand and g.startswith("-"))]
            if _EXPANSION & set(word) or not any(fnmatchcase(normal, g) for g in globs):
                return False
        return True


def command_needs_asking(
    line: str, ask: Iterable[CommandPattern], allow: Iterable[CommandPattern], *, ask_all: bool
) -> bool:
    """Whether running `line` needs an approval: some command it runs matches an `ask`
    pattern (every command, with `ask_all`) and no `allow` pattern; an unreadable line is
    asked about whenever there is anything to ask about."""
    ask, allow = tuple(ask), tuple(allow)
    commands = simple_commands(line)
    if commands is None:
        return ask_all or bool(ask)
    for words in commands:
        if any(p.allows(words) for p in allow):
            continue
        if ask_all or any(p.asks(words) for p in ask):
            return True
        if ask and set(words[0]) & _HIDDEN_PROGRAM:  # `$(echo rm)`, `/bin/r?`: unknown program
            return True
    return False
