"""`perch mcp list` and `perch mcp add --json`.

`perch mcp list` shows each configured server, its state and its tools. With the daemon
running it asks the daemon over the control socket (`mcp.list`, answered from its live state,
so it agrees with `perch status`); otherwise it connects to each enabled server for a moment
(at most `PROBE_TIMEOUT_S`) and stops them again. `perch mcp add --json` takes the
`mcpServers` block other MCP clients use (`{"mcpServers": {"name": {"command": ..., "args":
[...], "env": {...}}}}`, a `{"name": {...}}` mapping, or one server's object with a NAME) from
the argument, a file (`@path`) or stdin (`-`), checks each server as the config would, and
writes them under `mcp.servers` structurally, comments kept, the old file kept as a backup.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bot.config.errors import ConfigError
from bot.config.load import load_config, parse_config
from bot.config.mcp import McpConfig
from bot.config.paths import config_path, edited_config_path, socket_path
from bot.operator.control_client import call
from bot.operator.onboard_files import config_template, config_text, set_key, write_config
from bot.operator.ops_mcp import probe_reply

# Keys of other clients' server entries, and what they are here.
_SAME = ("command", "args", "env", "cwd", "url", "headers")
_IGNORED = ("alwaysAllow", "autoApprove", "timeout", "description", "transportType")


def register(sub: Any, add: Any) -> None:
    """Add `perch mcp` to the parser (called by `bot.operator.cli.build_parser`)."""
    mcp = add("mcp", cmd_mcp, "the configured MCP servers, their state and their tools")
    actions = mcp.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="each server, its state and its tools")
    listing.add_argument("--config", default=argparse.SUPPRESS, help="config file")
    adding = actions.add_parser(
        "add", help="add servers from an mcpServers JSON block, as other MCP clients take it"
    )
    adding.add_argument("name", nargs="?", help="the server's name, for a single server's JSON")
    adding.add_argument(
        "--json", required=True, metavar="JSON|@FILE|-", help="the JSON, a file, or - for stdin"
    )
    adding.add_argument("--replace", action="store_true", help="replace servers of the same name")
    adding.add_argument("--config", default=argparse.SUPPRESS, help="config file")


def cmd_mcp(args: argparse.Namespace) -> int:
    if args.action == "add":
        return _add(args)
    config = load_config(config_path(getattr(args, "config", None)), lenient=True)
    if not config.mcp.servers:
        print("No MCP servers configured (mcp.servers in the config file).")
        return 0
    reply = asyncio.run(call(socket_path(config), "mcp.list", {}))
    if reply is None:  # no daemon answers: look for ourselves
        reply = asyncio.run(probe_reply(config))
    sys.stdout.write(reply.out)
    sys.stderr.write(reply.err)
    return reply.code


def _add(args: argparse.Namespace) -> int:
    path = edited_config_path(getattr(args, "config", None))
    try:
        servers = translate(_read_json(args.json), args.name)
    except ValueError as exc:
        print(f"perch mcp add: {exc}", file=sys.stderr)
        return 2
    tree = config_template(path)
    existing = (tree.get("mcp") or {}).get("servers") or {}
    clash = [name for name in servers if name in existing]
    if clash and not args.replace:
        print(
            f"perch mcp add: mcp.servers already has {', '.join(clash)}; pass --replace",
            file=sys.stderr,
        )
        return 1
    for name, server in servers.items():
        set_key(tree, f"mcp.servers.{name}", server)
    style = getattr(tree["mcp"]["servers"], "fa", None)  # `servers: {}` in the template
    if style is not None:
        style.set_block_style()
    try:  # the whole file as Perch will read it, before anything is written
        parse_config(config_text(tree), path, lenient=True)
    except ConfigError as exc:
        print(f"perch mcp add: {exc}", file=sys.stderr)
        return 78
    backup = write_config(path, tree)
    kept = f" (the old one is {backup.name})" if backup else ""
    print(f"Added {', '.join(servers)} to mcp.servers in {path}{kept}.")
    print("Restart Perch to start them; check them with: perch mcp list")
    return 0


def _read_json(source: str) -> Any:
    if source == "-":
        text = sys.stdin.read()
    elif source.startswith("@"):
        try:
            text = Path(source[1:]).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"--json {source}: {exc.strerror}") from None
    else:
        text = source
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--json is not JSON: {exc.msg} at line {exc.lineno}") from None


def translate(data: Any, name: str | None) -> dict[str, dict[str, Any]]:
    """Other clients' server entries as `mcp.servers` entries, each checked as the config is."""
    if not isinstance(data, dict):
        raise ValueError("--json must be an object")
    if "mcpServers" in data:
        entries = data["mcpServers"]
    elif name is not None:
        entries = {name: data}
    elif "command" in data or "url" in data:
        raise ValueError("one server's JSON needs its NAME: perch mcp add NAME --json ...")
    else:
        entries = data
    if not isinstance(entries, dict) or not entries:
        raise ValueError('no servers found (expected {"mcpServers": {"name": {...}}})')
    out = {str(key): _entry(str(key), value) for key, value in entries.items()}
    try:
        McpConfig.model_validate({"servers": out})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"] if not str(p).startswith("function-"))
        raise ValueError(f"{where}: {str(error['msg']).removeprefix('Value error, ')}") from None
    return out


def _entry(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"server {name!r} must be an object")
    kind = str(value.get("type", "")).lower()
    if kind == "sse":
        raise ValueError(
            f"server {name!r} uses the old SSE transport; Perch speaks Streamable HTTP (give "
            "the server's /mcp URL) or stdio"
        )
    unknown = [k for k in value if k not in (*_SAME, *_IGNORED, "type", "disabled")]
    if unknown:
        raise ValueError(f"server {name!r}: unknown key {unknown[0]!r}")
    entry = {key: value[key] for key in _SAME if key in value and value[key] not in (None, {}, [])}
    if value.get("disabled"):
        entry["enabled"] = False
    return entry
