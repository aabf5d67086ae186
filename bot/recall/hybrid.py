"""One ranking out of two: the words' (BM25, `bot/store/search_rows.py`) and the vectors'.

`blend` takes the text hits (the store's candidates for the query's words, any score) and
the nearest documents by their vectors (`bot/recall/vectors.py`, already limited to what the
chat may see), and scores each document of either once:
- a document with a vector: `(1 - weight) * text + weight * closeness(cosine)`, its text
  score 0 when its words did not match;
- a document without one (a conversation's message: those stay text-ranked; a note whose
  vector is still being made): its text score alone.
`closeness` maps a cosine similarity to 0..1 along the configured `floor` (unrelated: 0) and
`ceiling` (the same thing: 1), so a score stays a share of "about everything the message
asks" and one `min_score` still keeps off-topic messages from recalling anything. A note
found by its vector alone but outside the words' `CANDIDATES` counts 0 for its words (its
words matched less than the candidates' did, if at all). Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bot.store.search_rows import SearchDocument, SearchHit, SearchQuery

Key = tuple[str, str]  # (source, ref)


def closeness(cosine: float, floor: float, ceiling: float) -> float:
    """A cosine similarity on 0..1: 0 at or below `floor`, 1 at or above `ceiling`."""
    return min(max((cosine - floor) / (ceiling - floor), 0.0), 1.0)


def blend(
    query: SearchQuery,
    text_hits: Sequence[SearchHit],
    nearest: Sequence[tuple[SearchDocument, float]],
    cosine_of: Callable[[SearchDocument], float | None],
    *,
    weight: float,
    floor: float,
    ceiling: float,
) -> list[SearchHit]:
    """The hits `query` asks for (its `min_score`, best first, newest first among equals,
    at most its `limit`) out of both candidate lists."""
    texts: dict[Key, SearchHit] = {(h.document.source, h.document.ref): h for h in text_hits}
    docs: dict[Key, SearchDocument] = {k: h.document for k, h in texts.items()}
    cosines: dict[Key, float | None] = {}
    for doc, near in nearest:
        key: Key = (doc.source, doc.ref)
        docs.setdefault(key, doc)
        cosines[key] = near
    hits: list[SearchHit] = []
    for key, doc in docs.items():
        text = texts.get(key)
        cosine: float | None
        text_score = text.score if text is not None else 0.0
        cosine = cosines[key] if key in cosines else cosine_of(doc)
        if cosine is None:
            value = text_score
        else:
            value = (1 - weight) * text_score + weight * closeness(cosine, floor, ceiling)
        if value >= query.min_score and value > 0:
            hits.append(SearchHit(doc, value, text.matched if text is not None else ()))
    hits.sort(key=lambda h: (-h.score, -h.document.at))
    return hits[: query.limit]
