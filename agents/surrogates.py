"""Characters a JSON escape can carry that the stores and model APIs refuse.

A lone UTF-16 surrogate ("\\ud800") is refused by UTF-8 itself, so by every database and
model API; NUL ("\\u0000") by PostgreSQL's text columns. A platform's update or a model's
stream can carry either; each is replaced by U+FFFD where text enters Perch, so one hostile
character can neither fail a turn nor leave a history or summary that cannot be stored or sent.
A NUL in a user's message text is the exception (`keep_nul`): the input guard reports it and
takes it out of what the model reads.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

_REFUSED = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"

T = TypeVar("T")


def needs_fixing(text: str) -> bool:
    return _REFUSED.search(text) is not None


def fix_text(text: str, *, keep_nul: bool = False) -> str:
    """`text` with each lone surrogate and NUL replaced by U+FFFD (`text` itself when it has
    none). `keep_nul` leaves NUL in: a user's message text keeps it for the input guard,
    which reports it (`null_bytes`) and takes it out of what the model reads."""
    pattern = _SURROGATE if keep_nul else _REFUSED
    return pattern.sub(REPLACEMENT, text) if pattern.search(text) else text


def fix_data(value: T, *, keep_nul: bool = False) -> T:
    """`value` (JSON-like: dicts, lists, strings) with every string fixed, keys included;
    parts without anything to fix are returned as they are, not copied."""
    fixed: T = _fix(value, keep_nul)
    return fixed


def _fix(value: Any, keep_nul: bool = False) -> Any:
    if isinstance(value, str):
        return fix_text(value, keep_nul=keep_nul)
    if isinstance(value, dict):
        pairs = [(_fix(k, keep_nul), _fix(v, keep_nul)) for k, v in value.items()]
        same = all(f is k and g is v for (f, g), (k, v) in zip(pairs, value.items(), strict=True))
        return value if same else dict(pairs)
    if isinstance(value, list):
        items = [_fix(v, keep_nul) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value
