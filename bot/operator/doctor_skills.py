"""`perch doctor` lines about skills and `web_search`.

Skills: one line with the counts, a warning per skill that is not usable (what it misses,
or why it is invalid) and per source folder that cannot be read; a bad skill is a warning, not
a failure, since the daemon runs on without it. Web search: off until configured; configured,
a missing key fails without asking anyone, and with a key (or for searxng, which needs none)
one live query shows the provider answers.
"""

from __future__ import annotations

from agents.tools.web_search import SearchFailed, WebSearchTool
from bot.config.schema import Config
from bot.operator.checks import Check
from bot.tools.skills import skill_catalog, summary, why_not


def skill_checks(config: Config) -> list[Check]:
    catalog = skill_catalog(config)
    skills = catalog.skills()
    checks = [Check(True, "skills", summary(skills))]
    for skill in skills:
        if not skill.available and skill.shadowed_by is None:
            fix = "fix its SKILL.md (perch skills list shows the reason)"
            if skill.doc is not None:
                fix = "install what it misses, or remove the skill"
            checks.append(
                Check(
                    True, f"skill {skill.name}", f"{skill.path}: {why_not(skill)}", fix, warn=True
                )
            )
    for problem in catalog.problems():
        checks.append(Check(True, "skills", problem, "check skills.paths in the config", warn=True))
    return checks


async def search_check(config: Config) -> Check:
    search = config.agent.web_search
    if search.provider is None:
        return Check(True, "web_search", "off (agent.web_search.provider is not set)")
    tool = WebSearchTool(
        search.provider,
        api_key=search.api_key,
        base_url=search.base_url,
        max_results=1,
        timeout_s=min(search.timeout_s, 15),
    )
    unset = any(note.startswith("agent.web_search.api_key ") for note in config.unresolved)
    if tool.provider.needs_key and (unset or not search.api_key):
        return Check(
            False,
            "web_search",
            f"{search.provider} needs an API key and agent.web_search.api_key is not set",
            "set it (e.g. api_key: ${BRAVE_API_KEY}) or remove agent.web_search",
        )
    try:
        hits = await tool.search("perch doctor", 1)
    except SearchFailed as exc:
        return Check(
            False, "web_search", str(exc).removeprefix("web_search: "), _fix(search.provider)
        )
    return Check(
        True, "web_search", f"{search.provider} at {tool.base_url} answered ({len(hits)} result)"
    )


def _fix(provider: str) -> str:
    if provider == "searxng":
        return "check agent.web_search.base_url and that json is in its search.formats"
    return "check agent.web_search.api_key and base_url"
