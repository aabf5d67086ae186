"""What a quoted snippet may not carry: the recalled block's tag in any spelling, a line break.

Recall (`agents/recall.py`) and `memory_search` (`agents/tools/memory.py`) quote notes,
file names and earlier messages, which anyone who wrote to the bot may have written. A quote
must not open, close or forge the block or one of its lines, so:
- `quote_text(text)`: one line (every kind of line break and run of whitespace becomes one
  space), and every occurrence of the block's name, `recalled context`, however it is spelt
  (case, spaces, `_`/`-`/`.`, zero-width or other invisible characters between the letters,
  full-width or compatibility forms, common Cyrillic and Greek look-alikes, HTML character
  references) is replaced by a marker: without its name, no tag of the block can be written
  (quote a whole line too: a name may be split between a label and the text after it);
- `quote_label(where)`: the same, and no square brackets, so a file name cannot end its
  `[where, when]` label early and start another.
Pure; property-tested in tests/agents/test_recall_block.py.
"""

from __future__ import annotations

import html
import unicodedata

NAME = "recalledcontext"
MARKER = "[tag removed]"  # says nothing of the name, so it cannot spell it
# Letters that look like the Latin ones of the name (NFKC keeps them apart).
_LOOKALIKES = str.maketrans(
    {
        "а": "a",
        "с": "c",
        "ԁ": "d",
        "е": "e",
        "һ": "h",
        "і": "i",
        "ј": "j",
        "ӏ": "l",
        "о": "o",
        "р": "p",
        "х": "x",
        "у": "y",
        "ο": "o",
        "ε": "e",
        "τ": "t",
        "ν": "v",
        "ι": "i",
        "α": "a",
        "κ": "k",
        "ℓ": "l",
        "ı": "i",
    }
)


def _folded(ch: str) -> str:
    """The letters `ch` stands for when spelling a name ("" for a separator or invisible)."""
    norm = unicodedata.normalize("NFKC", ch).casefold().translate(_LOOKALIKES)
    return "".join(c for c in norm if c.isalnum())


def _strip_name(text: str) -> str:
    letters: list[tuple[str, int]] = []  # (letter, index of the character it came from)
    for i, ch in enumerate(text):
        letters.extend((c, i) for c in _folded(ch))
    folded = "".join(c for c, _ in letters)
    spans: list[tuple[int, int]] = []
    start = folded.find(NAME)
    while start >= 0:
        spans.append((letters[start][1], letters[start + len(NAME) - 1][1] + 1))
        start = folded.find(NAME, start + len(NAME))
    for begin, end in reversed(spans):
        text = text[:begin] + MARKER + text[end:]
    return text


def _unescaped(text: str) -> str:
    """HTML character references resolved (nested ones too, a few levels deep)."""
    for _ in range(4):
        if "&" not in text:
            break
        once = html.unescape(text)
        if once == text:
            break
        text = once
    return text


def quote_text(text: str) -> str:
    """`text` as one line that never spells the block's name."""
    return " ".join(_strip_name(_unescaped(" ".join(text.split()))).split())


def quote_label(where: str) -> str:
    """A snippet's source as a label: one line, the name never spelt, no square brackets."""
    return quote_text(where).replace("[", "(").replace("]", ")")
