"""`skill_search {query}`: the skills that fit a task, when there are too many to list.

In search mode (`agents/skills/listing.py`: more usable skills than `skills.search_above`, or
than the prompt's list holds) the prompt lists only the `always` skills; this tool returns
the best matches for a few words, each with its description and where exec sees it, from
the search index (`SkillFinder`, the daemon's `bot/recall/index.py`). `SkillSearchTools` is
the tool provider that offers it exactly while the catalog is in search mode, so the tools
of a small skill set stay as they were. `read_skill` reads what it found.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from agents.skills.catalog import SkillCatalog
from agents.tools.base import Tool, ToolContext, ToolError, ToolResult

DEFAULT_LIMIT = 5
MAX_LIMIT = 20
MAX_QUERY_CHARS = 500


class SkillFinder(Protocol):
    async def find_skills(self, query: str, limit: int) -> list[tuple[str, float]]:
        """Skill names matching `query`, best first, with their scores (0..1)."""


class SkillSearchTool:
    name = "skill_search"
    description = (
        "Find skills for a task when the Skills section says there are too many to list: a "
        "few words about what you want to do; returns the best matching skills with their "
        "descriptions. Then read one with read_skill."
    )
    input_schema: dict[str, Any] = {  # noqa: RUF012 (read-only schema, as the other tools')
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What you want to do, in a few words."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "description": f"How many skills at most (default {DEFAULT_LIMIT}).",
            },
        },
        "required": ["query"],
    }

    def __init__(self, catalog: SkillCatalog, finder: SkillFinder) -> None:
        self.catalog = catalog
        self.finder = finder

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("missing argument 'query': a few words about the task")
        limit = args.get("limit", DEFAULT_LIMIT)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise ToolError(f"argument 'limit' must be an integer from 1 to {MAX_LIMIT}")
        found = await self.finder.find_skills(query[:MAX_QUERY_CHARS], limit)
        usable = {skill.name: skill for skill in self.catalog.available()}
        lines = []
        for name, score in found:
            skill = usable.get(name)
            if skill is not None:
                lines.append(
                    f"- {skill.name} (match {score:.2f}, at {skill.location}): {skill.description}"
                )
        if not lines:
            return ToolResult(
                f"No skill matches {query.strip()!r}. Try other words (what the task does, not "
                "how), or go on without a skill."
            )
        return ToolResult("\n".join([*lines, "Read one with read_skill {name} before using it."]))


class SkillSearchTools:
    """The `ToolProvider` offering `skill_search` while the catalog is in search mode."""

    def __init__(self, catalog: SkillCatalog, finder: SkillFinder) -> None:
        self.catalog = catalog
        self.tool = SkillSearchTool(catalog, finder)

    @property
    def generation(self) -> int:
        return int(self.catalog.search_mode())

    def tools(self) -> Sequence[Tool]:
        return [self.tool] if self.catalog.search_mode() else []
