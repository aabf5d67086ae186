"""The output sanitizer and the silent-reply rules: what of a model's text reaches a user.

Owns the seven cleanup steps of seed 002 (`sanitize_output`), the NO_REPLY rule (`is_silent`,
`strip_silent_token`, `SilentTokenFilter` for streams) and the HEARTBEAT_OK rule
(`strip_heartbeat_ok`). Pure functions of text; nothing here logs or does I/O.

Decisions (where the seed is silent):
- Fenced code blocks (``` or ~~~, any indentation, CommonMark closing rules; an unclosed fence
  runs to the end) and inline code spans are never changed by steps 1-5, and step 6 never
  removes a fenced block. Steps 1-5 run on each stretch of prose between fences on its own.
- Tags are only treated as leaked structure when they look like it, so a reply that merely
  talks about `<think>` or <tool_call> tags survives: a thinking or tool-call block opens at
  the start of a line or when the tag is followed by a line break (tool tags also by `{`, `[`
  or `<`); it ends at its closing tag, or at the end of the prose stretch when unclosed (a
  reply cut off mid-thought). A closing tag alone on its line is dropped. `<final>` is dropped
  at the start of a line and `</final>` at the end of one.
- `sanitize_output` repeats the seven steps until nothing changes, which makes it idempotent
  (removing one tag can expose another). Every step only deletes; `MAX_SANITIZE_PASSES` (64)
  bounds the work on deliberately nested debris, the only input that could need more.
- A thinking block that contains a code fence loses its prose but keeps the fence: fences
  are never touched.
- NO_REPLY: a leading token may be wrapped in `*`, `_` or `~` (markdown emphasis) and is
  followed by a non-word character or the end; the separators after it (whitespace and
  `.,;:!?-|` and dashes) go with it. A trailing token must be preceded by a character that is
  neither a word character nor `*`/`~`; the whitespace before it goes with it. The side of
  the text without a token is returned untouched.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

SILENT_TOKEN = "NO_REPLY"
HEARTBEAT_TOKEN = "HEARTBEAT_OK"

# ---------------------------------------------------------------------------------------------
# Code fences and inline code: the parts no step may touch.

_FENCE_OPEN = re.compile(r"[ \t]*(`{3,}|~{3,})([^\n]*)")
_FENCE_CLOSE = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t\r]*")
_BACKTICK_RUN = re.compile(r"`+")


@dataclass(frozen=True, slots=True)
class _Segment:
    code: bool
    text: str


def _split_fences(text: str) -> list[_Segment]:
    """Prose and fenced-code segments; joining their texts with "\\n" gives `text` back."""
    if "```" not in text and "~~~" not in text:
        return [_Segment(False, text)]
    segments: list[_Segment] = []
    prose: list[str] = []
    code: list[str] = []
    fence: tuple[str, int] | None = None
    for line in text.split("\n"):
        if fence is None:
            opened = _FENCE_OPEN.fullmatch(line)
            if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
                if prose:
                    segments.append(_Segment(False, "\n".join(prose)))
                    prose = []
                fence = (opened.group(1)[0], len(opened.group(1)))
                code = [line]
            else:
                prose.append(line)
            continue
        code.append(line)
        closed = _FENCE_CLOSE.fullmatch(line)
        if closed and closed.group(1)[0] == fence[0] and len(closed.group(1)) >= fence[1]:
            segments.append(_Segment(True, "\n".join(code)))
            code = []
            fence = None
    if fence is not None:
        segments.append(_Segment(True, "\n".join(code)))
    elif prose:
        segments.append(_Segment(False, "\n".join(prose)))
    return segments


def _inline_code_spans(line: str) -> list[tuple[int, int]]:
    """(start, end) of each inline code span on one line (CommonMark backtick runs)."""
    runs = [(m.start(), m.end()) for m in _BACKTICK_RUN.finditer(line)]
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(runs):
        start, end = runs[i]
        width = end - start
        closer = next(
            (j for j in range(i + 1, len(runs)) if runs[j][1] - runs[j][0] == width), None
        )
        if closer is None:
            i += 1
            continue
        spans.append((start, runs[closer][1]))
        i = closer + 1
    return spans


class _Masker:
    """Swaps protected text for inert placeholders made of private-use characters."""

    def __init__(self, text: str) -> None:
        free = (chr(cp) for cp in range(0xE000, 0xF900) if chr(cp) not in text)
        self._open, self._close = next(free), next(free)
        self._pattern = re.compile(re.escape(self._open) + r"(\d+)" + re.escape(self._close))
        self._table: list[str] = []
        self._by_content: dict[str, str] = {}

    def placeholder(self, original: str, *, shared: bool) -> str:
        """A placeholder for `original`; `shared` ones are equal for equal content."""
        if shared and original in self._by_content:
            return self._by_content[original]
        token = f"{self._open}{len(self._table)}{self._close}"
        self._table.append(original)
        if shared:
            self._by_content[original] = token
        return token

    def mask_inline_code(self, text: str) -> str:
        if "`" not in text:
            return text
        lines = []
        for line in text.split("\n"):
            if "`" not in line:
                lines.append(line)
                continue
            pieces, pos = [], 0
            for start, end in _inline_code_spans(line):
                pieces += [line[pos:start], self.placeholder(line[start:end], shared=True)]
                pos = end
            lines.append("".join(pieces) + line[pos:])
        return "\n".join(lines)

    def unmask(self, text: str) -> str:
        return self._pattern.sub(lambda m: self._table[int(m.group(1))], text)


def _outside_code(text: str, clean: Callable[[str], str]) -> str:
    """Apply `clean` to each prose stretch between fences, inline code masked."""
    if not text:
        return text
    masker = _Masker(text)
    parts = []
    for segment in _split_fences(text):
        if segment.code:
            parts.append(segment.text)
        else:
            parts.append(masker.unmask(clean(masker.mask_inline_code(segment.text))))
    return "\n".join(parts)


def _line_start(text: str, pos: int) -> bool:
    """True when only spaces or tabs stand between the start of the line and `pos`."""
    while pos > 0 and text[pos - 1] in " \t":
        pos -= 1
    return pos == 0 or text[pos - 1] == "\n"


def _next_visible(text: str, pos: int) -> str:
    """The first character at or after `pos` that is not a space or tab ("" at the end)."""
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    return text[pos : pos + 1]


def _drop_lone_closer_lines(text: str, closer: re.Pattern[str]) -> str:
    return "\n".join(line for line in text.split("\n") if not closer.fullmatch(line))


# ---------------------------------------------------------------------------------------------
# Step 1: tool-call XML that some models emit as text.

_TOOL_NAMES = (
    r"(?:antml:|minimax:)?(?:function_calls|function_call|functioninvoke|invfunction_calls"
    r"|invoke|tool_calls|tool_call|tool_use|parameter)"
)
_TOOL_TAG = re.compile(r"<(/)?(" + _TOOL_NAMES + r")\b[^<>]{0,500}?(/)?>", re.IGNORECASE)
_TOOL_CLOSER_LINE = re.compile(r"[ \t]*</" + _TOOL_NAMES + r"[ \t]*>[ \t\r]*", re.IGNORECASE)


def _strip_tool_xml_prose(text: str) -> str:
    tags = list(_TOOL_TAG.finditer(text))
    if not tags:
        return text
    # Pair each opening tag with its closing tag, per tag name, innermost first.
    partner: dict[int, int] = {}
    open_stacks: dict[str, list[int]] = {}
    for index, tag in enumerate(tags):
        if tag.group(3):
            continue
        stack = open_stacks.setdefault(tag.group(2).lower(), [])
        if tag.group(1):
            if stack:
                partner[stack.pop()] = index
        else:
            stack.append(index)
    kept, pos = [], 0
    for index, tag in enumerate(tags):
        if tag.start() < pos or tag.group(1):
            continue
        after = _next_visible(text, tag.end())
        if not (_line_start(text, tag.start()) or after in ("", "\n", "\r", "{", "[", "<")):
            continue  # mentioned in a sentence, not emitted as structure
        kept.append(text[pos : tag.start()])
        if tag.group(3):
            pos = tag.end()
        elif index in partner:
            pos = tags[partner[index]].end()
        elif after in ("", "\n", "\r", "{", "[", "<"):
            pos = len(text)  # unclosed and followed by its payload: the rest is debris
        else:
            pos = tag.end()
    kept.append(text[pos:])
    return _drop_lone_closer_lines("".join(kept), _TOOL_CLOSER_LINE)


def strip_garbled_tool_xml(text: str) -> str:
    """Remove tool-call XML emitted as text (DeepSeek, GLM, MiniMax style), with its payload."""
    if not _TOOL_TAG.search(text):
        return text
    return _outside_code(text, _strip_tool_xml_prose)


# ---------------------------------------------------------------------------------------------
# Step 2: tool calls downgraded to text ("[Tool Call: x]" + JSON arguments).

_DOWNGRADED_MARKER = re.compile(
    r"\[(?:tool call:|tool result\b|historical context:)", re.IGNORECASE
)
_ARGUMENT_LABEL = re.compile(r"(?:arguments|args|input|output|result)\s*:", re.IGNORECASE)


def _strip_downgraded_prose(text: str) -> str:
    kept: list[str] = []
    mode = ""  # "" keeping, "call" skipping arguments, "result" skipping output, "gap" blanks
    for line in text.split("\n"):
        stripped = line.strip()
        if _DOWNGRADED_MARKER.match(stripped):
            mode = "result" if stripped[1:12].lower() == "tool result" else "call"
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
    if not _DOWNGRADED_MARKER.search(text):
        return text
    return _outside_code(text, _strip_downgraded_prose)


# ---------------------------------------------------------------------------------------------
# Step 3: reasoning tags.

_THINK_NAMES = r"(?:redacted_thinking|antthinking|thinking|thought|think)"
_THINK_TAG = re.compile(r"<(/)?" + _THINK_NAMES + r"\b[^<>]{0,200}>", re.IGNORECASE)
_THINK_CLOSER_LINE = re.compile(r"[ \t]*</" + _THINK_NAMES + r"[ \t]*>[ \t\r]*", re.IGNORECASE)


def _strip_thinking_prose(text: str) -> str:
    kept, pos, inside = [], 0, False
    for tag in _THINK_TAG.finditer(text):
        if tag.start() < pos:
            continue
        if inside:
            if tag.group(1):
                inside, pos = False, tag.end()
            continue
        if tag.group(1):
            continue
        if _line_start(text, tag.start()) or _next_visible(text, tag.end()) in ("", "\n", "\r"):
            kept.append(text[pos : tag.start()])
            inside = True
    if not inside:
        kept.append(text[pos:])
    return _drop_lone_closer_lines("".join(kept), _THINK_CLOSER_LINE)


def strip_thinking_tags(text: str) -> str:
    """Remove `<think>`, `<thinking>`, `<thought>`, `<antThinking>` blocks and their content."""
    if not _THINK_TAG.search(text):
        return text
    return _outside_code(text, _strip_thinking_prose)


# ---------------------------------------------------------------------------------------------
# Step 4: <final> wrappers.

_FINAL_TAG = re.compile(r"<[ \t]*/?[ \t]*final[ \t]*>", re.IGNORECASE)
_FINAL_OPEN = re.compile(
    r"(?m)^([ \t]*)<[ \t]*final[ \t]*>(?:[ \t]*<[ \t]*final[ \t]*>)*", re.IGNORECASE
)
_FINAL_CLOSE = re.compile(
    r"(?m)<[ \t]*/[ \t]*final[ \t]*>(?:[ \t]*<[ \t]*/[ \t]*final[ \t]*>)*([ \t\r]*)$",
    re.IGNORECASE,
)


def _strip_final_prose(text: str) -> str:
    return _FINAL_CLOSE.sub(r"\1", _FINAL_OPEN.sub(r"\1", text))


def strip_final_tags(text: str) -> str:
    """Remove `<final>` / `</final>` wrapper tags, keeping what they wrap."""
    if not _FINAL_TAG.search(text):
        return text
    return _outside_code(text, _strip_final_prose)


# ---------------------------------------------------------------------------------------------
# Step 5: echoed "[System Message]" blocks.

_SYSTEM_MESSAGE_MARKER = re.compile(r"\[\s?system\s+message\s?\]", re.IGNORECASE)


def _strip_system_messages_prose(text: str) -> str:
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
    if not _SYSTEM_MESSAGE_MARKER.search(text):
        return text
    return _outside_code(text, _strip_system_messages_prose)


# ---------------------------------------------------------------------------------------------
# Step 6: stutter.

_BLANK_LINES = re.compile(r"\n(?:[ \t\r]*\n)+")


def collapse_consecutive_duplicate_blocks(text: str) -> str:
    """Drop a paragraph that repeats the one before it; fenced code blocks are never dropped."""
    if not _BLANK_LINES.search(text):
        return text
    masker = _Masker(text)
    masked = "\n".join(
        masker.placeholder(s.text, shared=False) if s.code else masker.mask_inline_code(s.text)
        for s in _split_fences(text)
    )
    blocks = _BLANK_LINES.split(masked)
    kept: list[str] = []
    for block in blocks:
        if kept and block.strip() and block.strip() == kept[-1].strip():
            continue
        kept.append(block)
    if len(kept) == len(blocks):
        return text
    return masker.unmask("\n\n".join(kept))


# ---------------------------------------------------------------------------------------------
# Step 7: leading blank lines.

_LEADING_BLANK_LINES = re.compile(r"(?:[ \t\r]*\n)+")


def strip_leading_blank_lines(text: str) -> str:
    """Remove whitespace-only lines at the start, keeping the first line's indentation."""
    match = _LEADING_BLANK_LINES.match(text)
    return text[match.end() :] if match else text


# Each pass only deletes; passes repeat while one removal exposes more debris. Ordinary
# leaks settle in two passes; the cap bounds deliberately nested debris.
MAX_SANITIZE_PASSES = 64

SANITIZE_STEPS: tuple[Callable[[str], str], ...] = (
    strip_garbled_tool_xml,
    strip_downgraded_tool_call_text,
    strip_thinking_tags,
    strip_final_tags,
    strip_echoed_system_messages,
    collapse_consecutive_duplicate_blocks,
    strip_leading_blank_lines,
)


def sanitize_output(text: str) -> str:
    """The model's final text made fit for a user: the seven steps, then trimmed.

    Returns "" when nothing is left (e.g. the whole reply was garbled tool XML).
    """
    for _ in range(MAX_SANITIZE_PASSES):
        cleaned = text
        for step in SANITIZE_STEPS:
            cleaned = step(cleaned)
        cleaned = cleaned.strip()
        if cleaned == text:
            break
        text = cleaned
    return text


# ---------------------------------------------------------------------------------------------
# NO_REPLY.

_WRAP = r"[*_~]{0,3}"
_SILENT_START = re.compile(r"\s*" + _WRAP + SILENT_TOKEN + _WRAP + r"(?!\w)")
_SILENT_END = re.compile(r"(?<![\w*~])" + _WRAP + SILENT_TOKEN + _WRAP + r"\s*\Z")
_SILENT_SEPARATORS = frozenset(".,;:!?-|\u2013\u2014")


def _token_prefix(token: str, then: str) -> str:
    """A regex matching any prefix of `token`, and `then` once the token is complete."""
    pattern = then
    for char in reversed(token):
        pattern = f"(?:{re.escape(char)}{pattern})?"
    return pattern


# A stream start that may still turn into a leading token.
_SILENT_HEAD_VIABLE = re.compile(r"\s*" + _WRAP + _token_prefix(SILENT_TOKEN, _WRAP))
# A stream end that may still turn into a trailing token (after the lookbehind position).
_SILENT_TAIL_VIABLE = re.compile(_WRAP + _token_prefix(SILENT_TOKEN, _WRAP + r"\s*"))
_WORDISH = re.compile(r"[\w*~]")
_SILENT_TAIL_CORE = 3 + len(SILENT_TOKEN) + 3


def _is_separator(char: str) -> bool:
    return char.isspace() or char in _SILENT_SEPARATORS


def _skip_separators(text: str, pos: int) -> int:
    while pos < len(text) and _is_separator(text[pos]):
        pos += 1
    return pos


def is_silent(text: str) -> bool:
    """True when the reply, trimmed, is exactly NO_REPLY: deliver nothing."""
    return text.strip() == SILENT_TOKEN


def strip_silent_token(text: str) -> str:
    """Remove a NO_REPLY standing at the very start or end; a mention mid-text stays.

    `"NO_REPLY"` -> `""`; `"NO_REPLY: done"` -> `"done"`; `"Done.\\n\\nNO_REPLY"` -> `"Done."`;
    `"Say NO_REPLY when idle"` is returned unchanged.
    """
    rest = text
    start = _SILENT_START.match(text)
    if start is not None:
        rest = text[_skip_separators(text, start.end()) :]
    end = _SILENT_END.search(rest)
    if end is not None:
        rest = rest[: end.start()].rstrip()
    return rest


class SilentTokenFilter:
    """Streams text while keeping a NO_REPLY at its start or end from ever being shown.

    `feed(delta)` returns what is safe to show now; `flush()` returns the rest once the
    stream ended. For every split of a text into deltas, the concatenation of all returned
    pieces equals `strip_silent_token(text)`. To keep that promise the filter holds back the
    stream's start while it may still be a NO_REPLY, and its tail while it may be whitespace
    followed by the beginning of one (e.g. `"... NO_RE"`), so a trailing token is never shown.
    """

    def __init__(self) -> None:
        self._phase = "head"  # head: may be a leading token; sep: after one; body
        self._held = ""
        self._last_shown = ""  # last character shown in the body (lookbehind context)

    def feed(self, delta: str) -> str:
        self._held += delta
        if self._phase == "head":
            if _SILENT_HEAD_VIABLE.fullmatch(self._held):
                return ""
            start = _SILENT_START.match(self._held)
            if start is None:
                self._phase = "body"
            else:
                self._phase, self._held = "sep", self._held[start.end() :]
        if self._phase == "sep":
            self._held = self._held[_skip_separators(self._held, 0) :]
            if not self._held:
                return ""
            self._phase = "body"
        cut = self._hold_from()
        shown, self._held = self._held[:cut], self._held[cut:]
        if shown:
            self._last_shown = shown[-1]
        return shown

    def flush(self) -> str:
        held, self._held = self._held, ""
        if self._phase == "head":
            return strip_silent_token(held)
        if self._phase == "sep":
            return ""
        context = self._last_shown
        end = _SILENT_END.search(context + held, len(context))
        if end is None:
            return held
        return held[: end.start() - len(context)].rstrip()

    def _hold_from(self) -> int:
        """Index in the held text from which it may still become a trailing token."""
        held = self._held
        body_end = len(held.rstrip())
        for core in range(max(0, body_end - _SILENT_TAIL_CORE), body_end + 1):
            before = held[core - 1] if core else self._last_shown
            if before and _WORDISH.match(before):
                continue
            if _SILENT_TAIL_VIABLE.fullmatch(held, core):
                return len(held[:core].rstrip())
        return body_end


# ---------------------------------------------------------------------------------------------
# HEARTBEAT_OK.

_HB_WRAP = r"[*_~`]{0,3}"
_HEARTBEAT_START = re.compile(r"\s*" + _HB_WRAP + HEARTBEAT_TOKEN + _HB_WRAP + r"[.!]*(?![\w])")
_HEARTBEAT_END = re.compile(r"(?<![\w*~`])" + _HB_WRAP + HEARTBEAT_TOKEN + _HB_WRAP + r"[.!]*\s*\Z")


def strip_heartbeat_ok(text: str, max_rest: int = 300) -> tuple[bool, str]:
    """Apply the heartbeat rule: `(suppress, remaining_text)`.

    HEARTBEAT_OK at the start or end (optionally `**wrapped**` or followed by `.`/`!`) is
    removed; the reply is suppressed when at most `max_rest` characters remain. Without the
    token the text is returned unchanged and not suppressed.
    """
    rest, found = text, False
    start = _HEARTBEAT_START.match(rest)
    if start is not None:
        rest, found = rest[_skip_separators(rest, start.end()) :], True
    end = _HEARTBEAT_END.search(rest)
    if end is not None:
        rest, found = rest[: end.start()], True
    if not found:
        return False, text
    rest = rest.strip()
    return len(rest) <= max_rest, rest
