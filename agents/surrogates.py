"""Characters a JSON escape can carry that the stores and model APIs refuse.

A lone UTF-16 surrogate ("\\ud800") is refused by UTF-8 itself, so by every database and
model API; NUL ("\\u0000") by PostgreSQL's text columns. A platform's update or a model's
stream can carry either; each is replaced by U+FFFD where text enters Perch, so one hostile
character can neither fail a turn nor leave a history or summary that cannot be stored or sent.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

_SURROGATE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"

T = TypeVar("T")


def needs_fixing(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def fix_text(text: str) -> str:
    """`text` with each lone surrogate and NUL replaced by U+FFFD (`text` itself when it has
    none)."""
    return _SURROGATE.sub(REPLACEMENT, text) if _SURROGATE.search(text) else text


def fix_data(value: T) -> T:
    """`value` (JSON-like: dicts, lists, strings) with every string fixed, keys included;
    parts without surrogates are returned as they are, not copied."""
    fixed: T = _fix(value)
    return fixed


def _fix(value: Any) -> Any:
    if isinstance(value, str):
        return fix_text(value)
    if isinstance(value, dict):
        pairs = [(_fix(k), _fix(v)) for k, v in value.items()]
        same = all(f is k and g is v for (f, g), (k, v) in zip(pairs, value.items(), strict=True))
        return value if same else dict(pairs)
    if isinstance(value, list):
        items = [_fix(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value
