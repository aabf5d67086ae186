"""bot/'s floor plan holds (ARCHITECTURE.md): the kernel below, the hub above it, the wings
reaching the hub only through the kernel's ports, one object graph in bot/build.py.

Read from the source, as the imports a module runs (an import under `if TYPE_CHECKING:` is a
type, and allowed where the plan allows types; a function-local import counts).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ASSEMBLY = {"bot/build.py", "bot/daemon.py"}


def product_files() -> Iterator[Path]:
    for top in ("agents", "bot", "channels", "markup"):
        yield from sorted((ROOT / top).rglob("*.py"))


def name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def imports(path: Path, *, types_too: bool = False) -> set[str]:
    """The modules `path` imports (at run time only, unless `types_too`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typed: set[int] = set()
    if not types_too:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                typed.update(id(inner) for sub in node.body for inner in ast.walk(sub))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typed:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def reaching(files: list[Path], prefixes: tuple[str, ...], **kw: bool) -> dict[str, list[str]]:
    out = {}
    for path in files:
        hits = sorted(m for m in imports(path, **kw) if m.startswith(prefixes))
        if hits:
            out[name(path)] = hits
    return out


def test_no_file_outside_the_hub_runs_the_hub_but_the_assembly() -> None:
    files = [
        p for p in product_files() if not name(p).startswith("bot/hub/") and name(p) not in ASSEMBLY
    ]
    assert reaching(files, ("bot.hub",)) == {}


def test_the_kernel_stands_below_the_hub_and_every_wing() -> None:
    files = sorted((ROOT / "bot" / "kernel").rglob("*.py"))
    above: tuple[str, ...] = ("bot.hub", "bot.cron", "bot.operator", "bot.web", "bot.cluster")
    above += ("bot.media",)
    above += ("bot.recall", "bot.tools", "bot.build", "bot.daemon", "bot.sessions")
    assert reaching(files, above) == {}


def test_the_hub_never_imports_the_wings_that_drive_it() -> None:
    files = sorted((ROOT / "bot" / "hub").rglob("*.py"))
    above = ("bot.cron", "bot.operator", "bot.web", "bot.build", "bot.daemon")
    assert reaching(files, above, types_too=True) == {}


def test_no_config_section_imports_the_schema_not_even_for_a_type() -> None:
    schema_imports = imports(ROOT / "bot" / "config" / "schema.py")
    sections = [
        p
        for p in sorted((ROOT / "bot" / "config").glob("*.py"))
        if f"bot.config.{p.stem}" in schema_imports
    ]
    assert len(sections) >= 4, "schema.py imports its sections"
    assert reaching(sections, ("bot.config.schema",), types_too=True) == {}


def test_the_turn_machinery_is_made_in_build_only() -> None:
    made: dict[str, set[str]] = {}
    for path in product_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            func = node.func if isinstance(node, ast.Call) else None
            if isinstance(func, ast.Name) and func.id in ("TurnRunner", "AgentLoop"):
                made.setdefault(func.id, set()).add(name(path))
    assert made == {"TurnRunner": {"bot/build.py"}, "AgentLoop": {"bot/build.py"}}
