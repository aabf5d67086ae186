"""The `Search` role's rows, and the one score both store backends give a document.

A `SearchDocument` is one searchable piece: a memory note, one message of a conversation, a
skill. `source` says which kind, `ref` names it within the source (adding a document of the
same (source, ref) replaces it), `group` is what is replaced or removed together (a memory
file, a session, a skill), `scope` who may see it (`bot/recall/visibility.py`), `title`
where it came from and `at` when (epoch seconds; 0: no date).

How a document is scored, the same on both backends. Each backend picks candidates with its
own ranking (FTS5 `bm25()`, PostgreSQL `ts_rank_cd`), then `score` gives each the Okapi BM25
of the query (k1 = 1.2, b = 0.75, idf = ln(1 + (N - n + 0.5) / (n + 0.5)), N documents in
the index, n of them holding the term), computed from the index's own counts, divided by
what a document of average length holding each of the query's main terms once would score
(the sum of their idfs), capped at 1. So 1.0 is a document about everything the message
asks, 0 one holding none of it, and one threshold fits both backends and any index size.
The main terms are the new message's: a document must hold one of them to be found. Context
terms (the last turns') add to its score at their lower weight but don't raise the scale; a term no document holds does not
count (it says nothing about the documents there are).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.store.search_text import terms_of

SearchSource = Literal["memory", "sessions", "skills"]
SOURCES: tuple[SearchSource, ...] = ("memory", "sessions", "skills")
K1 = 1.2
B = 0.75
CANDIDATES = 48  # documents each backend ranks by its own measure before `score`
POSTINGS_BUDGET = 5_000  # candidates come from the rarest terms holding this many at most
MAX_QUERY_TERMS = 32
MAX_QUERY_CHARS = 4_000  # of a message (its end) and of its context make the query
MAX_DOC_CHARS = 8_000  # of a document's text is indexed and kept


@dataclass(frozen=True, slots=True)
class SearchDocument:
    source: SearchSource
    ref: str
    group: str
    scope: str
    title: str
    text: str
    at: float = 0.0

    @property
    def terms(self) -> list[str]:
        return terms_of(self.stored_text)

    @property
    def stored_text(self) -> str:
        """The text as the index keeps it: capped, without NUL (PostgreSQL holds none)."""
        return self.text[:MAX_DOC_CHARS].replace("\x00", "")


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """Documents of `sources`, in `scopes` (None: every scope, the operator's view), not
    in `exclude_groups`, scoring at least `min_score`, best first, at most `limit`.
    `terms` are the main terms with their weights, `context` the context terms'; `text` is
    the message itself (what recall's embeddings compare, `bot/recall/vectors.py`)."""

    terms: Mapping[str, float]
    context: Mapping[str, float] = field(default_factory=dict)
    sources: tuple[SearchSource, ...] = SOURCES
    scopes: tuple[str, ...] | None = ()
    exclude_groups: tuple[str, ...] = ()
    limit: int = 10
    min_score: float = 0.0
    text: str = ""

    @classmethod
    def of(
        cls,
        text: str,
        context: str = "",
        *,
        context_weight: float = 0.3,
        sources: tuple[SearchSource, ...] = SOURCES,
        scopes: tuple[str, ...] | None = (),
        exclude_groups: tuple[str, ...] = (),
        limit: int = 10,
        min_score: float = 0.0,
    ) -> SearchQuery:
        """A query for `text`, with `context` (the last turns) at `context_weight`."""
        # the last words: a question follows what it quotes (a group's recent messages, a file)
        main = dict.fromkeys(terms_of(text[-MAX_QUERY_CHARS:])[-MAX_QUERY_TERMS * 4 :], 1.0)
        main = dict(list(main.items())[-MAX_QUERY_TERMS:])
        extra = {t: context_weight for t in terms_of(context[-MAX_QUERY_CHARS:]) if t not in main}
        extra = dict(list(extra.items())[: MAX_QUERY_TERMS - len(main)])
        asked = text[-MAX_QUERY_CHARS:].strip()
        return cls(main, extra, sources, scopes, exclude_groups, limit, min_score, asked)

    @property
    def all_terms(self) -> list[str]:
        return [*self.terms, *self.context]


@dataclass(frozen=True, slots=True)
class SearchHit:
    document: SearchDocument
    score: float  # 0..1, see the module's docstring
    matched: tuple[str, ...]  # the query's terms the document holds


@dataclass(frozen=True, slots=True)
class IndexStats:
    """What `score` needs of the whole index: its size and how many documents hold each term."""

    documents: int
    total_length: int
    holding: Mapping[str, int]

    @property
    def average_length(self) -> float:
        return self.total_length / self.documents if self.documents else 1.0

    def idf(self, term: str) -> float:
        n = self.holding.get(term, 0)
        return math.log(1 + (self.documents - n + 0.5) / (n + 0.5))

    def informative(self, term: str) -> bool:
        """Held by some documents, and by at most half of them."""
        n = self.holding.get(term, 0)
        return n > 0 and 2 * n <= self.documents


def retrieval_terms(query: SearchQuery, stats: IndexStats) -> list[str]:
    """The main terms whose documents are ranked: the rarest first, while the documents holding
    them stay within `POSTINGS_BUDGET` (a term held by more is as common as a stop word in
    this index: it fetches nothing, though it counts in the score of what rarer ones fetch)."""
    known = sorted((stats.holding[t], t) for t in query.terms if stats.informative(t))
    chosen: list[str] = []
    postings = 0
    for holding, term in known:
        if postings + holding > POSTINGS_BUDGET:
            break
        chosen.append(term)
        postings += holding
    return chosen


def score(
    query: SearchQuery, stats: IndexStats, terms: Sequence[str]
) -> tuple[float, tuple[str, ...]]:
    """A document's normalised score (see the module's docstring) from its terms, and the
    query's terms it holds."""
    scale = sum(w * stats.idf(t) for t, w in query.terms.items() if stats.informative(t))
    if scale <= 0:
        return 0.0, ()
    counts = Counter(terms)
    norm = K1 * (1 - B + B * len(terms) / stats.average_length)
    total = 0.0
    matched: list[str] = []
    for weights in (query.terms, query.context):
        for term, weight in weights.items():
            tf = counts.get(term, 0)
            if tf and stats.informative(term):
                matched.append(term)
                total += weight * stats.idf(term) * tf * (K1 + 1) / (tf + norm)
    return min(total / scale, 1.0), tuple(matched)


def ranked(query: SearchQuery, stats: IndexStats, rows: list[Any]) -> list[SearchHit]:
    """Rows of (source, ref, group, scope, title, text, at, terms, ...) scored, filtered and
    ordered as `query` asks (newest first among equal scores)."""
    hits = []
    for source, ref, group, scope, title, text, at, terms, *_ in rows:
        value, matched = score(query, stats, terms.split())
        if value >= query.min_score and matched:
            doc = SearchDocument(source, ref, group, scope, title, text, float(at))
            hits.append(SearchHit(doc, value, matched))
    hits.sort(key=lambda h: (-h.score, -h.document.at))
    return hits[: query.limit]
