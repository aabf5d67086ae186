"""What a user said, as a request carries it: without the time a turn's message opens with.

Each turn's user message begins with the time (`PromptBuilder.turn_context`), a block of its
own in the Messages shape, the start of the joined text in Chat Completions.
"""

from __future__ import annotations

import re

TIME_STAMP = re.compile(r"\[\w{3} \d{4}-\d{2}-\d{2} \d{2}:\d{2} [^\]\n]+\]")


def said(text: str) -> str:
    """`text` without the time stamp it may open with."""
    match = TIME_STAMP.match(text)
    return text[match.end() :].lstrip("\n") if match else text
