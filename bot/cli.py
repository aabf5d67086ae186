"""The `perch` command: run, init, doctor, status, sessions, pairing, cron, mcp.

The config path is `--config PATH`, else `./config.yaml`, else `$PERCH_CONFIG`. A config
problem prints one line and exits 78 (EX_CONFIG), which systemd is told not to restart on.
Heavy imports (the Anthropic SDK, channel libraries) happen only in the commands that need
them, so `perch status` and `perch pairing` answer at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bot.config import EXIT_CONFIG, Config, ConfigError, load_config, require_api_key
from bot.mcp_cli import daemon_mcp_lines
from bot.mcp_config import mcp_secrets


def config_path(given: str | None) -> Path:
    if given:
        return Path(given)
    local = Path("config.yaml")
    if local.exists():
        return local
    env = os.environ.get("PERCH_CONFIG")
    return Path(env) if env else local


def _load(args: argparse.Namespace) -> Config:
    return load_config(config_path(args.config))


def cmd_run(args: argparse.Namespace) -> int:
    config = _load(args)
    require_api_key(config)
    from bot.daemon import Daemon, StartupError
    from bot.logs import setup_logging

    setup_logging(config.logging.level, config.logging.format, _secrets(config))
    try:
        asyncio.run(Daemon(config).run())
    except StartupError as exc:  # what was opened is closed again; one line, no traceback
        print(f"perch: {exc}", file=sys.stderr)
        return 1
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    from bot.workspace import seed_workspace

    config = _load(args)
    copied = seed_workspace(config.workspace)
    config.db_path.parent.mkdir(parents=True, exist_ok=True)
    if copied:
        print(f"Seeded {config.workspace} with: {', '.join(copied)}")
    else:
        print(f"{config.workspace} already has every template; nothing changed.")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    path = config_path(args.config)
    try:
        config = load_config(path)
    except ConfigError as exc:
        print(f"FAIL  config: {exc}")
        return EXIT_CONFIG
    from bot.doctor import doctor

    return doctor(config)


def running_daemon(config: Config) -> dict[str, Any] | None:
    """What the running daemon wrote to status.json, or None when none is running."""
    from bot.daemon import status_path

    path = status_path(config)
    try:
        daemon = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(daemon, dict) or not _alive(int(daemon.get("pid", 0))):
        return None
    return daemon


def cmd_status(args: argparse.Namespace) -> int:
    config = _load(args)
    daemon = running_daemon(config)
    if daemon is None:
        print("Perch is not running.")
    else:
        since = time.strftime("%Y-%m-%d %H:%M", time.localtime(daemon["started_at"]))
        print(f"Perch is running (pid {daemon['pid']}, since {since}), model {daemon['model']}")
        for name, ch in daemon.get("channels", {}).items():
            state = "up" if ch["up"] else "DOWN"
            print(f"  channel {name}: {state} {ch.get('detail', '')}".rstrip())
        print(f"  active runs: {daemon.get('active_runs', 0)}, queued: {daemon.get('queued', 0)}")
        for line in daemon_mcp_lines(daemon):
            print(line)
        for extra in ("next_heartbeat", "next_cron"):
            if daemon.get(extra):
                print(f"  {extra.replace('_', ' ')}: {daemon[extra]}")

    async def usage() -> None:
        from bot.store import StoreUnavailable, open_store, redact_url

        if not config.store.url and not config.db_path.exists():
            return
        try:
            store = await open_store(config.store_target)
        except StoreUnavailable as exc:
            print(f"  database: {redact_url(str(config.store_target))}: {exc}")
            return
        try:
            day = time.time() - (time.time() % 86400)
            today = await store.usage_since(day)
            print(
                f"  today (UTC): {today.input_tokens + today.cache_read_tokens} in / "
                f"{today.output_tokens} out tokens, ${today.cost_usd:.4f}"
            )
            from bot.instances import live_instance_lines

            for line in await live_instance_lines(store):
                print(f"  instance {line}")
        finally:
            await store.close()

    asyncio.run(usage())
    return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    config = _load(args)

    async def main() -> None:
        from bot.store import open_store

        store = await open_store(config.store_target)
        try:
            for s in await store.list_sessions(args.limit):
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.updated_at))
                print(f"{when}  ${s.cost_usd:8.4f}  {s.key}")
        finally:
            await store.close()

    asyncio.run(main())
    return 0


def cmd_pairing(args: argparse.Namespace) -> int:
    config = _load(args)

    async def main() -> int:
        from bot.store import open_store

        store = await open_store(config.store_target)
        try:
            if args.action == "list":
                requests = await store.pairing_requests(args.channel)
                if not requests:
                    print("No pending pairing requests.")
                for r in requests:
                    left = int((r.expires_at - time.time()) / 60)
                    name = f" ({r.sender_name})" if r.sender_name else ""
                    print(f"{r.channel:9} {r.code}  {r.sender_id}{name}  expires in {left} min")
                return 0
            if not args.channel or not args.code:
                print("usage: perch pairing approve <channel> <CODE>", file=sys.stderr)
                return 2
            approved = await store.pairing_approve(args.channel, args.code)
            if approved is None:
                print(
                    f"No pending code {args.code.upper()} on {args.channel} (expired or "
                    "mistyped?). See: perch pairing list",
                    file=sys.stderr,
                )
                return 1
            print(f"Approved {approved.sender_id} on {approved.channel}.")
            return 0
        finally:
            await store.close()

    return asyncio.run(main())


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _secrets(config: Config) -> list[str]:
    from channels.registry import secrets

    return [
        *(provider.api_key for _, provider in config.providers.items()),
        *secrets(config.channels),
        *mcp_secrets(config.mcp),
    ]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="perch", description="Perch, your self-hosted assistant")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, func: Callable[[argparse.Namespace], int], text: str) -> Any:
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("--config", help="config file (default ./config.yaml, then $PERCH_CONFIG)")
        p.set_defaults(func=func)
        return p

    add("run", cmd_run, "start the daemon in the foreground")
    add("init", cmd_init, "seed the workspace from bootstrap/ and create the data folder")
    add("doctor", cmd_doctor, "check config, credentials, model, channels, database, workspace")
    add("status", cmd_status, "what the running daemon is doing")
    s = add("sessions", cmd_sessions, "list conversations, most recent first")
    s.add_argument("--limit", type=int, default=50)
    p = add("pairing", cmd_pairing, "list or approve pairing codes of unknown DM senders")
    p.add_argument("action", choices=["list", "approve"])
    p.add_argument("channel", nargs="?")
    p.add_argument("code", nargs="?")
    from bot.cron_cli import register as register_cron
    from bot.mcp_cli import register as register_mcp

    register_cron(sub, add)
    register_mcp(sub, add)
    from bot.store_cli import register as register_store

    register_store(sub, add)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"perch: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
