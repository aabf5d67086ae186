"""The output sanitizer and the silent-reply rules: what of a model's text reaches a user.

Owns the seven cleanup steps of seed 002 (`sanitize_output`, public contract of DESIGN
section 10), and re-exports the NO_REPLY rule (`is_silent`, `strip_silent_token`,
`SilentTokenFilter`) and the HEARTBEAT_OK rule (`strip_heartbeat_ok`) from
`agents.sanitize.silent`. Pure functions of text; nothing here logs or does I/O.

Where each concern lives: `regions` (code fences and inline code, never touched), `tags`
(steps 1, 3, 4: tool XML, reasoning blocks, `<final>`), `markers` (steps 2, 5: downgraded
tool calls, echoed system messages), `layout` (steps 6, 7), `silent` (NO_REPLY, HEARTBEAT_OK).

`sanitize_output` never raises and is idempotent on any input: every step only deletes, and
the steps repeat until nothing changes (removing one tag can expose another). An ordinary
leak settles in one or two passes. Debris nested on purpose (`<thi<think>x</think>nk>...`)
could need as many passes as it has levels, so after `SETTLE_PASSES` passes the reply is
treated as adversarial: every `<` that starts a tag-like word and every `[` that starts a
debris marker is removed from its prose (code untouched), which leaves nothing any step can
match, and one last round settles it. Each pass is linear in the reply's length.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from agents.sanitize.layout import (
    collapse_consecutive_duplicate_blocks,
    strip_leading_blank_lines,
)
from agents.sanitize.markers import (
    strip_downgraded_prose,
    strip_downgraded_tool_call_text,
    strip_echoed_system_messages,
    strip_system_messages_prose,
)
from agents.sanitize.regions import Masker, outside_code, split_fences
from agents.sanitize.silent import (
    HEARTBEAT_TOKEN,
    SILENT_TOKEN,
    SilentTokenFilter,
    is_silent,
    strip_heartbeat_ok,
    strip_silent_token,
)
from agents.sanitize.tags import (
    strip_final_prose,
    strip_final_tags,
    strip_garbled_tool_xml,
    strip_thinking_prose,
    strip_thinking_tags,
    strip_tool_xml_prose,
)

__all__ = [
    "HEARTBEAT_TOKEN",
    "SANITIZE_STEPS",
    "SETTLE_PASSES",
    "SILENT_TOKEN",
    "SilentTokenFilter",
    "collapse_consecutive_duplicate_blocks",
    "is_silent",
    "sanitize_output",
    "strip_downgraded_tool_call_text",
    "strip_echoed_system_messages",
    "strip_final_tags",
    "strip_garbled_tool_xml",
    "strip_heartbeat_ok",
    "strip_leading_blank_lines",
    "strip_silent_token",
    "strip_thinking_tags",
]

SANITIZE_STEPS: tuple[Callable[[str], str], ...] = (
    strip_garbled_tool_xml,
    strip_downgraded_tool_call_text,
    strip_thinking_tags,
    strip_final_tags,
    strip_echoed_system_messages,
    collapse_consecutive_duplicate_blocks,
    strip_leading_blank_lines,
)

# Steps 1-5 on one masked prose stretch, in the order of SANITIZE_STEPS.
_PROSE_STEPS: tuple[Callable[[str], str], ...] = (
    strip_tool_xml_prose,
    strip_downgraded_prose,
    strip_thinking_prose,
    strip_final_prose,
    strip_system_messages_prose,
)

SETTLE_PASSES = 8
"""Passes after which a reply that still changes is treated as deliberately nested debris."""

_TAG_OPENERS = re.compile(r"<+(?=[ \t]*[/A-Za-z])")
_MARKER_OPENERS = re.compile(r"\[+(?=\s?(?:tool|historical|system))", re.IGNORECASE)


def _clean_prose(text: str) -> str:
    for step in _PROSE_STEPS:
        text = step(text)
    return text


def _one_pass(text: str) -> str:
    """The seven steps once, steps 1-5 sharing one masking of the code, then trimmed."""
    if "<" in text or "[" in text:
        masker = Masker()
        parts = []
        for segment in split_fences(text):
            if segment.code or ("<" not in segment.text and "[" not in segment.text):
                parts.append(segment.text)
            else:
                parts.append(masker.unmask(_clean_prose(masker.mask_prose(segment.text))))
        text = "\n".join(parts)
    text = collapse_consecutive_duplicate_blocks(text)
    return strip_leading_blank_lines(text).strip()


def _defang_prose(text: str) -> str:
    return _MARKER_OPENERS.sub("", _TAG_OPENERS.sub("", text))


def sanitize_output(text: str) -> str:
    """The model's final text made fit for a user: the seven steps, then trimmed.

    Returns "" when nothing is left (e.g. the whole reply was garbled tool XML).
    """
    for _ in range(SETTLE_PASSES):
        cleaned = _one_pass(text)
        if cleaned == text:
            return text
        text = cleaned
    text = outside_code(text, _defang_prose)
    while True:  # ends: every pass only deletes, and nothing tag-like is left to delete
        cleaned = _one_pass(text)
        if len(cleaned) >= len(text):  # unchanged (a pass never grows the text)
            return text
        text = cleaned
