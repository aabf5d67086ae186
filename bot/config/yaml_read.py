"""Reading config YAML defensively: aliases bounded, duplicate keys refused, 1.1 booleans noted.

`read_yaml(text)` composes the document first and checks the node graph before building any
Python object: aliases that would expand to more than `MAX_NODES` values (an "alias bomb",
minutes of CPU for whoever walks the result) or that refer to themselves are refused, and so
is a key written twice in one mapping (YAML keeps the last one silently), naming the key and
both lines. It notes where a YAML 1.1 boolean spelled `on`/`off`/`yes`/`no` stood, so a
validation error there can say "quote it" (an MCP server named `off` is the key `False`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_NODES = 20_000
"""Most values a config may expand to, aliases counted each time they are used (the shipped
config.yaml has about 400)."""

_BOOL_TAG = "tag:yaml.org,2002:bool"
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlProblem(ValueError):
    """The text is YAML that Perch refuses to read; the message says why and where."""


Path = tuple[Any, ...]


@dataclass(slots=True)
class ParsedYaml:
    data: Any
    # where a YAML 1.1 boolean was written as on/off/yes/no: path -> (the text, its line)
    spelled_bools: dict[Path, tuple[str, int]] = field(default_factory=dict)

    def bool_hint(self, loc: Path) -> str:
        """' (YAML reads ...; quote it)' when `loc` (or a key on the way) was such a boolean."""
        for end in range(len(loc), 0, -1):
            found = self.spelled_bools.get(tuple(loc[:end]))
            if found is not None:
                text, line = found
                value = str(text.lower() in ("on", "yes", "y")).lower()
                return (
                    f" (line {line}: YAML reads {text} as the boolean {value}; "
                    f"write '{text}' in quotes to mean the word)"
                )
        return ""


def read_yaml(text: str) -> ParsedYaml:
    """Parse one YAML document after the checks above; `YamlProblem` or `yaml.YAMLError`."""
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return ParsedYaml(None)
        parsed = ParsedYaml(None)
        _check(root, loader, parsed)
        parsed.data = loader.construct_document(root)
        return parsed
    finally:
        loader.dispose()


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check(root: Node, loader: yaml.SafeLoader, parsed: ParsedYaml) -> None:
    _expanded_size(root)
    seen: set[int] = set()
    stack: list[tuple[Node, Path]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue  # an alias: its content was checked where the anchor stands
        seen.add(id(node))
        if isinstance(node, ScalarNode):
            _note_bool(node, path, parsed)
        elif isinstance(node, SequenceNode):
            stack.extend((child, (*path, i)) for i, child in enumerate(node.value))
        elif isinstance(node, MappingNode):
            lines: dict[Any, int] = {}
            for key_node, value_node in node.value:
                key = _key(key_node, loader)
                if isinstance(key_node, ScalarNode) and key_node.value != "<<":
                    line = key_node.start_mark.line + 1
                    if key in lines:
                        where = ".".join(str(p) for p in (*path, key))
                        raise YamlProblem(
                            f"{where}: the key {key_node.value!r} is written twice (lines "
                            f"{lines[key]} and {line}); YAML would keep only the second, so "
                            "delete one"
                        )
                    lines[key] = line
                    _note_bool(key_node, (*path, key), parsed)
                stack.append((value_node, (*path, key)))


def _key(node: Node, loader: yaml.SafeLoader) -> Any:
    if not isinstance(node, ScalarNode):
        return f"<{type(node).__name__}>"
    try:
        key = loader.construct_object(node)
    except yaml.YAMLError:
        return node.value
    return key if isinstance(key, str | int | float | bool) or key is None else node.value


def _note_bool(node: ScalarNode, path: Path, parsed: ParsedYaml) -> None:
    if node.tag == _BOOL_TAG and node.value.lower() not in ("true", "false"):
        parsed.spelled_bools[path] = (node.value, node.start_mark.line + 1)


def _expanded_size(root: Node) -> None:
    """Count the values the document expands to (aliases each time), without recursion."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in _children(node))
            if sizes[key] > MAX_NODES:
                raise YamlProblem(
                    f"its aliases (*name) expand to more than {MAX_NODES} values, which no Perch "
                    "config needs (an alias bomb?); write the values out instead"
                )
            continue
        if key in sizes:
            continue
        if key in on_path:
            line = node.start_mark.line + 1
            raise YamlProblem(f"line {line}: an alias refers to the value that contains it")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
