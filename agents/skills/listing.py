"""The skills block of the system prompt: what skills there are, and the `always` ones in full.

`skills_prompt(skills)` is a pure function of the available skills: sorted by name, each with
its description and the folder `exec` sees it at, in the `<available_skills>` form the Agent
Skills guide gives for Claude, then the body of each `always` skill. The same skills always
give the same text, byte for byte, so the block can sit in the cached part of the prompt.
Descriptions are escaped (a description cannot close the list); listing and bodies are capped,
the cut marked.
"""

from __future__ import annotations

from collections.abc import Sequence

from agents.skills.skill import Skill

MAX_LISTING_CHARS = 30_000
MAX_ALWAYS_CHARS = 20_000  # each always skill's body
MAX_ALWAYS_TOTAL = 40_000

INTRO = """\
## Skills
Skills are folders of instructions (with scripts and references at times) for particular \
tasks. When a task matches a skill's description, read it first with read_skill and follow \
it; run its scripts with exec, from its location. To write a skill, read skill-creator."""


def skills_prompt(skills: Sequence[Skill]) -> str:
    """The block for these skills ("" when none is available)."""
    usable = sorted((s for s in skills if s.available), key=lambda s: s.name)
    if not usable:
        return ""
    entries: list[str] = []
    used = 0
    for index, skill in enumerate(usable):
        entry = (
            f"<skill>\n<name>{skill.name}</name>\n"
            f"<description>{_escape(skill.description)}</description>\n"
            f"<location>{_escape(skill.location)}</location>\n</skill>"
        )
        if used + len(entry) > MAX_LISTING_CHARS:
            rest = len(usable) - index
            entries.append(f"[... {rest} more skills not listed: the list is capped]")
            break
        entries.append(entry)
        used += len(entry)
    parts = [INTRO, "<available_skills>\n" + "\n".join(entries) + "\n</available_skills>"]
    budget = MAX_ALWAYS_TOTAL
    for skill in (s for s in usable if s.always):
        body = _cap(skill.body().strip(), min(MAX_ALWAYS_CHARS, budget), skill.name)
        if not body:
            parts.append(f"[always-on skill {skill.name} omitted: the cap was reached]")
            continue
        budget -= len(body)
        parts.append(
            f'<skill_instructions name="{skill.name}" location="{_escape(skill.location)}">\n'
            f"{body}\n</skill_instructions>"
        )
    return "\n\n".join(parts)


def _escape(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def _cap(text: str, limit: int, name: str) -> str:
    if len(text) <= limit:
        return text
    if limit <= 200:
        return ""
    marker = (
        f"\n[... skill {name} cut: showed {limit} of {len(text)} characters; read_skill has all]"
    )
    return text[: limit - len(marker)] + marker
