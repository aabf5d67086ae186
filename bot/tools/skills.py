"""The skills as the daemon configures them, and how operators and chats read the list.

`skill_catalog(config)` looks in `<workspace>/skills` first, then each `skills.paths` folder
(relative to the config file), then the skills Perch ships; exec sees skills outside the
workspace at `/skills/<name>` when it runs under bubblewrap (else at their real path).
`skill_record` is one skill as `perch skills list --json` prints it; `summary` and
`chat_listing` are the lines `perch status`, `perch doctor` and `/skills` show.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agents.skills.catalog import MOUNT_ROOT, SkillCatalog
from agents.skills.skill import BUNDLED_DIR, Skill, SkillSource
from bot.config.schema import Config


def skill_sources(config: Config) -> list[SkillSource]:
    return [
        SkillSource("workspace", config.workspace, ("skills",)),
        *(SkillSource("path", config.resolve(path)) for path in config.skills.paths),
        SkillSource("bundled", BUNDLED_DIR),
    ]


def skill_catalog(config: Config) -> SkillCatalog:
    exec_cfg = config.agent.exec
    sandboxed = exec_cfg.enabled and exec_cfg.sandbox != "none"  # auto needs bwrap too
    return SkillCatalog(
        skill_sources(config),
        workspace=config.workspace,
        mount_root=MOUNT_ROOT if sandboxed else None,
        search_above=config.skills.search_above,
    )


def skill_record(skill: Skill) -> dict[str, Any]:
    """One skill for `perch skills list --json`."""
    record: dict[str, Any] = {
        "name": skill.name,
        "description": skill.description,
        "source": skill.source.kind,
        "available": skill.available,
        "missing": list(skill.missing),
        "path": str(skill.path),
        "state": skill.state,
    }
    if skill.doc is not None:
        record["always"] = skill.always
        record["location"] = skill.location
    if skill.error:
        record["error"] = skill.error
    if skill.shadowed_by is not None:
        record["shadowed_by"] = str(skill.shadowed_by)
    return record


def summary(skills: Sequence[Skill]) -> str:
    """`3 available (a, b, c), 1 unavailable, 1 invalid` (states with none are left out)."""
    counts: dict[str, list[str]] = {}
    for skill in skills:
        counts.setdefault(skill.state, []).append(skill.name)
    parts = []
    for state in ("available", "unavailable", "invalid", "shadowed"):
        names = counts.get(state, [])
        if not names:
            continue
        shown = f" ({', '.join(names[:8])}{', ...' if len(names) > 8 else ''})"
        parts.append(f"{len(names)} {state}{shown if state == 'available' else ''}")
    return ", ".join(parts) or "none"


def why_not(skill: Skill) -> str:
    """Why a skill is not offered to the model ("" when it is)."""
    if skill.error:
        return skill.error
    if skill.shadowed_by is not None:
        return f"hidden by {skill.shadowed_by} (the same name, looked at first)"
    if skill.missing:
        return "missing " + ", ".join(skill.missing)
    return ""


def chat_listing(skills: Sequence[Skill], limit: int = 40) -> str:
    """The answer to /skills."""
    usable = [s for s in skills if s.available]
    others = [s for s in skills if not s.available]
    if not skills:
        return "No skills yet. Ask me to write one (I use the skill-creator skill for that)."
    lines = [f"Skills I can use ({len(usable)}):" if usable else "No skill is usable right now."]
    for skill in usable[:limit]:
        text = skill.description
        lines.append(f"- {skill.name}: {text[:120] + '…' if len(text) > 120 else text}")
    if others:
        lines.append("Not usable:")
        for skill in others[:limit]:
            lines.append(f"- {skill.name} ({skill.source.kind}): {why_not(skill)}")
    return "\n".join(lines)
