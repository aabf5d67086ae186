"""Checks on the shape of a parsed config file before any key is validated.

A YAML file nested thousands deep would exhaust the parser's or the validator's recursion;
`deeper_than` measures depth without recursing, and `too_deep` words the one-line error.
"""

from __future__ import annotations

from pathlib import Path

MAX_NESTING = 32
"""Deepest nesting of mappings and lists a config file may have (Perch's own keys use 5)."""


def too_deep(path: Path) -> str:
    return (
        f"{path}: nested more than {MAX_NESTING} levels deep, which no Perch key is; "
        "compare its indentation with the shipped config.yaml"
    )


def deeper_than(tree: object, limit: int) -> bool:
    """True when `tree` nests mappings/lists more than `limit` levels (no recursion)."""
    stack: list[tuple[object, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth >= limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return False
