"""How many tokens the fixed part of a request holds: the tools and the system blocks.

Every chat request begins with the same tools and system prompt (the prefix the prompt cache
keeps, `agents.cache_breakpoints`). `prefix_size(tools, system)` estimates it the way Perch
estimates a history (`agents.history_size`: 4 characters a token), per part: the tools as
their JSON, then each system block (persona, memory and skills, the session's facts). An
estimate: the API's tokenizer counts a little differently, and it adds its own instructions
for tool use.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agents.history_size import CHARS_PER_TOKEN
from agents.model import TextBlock


@dataclass(frozen=True, slots=True)
class PrefixSize:
    tools: int
    system: tuple[int, ...]  # per block, in order

    @property
    def total(self) -> int:
        return self.tools + sum(self.system)


def prefix_size(tools: Sequence[dict[str, Any]], system: Sequence[TextBlock]) -> PrefixSize:
    """The estimated tokens of `tools` (as sent) and of each system block."""
    encoded = json.dumps(list(tools), ensure_ascii=False, separators=(",", ":"))
    return PrefixSize(
        _tokens(len(encoded)) if tools else 0,
        tuple(_tokens(len(block["text"])) for block in system),
    )


def _tokens(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)
