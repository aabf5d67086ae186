"""Steps 2 and 5 of the sanitizer: tool calls downgraded to text and echoed system messages.

- `[Tool Call: x]` takes the argument lines after it (JSON, indented lines, `Arguments:`).
- `[Tool Result ...]` takes its own payload only: a JSON value that follows it (brackets
  balanced, strings respected) or, for a plain-text payload, the lines up to the next blank
  line. Prose after the payload stays.
- `[Historical context: ...]` takes its line; `[System Message]` takes the lines up to the
  next blank line.
Markers count only at the start of a line; a marker mentioned mid-sentence stays.
"""

from __future__ import annotations

import re

from agents.sanitize.regions import outside_code

_DOWNGRADED_MARKER = re.compile(
    r"\[(?:tool call:|tool result\b|historical context:)", re.IGNORECASE
)
_ARGUMENT_LABEL = re.compile(r"(?:arguments|args|input|output|result)\s*:", re.IGNORECASE)
_CLOSERS = {"{": "}", "[": "]"}


def _skip_json_payload(lines: list[str], index: int) -> int:
    """The index of the first line after the JSON value that starts on `lines[index]`.

    Brackets are balanced outside strings; an unbalanced value runs to the end. Prose on the
    value's last line, after it, stays (written back into `lines`).
    """
    stack: list[str] = []
    in_string = escaped = False
    for row in range(index, len(lines)):
        line = lines[row]
        for col, char in enumerate(line):
            if in_string:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char in _CLOSERS:
                stack.append(_CLOSERS[char])
            elif stack and char == stack[-1]:
                stack.pop()
                if not stack:
                    rest = line[col + 1 :].lstrip()
                    if rest:
                        lines[row] = rest
                        return row
                    return row + 1
    return len(lines)


def strip_downgraded_prose(text: str) -> str:
    if "[" not in text:
        return text
    lines = text.split("\n")
    kept: list[str] = []
    mode = ""  # "" keeping, "call" skipping arguments, "result" skipping output, "gap" blanks
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        index += 1
        if _DOWNGRADED_MARKER.match(stripped):
            mode = "result" if stripped[1:12].lower() == "tool result" else "call"
            if mode == "result" and index < len(lines) and lines[index].lstrip()[:1] in ("{", "["):
                index = _skip_json_payload(lines, index)
                mode = "gap"
            continue
        if mode == "result":
            if stripped:
                continue
            mode = "gap"
            continue
        if mode == "call" and (
            not stripped
            or stripped[0] in '{}[]"'
            or line[:1] in (" ", "\t")
            or _ARGUMENT_LABEL.match(stripped)
        ):
            continue
        if mode == "gap" and not stripped:
            continue
        mode = ""
        kept.append(line)
    return "\n".join(kept)


def strip_downgraded_tool_call_text(text: str) -> str:
    """Remove `[Tool Call: ...]`, `[Tool Result ...]`, `[Historical context: ...]` blocks."""
    if "[" not in text or not _DOWNGRADED_MARKER.search(text):
        return text
    return outside_code(text, strip_downgraded_prose)


_SYSTEM_MESSAGE_MARKER = re.compile(r"\[\s?system\s+message\s?\]", re.IGNORECASE)


def strip_system_messages_prose(text: str) -> str:
    if "[" not in text:
        return text
    kept: list[str] = []
    skipping = False
    for line in text.split("\n"):
        if _SYSTEM_MESSAGE_MARKER.match(line.strip()):
            skipping = True
            continue
        if skipping:
            skipping = bool(line.strip())
            continue
        kept.append(line)
    return "\n".join(kept)


def strip_echoed_system_messages(text: str) -> str:
    """Remove `[System Message]` blocks (up to the next blank line) the model echoed."""
    if "[" not in text or not _SYSTEM_MESSAGE_MARKER.search(text):
        return text
    return outside_code(text, strip_system_messages_prose)
