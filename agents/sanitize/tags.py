"""Steps 1, 3 and 4 of the sanitizer: tool-call XML, reasoning blocks and `<final>` wrappers.

Each `strip_*` function is one step on a whole reply (code fences and inline code untouched);
the `*_prose` functions are the same step on one masked prose stretch, for the pipeline.

When a tag is debris and when it is a mention (a reply talking about tags keeps them; in
backticks they are always safe):
- Tool calls: an opening tool tag is debris at the start of a line or when a line break,
  `{`, `[` or `<` follows it; it takes its payload with it up to its closing tag (or to the
  end of the stretch when unclosed and followed by payload). A closing tool tag that closes
  nothing (`</tool_call>`, `</function_call>`, `</minimax:tool_call>`) is dropped anywhere.
- Reasoning (`<think>`, `<thinking>`, `<thought>`, `<antThinking>`, `<redacted_thinking>`):
  an opening tag starts a block at the start of a line, when a line break follows it, when
  text follows it directly (`one<think>q</think> two`, mid-sentence too), or when only
  whitespace stands before its closing tag. The block ends at the next closing reasoning tag,
  or at the end of the stretch when unclosed. A closing tag standing alone on its line, or
  directly after text (`x</think>`), is dropped. Look-alikes (`<think-foo>`) are not tags.
  `Use <thinking> tags and close with </thinking>` (spaces inside) is a mention and stays.
  Where a block stood between two spaces, one space is kept.
- `<final>`: a `<final>` ... `</final>` pair is unwrapped wherever it stands; an unpaired
  `<final>` at the start of a line or `</final>` at the end of one is dropped.
"""

from __future__ import annotations

import re

from agents.sanitize.regions import (
    drop_lone_closer_lines,
    join_removed,
    line_start,
    next_visible,
    outside_code,
)

# ---------------------------------------------------------------------------------------------
# Step 1: tool-call XML that some models emit as text.

_TOOL_NAMES = (
    r"(?:antml:|minimax:)?(?:function_calls|function_call|functioninvoke|invfunction_calls"
    r"|invoke|tool_calls|tool_call|tool_use|parameter)"
)
_TOOL_TAG = re.compile(r"<(/)?(" + _TOOL_NAMES + r")\b[^<>]{0,500}?(/)?>", re.IGNORECASE)
_PAYLOAD_STARTS = ("", "\n", "\r", "{", "[", "<")


def _line_end(text: str, pos: int) -> bool:
    """True when only spaces, tabs or a carriage return stand before the end of the line."""
    while pos < len(text) and text[pos] in " \t\r":
        pos += 1
    return pos == len(text) or text[pos] == "\n"


def strip_tool_xml_prose(text: str) -> str:
    if "<" not in text:
        return text
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
    paired_closers = set(partner.values())
    kept, pos = [], 0
    for index, tag in enumerate(tags):
        if tag.start() < pos:
            continue
        if tag.group(1):
            if index not in paired_closers:  # a closer that closes nothing: debris
                start, end = tag.start(), tag.end()
                if line_start(text, start) and _line_end(text, end):  # alone on its line
                    start = text.rfind("\n", 0, start) + 1
                    newline = text.find("\n", end)
                    end = len(text) if newline < 0 else newline + 1
                    if newline < 0 and start > 0:
                        start -= 1  # the last line: its line break goes instead
                kept.append(text[pos:start])
                pos = end
            continue
        after = next_visible(text, tag.end())
        if not (line_start(text, tag.start()) or after in _PAYLOAD_STARTS):
            continue  # mentioned in a sentence, not emitted as structure
        kept.append(text[pos : tag.start()])
        if tag.group(3):
            pos = tag.end()
        elif index in partner:
            pos = tags[partner[index]].end()
        elif after in _PAYLOAD_STARTS:
            pos = len(text)  # unclosed and followed by its payload: the rest is debris
        else:
            pos = tag.end()
    return join_removed(kept, text[pos:])


def strip_garbled_tool_xml(text: str) -> str:
    """Remove tool-call XML emitted as text (DeepSeek, GLM, MiniMax style), with its payload."""
    if "<" not in text or not _TOOL_TAG.search(text):
        return text
    return outside_code(text, strip_tool_xml_prose)


# ---------------------------------------------------------------------------------------------
# Step 3: reasoning blocks.

_THINK_NAMES = r"(?:redacted_thinking|antthinking|thinking|thought|think)"
_THINK_TAG = re.compile(r"<(/)?" + _THINK_NAMES + r"(?:[ \t\r\n][^<>]{0,200})?>", re.IGNORECASE)
_THINK_CLOSER_LINE = re.compile(r"[ \t]*</" + _THINK_NAMES + r"[ \t]*>[ \t\r]*", re.IGNORECASE)


def _opens_block(text: str, tag: re.Match[str], following: re.Match[str] | None) -> bool:
    start, end = tag.start(), tag.end()
    if line_start(text, start):
        return True
    after = text[end : end + 1]
    if after == "" or not after.isspace():
        return True  # end of text, or content hugging the tag: emitted, not mentioned
    if next_visible(text, end) in ("", "\n", "\r"):
        return True
    # Only whitespace before the next closing tag: an empty block.
    return (
        following is not None
        and following.group(1) is not None
        and not text[end : following.start()].strip()
    )


def strip_thinking_prose(text: str) -> str:
    if "<" not in text:
        return text
    tags = list(_THINK_TAG.finditer(text))
    if not tags:
        return text
    kept, pos, inside = [], 0, False
    for index, tag in enumerate(tags):
        if inside:
            if tag.group(1):
                inside, pos = False, tag.end()
            continue
        if tag.group(1):
            before = text[tag.start() - 1 : tag.start()]
            if before and not before.isspace():  # `x</think>`: a stray closer
                kept.append(text[pos : tag.start()])
                pos = tag.end()
            continue
        following = tags[index + 1] if index + 1 < len(tags) else None
        if _opens_block(text, tag, following):
            kept.append(text[pos : tag.start()])
            inside = True
    cleaned = join_removed(kept, "" if inside else text[pos:])
    return drop_lone_closer_lines(cleaned, _THINK_CLOSER_LINE)


def strip_thinking_tags(text: str) -> str:
    """Remove `<think>`, `<thinking>`, `<thought>`, `<antThinking>` blocks and their content."""
    if "<" not in text or not _THINK_TAG.search(text):
        return text
    return outside_code(text, strip_thinking_prose)


# ---------------------------------------------------------------------------------------------
# Step 4: <final> wrappers.

_FINAL_TAG = re.compile(r"<[ \t]*(/)?[ \t]*final[ \t]*>", re.IGNORECASE)


def strip_final_prose(text: str) -> str:
    if "<" not in text:
        return text
    tags = list(_FINAL_TAG.finditer(text))
    if not tags:
        return text
    dropped: set[int] = set()
    openers: list[int] = []
    for index, tag in enumerate(tags):
        if tag.group(1) is None:
            openers.append(index)
        elif openers:
            dropped.update((openers.pop(), index))
        elif _line_end(text, tag.end()):
            dropped.add(index)
    dropped.update(i for i in openers if line_start(text, tags[i].start()))
    if not dropped:
        return text
    pieces, pos = [], 0
    for index in sorted(dropped):
        pieces.append(text[pos : tags[index].start()])
        pos = tags[index].end()
    pieces.append(text[pos:])
    return "".join(pieces)


def strip_final_tags(text: str) -> str:
    """Remove `<final>` / `</final>` wrapper tags, keeping what they wrap."""
    if "<" not in text or not _FINAL_TAG.search(text):
        return text
    return outside_code(text, strip_final_prose)
