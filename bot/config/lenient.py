"""Lenient config loads: a section whose secret is missing is switched off, not fatal.

Commands such as `perch status`, `pairing` and `cron` load the config without the secrets
(`load_config(..., lenient=True)`): an unset `${VAR}` or unreadable secret file stays as its
literal text. A plug-in's options may refuse such text once the section is enabled (a token
of the wrong shape); `relax` then sets `enabled: false` on the innermost section that both
failed and holds an unresolved key, so the command runs on, and says so in the notes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_core import ErrorDetails


def relax(
    data: dict[str, Any], unresolved: Sequence[str], errors: list[ErrorDetails], notes: list[str]
) -> bool:
    """Switch off the sections behind `errors` that hold an unresolved key; True if any was."""
    changed = False
    for error in errors:
        loc = [str(part) for part in error["loc"] if not str(part).startswith("function-")]
        for depth in range(len(loc), 0, -1):
            where = ".".join(loc[:depth])
            node = _node(data, loc[:depth])
            holds = any(p == where or p.startswith(where + ".") for p in unresolved)
            if holds and isinstance(node, dict) and node.get("enabled", False) is not False:
                node["enabled"] = False
                notes.append(f"{where} is treated as disabled here (its secrets are not set)")
                changed = True
                break
    return changed


def _node(data: Any, keys: Sequence[str]) -> Any:
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data
