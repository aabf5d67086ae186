"""`perch skills list [--json]`: every skill folder Perch finds, and whether the model gets it.

It reads the folders itself (the same sources, in the same order, as the daemon's next turn),
so it works without a running daemon and without the model key. Each skill shows its name,
source (workspace | path | bundled), state (available, unavailable with what it misses,
shadowed by an earlier folder of the same name, invalid with the reason) and folder;
`--json` prints a list of objects with `name`, `description`, `source`, `available`,
`missing`, `path`, `state`, and `error` or `shadowed_by` where they apply.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from bot.config.load import load_config
from bot.config.paths import config_path
from bot.tools.skills import skill_catalog, skill_record, why_not


def register(sub: Any, add: Any) -> None:
    """Add `perch skills` to the parser (called by `bot.operator.cli.build_parser`)."""
    skills = add("skills", cmd_skills, "the skills Perch finds and whether the model can use them")
    actions = skills.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="each skill: source, state, folder")
    listing.add_argument("--config", default=argparse.SUPPRESS, help="config file")
    listing.add_argument("--json", action="store_true", help="one JSON list, for scripts")


def cmd_skills(args: argparse.Namespace) -> int:
    config = load_config(config_path(args.config), lenient=True)
    catalog = skill_catalog(config)
    skills = catalog.skills()
    if args.json:
        print(json.dumps([skill_record(s) for s in skills], indent=2, ensure_ascii=False))
        return 0
    if not skills:
        print("No skills found.")
    width = max((len(s.name) for s in skills), default=4)
    for skill in skills:
        print(f"{skill.name:<{width}}  {skill.source.kind:<9}  {skill.state:<11}  {skill.path}")
        detail = why_not(skill) or skill.description
        print(f"{'':<{width}}  {detail[:200]}")
    for problem in catalog.problems():
        print(f"note: {problem}")
    return 0
