"""`perch memory search|rebuild` as control operations: the search index, for the operator.

Both run where the store is: in the daemon over its control socket, or in the CLI's own
process when no daemon runs (the model key is never needed). A search first brings the
memory files and skills up to date (`SearchIndex.refresh`), then shows every scope (the
operator sees what each chat may recall, labelled with whose it is), best first, each hit
with its score, source, where it came from and when. A rebuild makes the whole index again
from the workspace and the store, and the embeddings' vectors too when they are configured.
Both rank as the daemon does: by words and vectors together when `agent.recall.embeddings`
names a provider.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from bot.fleet.search_scope import AgentSearch
from bot.operator.reply import OpContext, Reply
from bot.recall.index import SearchIndex
from bot.recall.visibility import describe
from bot.store.search_rows import SOURCES, SearchHit, SearchQuery
from bot.store.search_text import snippet
from bot.tools.skills import skill_catalog

MAX_LIMIT = 100


def _index(ctx: OpContext) -> SearchIndex:
    """The index as the daemon's (with its embeddings when configured); close it after use.
    With several agents (`agents:`), the main agent's part of it."""
    config = ctx.config
    seen = AgentSearch(ctx.store, config.agent.id, main=True, alone=not config.agents)
    return SearchIndex.from_config(config, seen, skill_catalog(config))


def _where(hit: SearchHit) -> str:
    doc = hit.document
    if doc.source == "sessions":
        return f"{describe(doc.scope)} ({doc.title})"
    if doc.source == "skills":
        return f"skill {doc.ref}"
    return doc.title


def _when(at: float) -> str:
    return datetime.fromtimestamp(at).astimezone().strftime("%Y-%m-%d %H:%M") if at else ""


async def op_memory_search(ctx: OpContext, args: dict[str, Any]) -> Reply:
    query = str(args.get("query") or "").strip()
    if not query:
        return Reply(2, err="usage: perch memory search QUERY\n")
    sources = tuple(s for s in args.get("sources") or SOURCES if s in SOURCES)
    limit = args.get("limit", 10)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        return Reply(2, err=f"perch memory search: --limit must be 1 to {MAX_LIMIT}\n")
    min_score = float(args.get("min_score") or 0.0)
    asked = SearchQuery.of(query, sources=sources, scopes=None, limit=limit, min_score=min_score)
    if ctx.live is not None:
        await ctx.live.settle_index()  # the daemon's runs not written yet
    index = _index(ctx)
    try:
        hits = await index.search(asked)
    finally:
        await index.aclose()
    if args.get("json"):
        records = [
            {
                "score": round(h.score, 4),
                "source": h.document.source,
                "where": _where(h),
                "scope": h.document.scope,
                "at": h.document.at or None,
                "text": h.document.text,
            }
            for h in hits
        ]
        return Reply(0, json.dumps(records, indent=1, ensure_ascii=False) + "\n")
    if not hits:
        return Reply(1, f"Nothing in the index matches {query!r}.\n")
    lines = []
    for hit in hits:
        when = _when(hit.document.at)
        lines.append(
            f"{hit.score:.2f}  {hit.document.source:<8}  {_where(hit)}{', ' + when if when else ''}"
        )
        lines.append(f"      {snippet(hit.document.text, hit.matched, 300)}")
    return Reply(0, "\n".join(lines) + "\n")


async def op_memory_rebuild(ctx: OpContext, args: dict[str, Any]) -> Reply:
    if ctx.live is not None:
        await ctx.live.settle_index()  # written now, not again after the rebuild
    index = _index(ctx)
    try:
        counts = await index.rebuild()
    finally:
        await index.aclose()
    parts = [f"{counts.get(source, 0):,} {name}" for source, name in
             (("memory", "memory notes"), ("sessions", "messages"), ("skills", "skills"))]  # fmt: skip
    if "vectors" in counts:  # agent.recall.embeddings: every note and skill embedded again
        parts.append(f"{counts['vectors']:,} embedded")
    return Reply(0, f"Rebuilt the search index: {', '.join(parts)}.\n")
