"""What a search term is: text cut into words, folded, stop words left out, stemmed.

`terms_of(text)` is the one normaliser of the search index (`Search` role): documents are
stored with it and queries asked with it, so both store backends index and look up exactly
the same terms (FTS5 with a plain `unicode61` tokenizer, PostgreSQL with the `simple`
configuration: neither stems again). A word is a run of letters and digits (`_` and any
punctuation cut), case-folded, accents removed (NFKD, combining marks dropped), English stop
words and one-character words left out, then stemmed with Snowball's English stemmer
(PyStemmer), so "birthdays" finds "birthday". Text without spaces between words (Chinese,
Japanese) stays one term per run, as FTS5's own tokenizer would leave it.
`snippet(text, terms, limit)` cuts a long text around its first matching word.

What the full-text index holds of a document (`indexed_tokens`) is its terms twice: as they
are (the operator's search over everything) and each behind its scope's prefix (`s` and 10
hex digits of the scope's MD5, which PostgreSQL computes the same way), so a chat's search
reads only the postings of the scopes it may see, however many other chats there are.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
import unicodedata
from collections.abc import Collection, Iterator

import Stemmer

MAX_TERM_CHARS = 64  # longer "words" (hashes, base64) are no search terms
_WORD = re.compile(r"[^\W_]+")
_STEMMER = Stemmer.Stemmer("english")

STOP_WORDS = frozenset(
    """
    about above after again against all also am an and any are aren as at be because been
    before being below between both but by can cannot could couldn did didn do does doesn
    doing don down during each few for from further get got had hadn has hasn have haven
    having he her here hers herself him himself his how if in into is isn it its itself just
    let ll me might more most mustn my myself no nor not now of off on once only or other
    ought our ours ourselves out over own re same shan she should shouldn so some such than
    that the their theirs them themselves then there these they this those through to too
    under until up ve very was wasn we were weren what when where which while who whom why
    will with won would wouldn you your yours yourself yourselves ok okay yes yeah please
    thanks thank hi hello hey
    """.split()  # noqa: SIM905 (a block of words reads better than a list)
)


@functools.cache
def _marks() -> dict[int, None]:
    """Combining marks (accents once NFKD has split them off), for one str.translate; made
    on first use (it looks at every code point once)."""
    return {c: None for c in range(sys.maxunicode + 1) if unicodedata.combining(chr(c))}


def fold(text: str) -> str:
    """Case-folded, compatibility-decomposed, accents removed."""
    folded = unicodedata.normalize("NFKD", text).casefold()
    return folded if folded.isascii() else folded.translate(_marks())


def _kept(word: str) -> bool:
    return 1 < len(word) <= MAX_TERM_CHARS and word not in STOP_WORDS


def terms_of(text: str) -> list[str]:
    """The search terms of `text`, in order, repeats kept (a term's count is its weight)."""
    words = [w for w in _WORD.findall(fold(text)) if _kept(w)]
    return _STEMMER.stemWords(words) if words else []


def _spans(text: str) -> Iterator[tuple[int, str]]:
    """(offset, term) of each word of `text` that is a search term."""
    for match in _WORD.finditer(text):
        word = fold(match.group())
        if _kept(word):
            yield match.start(), _STEMMER.stemWord(word)


def snippet(text: str, terms: Collection[str], limit: int) -> str:
    """`text` cut to at most `limit` characters around its first word among `terms`, an
    ellipsis where something was cut; the whole text when it fits."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    start = next((at for at, term in _spans(text) if term in terms), 0)
    start = max(0, min(start - limit // 4, len(text) - limit))
    if start > 0:
        space = text.find(" ", start, start + 40)
        start = space + 1 if space >= 0 else start
    head = "…" if start > 0 else ""
    room = limit - len(head)
    body = text[start : start + room]
    if start + room < len(text):
        cut = body.rfind(" ", room // 2)
        body = (body[:cut] if cut > 0 else body[:-1]) + "…"
    return head + body


def scope_prefix(scope: str) -> str:
    """The prefix of a scope's tokens (PostgreSQL: `'s' || left(md5(scope), 10)`)."""
    return "s" + hashlib.md5(scope.encode(), usedforsecurity=False).hexdigest()[:10]


def indexed_tokens(terms: list[str], scope: str) -> str:
    """The terms as the full-text index holds them: plain, then behind the scope's prefix."""
    prefix = scope_prefix(scope)
    return " ".join([*terms, *(prefix + t for t in terms)])
