"""The skills block of the system prompt: what skills there are, and the `always` ones in full.

`skills_prompt(skills, search_above)` is a pure function of the available skills: sorted by
name, each with its description and the folder `exec` sees it at, in the `<available_skills>`
form the Agent Skills guide gives for Claude, then the body of each `always` skill. The same
skills always give the same text, byte for byte, so the block can sit in the cached part of
the prompt. Descriptions are escaped (a description cannot close the list); bodies are capped,
the cut marked. Search mode: with more usable skills than `search_above` (0: no limit), or
more than the listing's cap holds, only the `always` skills are listed, and the block tells
the model to find the others with `skill_search` (`listed_in_full` says which mode).
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


SEARCH_INTRO = """\
## Skills
Skills are folders of instructions (with scripts and references at times) for particular \
tasks. There are {count} of them, too many to list: before a task that a skill could help \
with, find the right one with skill_search (a few words saying what you want to do), then \
read it with read_skill and follow it; run its scripts with exec, from its location. The \
skills below are always on. To write a skill, read skill-creator."""


def _entry(skill: Skill) -> str:
    return (
        f"<skill>\n<name>{skill.name}</name>\n"
        f"<description>{_escape(skill.description)}</description>\n"
        f"<location>{_escape(skill.location)}</location>\n</skill>"
    )


def _usable(skills: Sequence[Skill]) -> list[Skill]:
    return sorted((s for s in skills if s.available), key=lambda s: s.name)


def listed_in_full(skills: Sequence[Skill], search_above: int = 0) -> bool:
    """Whether every usable skill fits the prompt's list (else: search mode)."""
    usable = _usable(skills)
    if search_above and len(usable) > search_above:
        return False
    return sum(len(_entry(s)) + 1 for s in usable) <= MAX_LISTING_CHARS


def skills_prompt(skills: Sequence[Skill], search_above: int = 0) -> str:
    """The block for these skills ("" when none is available)."""
    usable = _usable(skills)
    if not usable:
        return ""
    if listed_in_full(usable, search_above):
        parts = [
            INTRO,
            "<available_skills>\n" + "\n".join(map(_entry, usable)) + "\n</available_skills>",
        ]
    else:
        always = [s for s in usable if s.always]
        parts = [SEARCH_INTRO.format(count=len(usable))]
        if always:
            listing = "\n".join(_entry(s) for s in always)[:MAX_LISTING_CHARS]
            parts.append("<available_skills>\n" + listing + "\n</available_skills>")
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
