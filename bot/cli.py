"""The `perch` command: run, init, doctor, status, sessions, pairing, cron, chat, send, mcp.

The config path is `--config PATH`, else `./config.yaml`, else `$PERCH_CONFIG`. A config
problem prints one line and exits 78 (EX_CONFIG), which systemd is told not to restart on.
Only `run` (and `chat` without a running daemon) need the model key: every other command
loads the config leniently, so an unset `${VAR}` never stops it (`doctor` reports it).
Heavy imports (the Anthropic SDK, channel libraries) happen only in the commands that need
them, so `perch status` and `perch pairing` answer at once. The commands that talk to the
daemon live in `bot/control_cli.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bot.config import EXIT_CONFIG, Config, ConfigError, load_config, require_api_key
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
    return load_config(config_path(args.config), lenient=True)


def cmd_run(args: argparse.Namespace) -> int:
    config = load_config(config_path(args.config))
    require_api_key(config)
    from bot.daemon import Daemon, StartupError
    from bot.logs import setup_logging

    setup_logging(
        config.logging.level,
        config.logging.format,
        _secrets(config),
        file=config.resolve(config.logging.file) if config.logging.file else None,
        quiet_stderr="console" in config.channels.enabled() and sys.stdin.isatty(),
    )
    try:
        with asyncio.Runner(loop_factory=event_loop_factory(config.gateway.event_loop)) as runner:
            runner.run(Daemon(config).run())
    except StartupError as exc:  # what was opened is closed again; one line, no traceback
        print(f"perch: {exc}", file=sys.stderr)
        return 1
    return 0


def event_loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The loop factory for `gateway.event_loop`: uvloop's, or None (asyncio's own), also
    when uvloop is not installed (it is a dependency on Linux and macOS only)."""
    if name != "uvloop":
        return None
    try:
        import uvloop
    except ImportError:
        logging.getLogger(__name__).info("uvloop is not installed; running on asyncio's loop")
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


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
        config = load_config(path, lenient=True)
    except ConfigError as exc:
        print(f"FAIL  config: {exc}")
        return EXIT_CONFIG
    from bot.doctor import doctor

    for missing in config.unresolved:
        print(f"FAIL  secret: {missing}")
    code = doctor(config)
    return 1 if config.unresolved and code == 0 else code


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
    parser.add_argument("--version", action="version", version=f"perch {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, func: Callable[[argparse.Namespace], int], text: str) -> Any:
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("--config", help="config file (default ./config.yaml, then $PERCH_CONFIG)")
        p.set_defaults(func=func)
        return p

    add("run", cmd_run, "start the daemon in the foreground")
    add("init", cmd_init, "seed the workspace from bootstrap/ and create the data folder")
    add("doctor", cmd_doctor, "check config, credentials, model, channels, database, workspace")
    from bot.control_cli import register as register_control
    from bot.cron_cli import register as register_cron
    from bot.mcp_cli import register as register_mcp
    from bot.onboard import register as register_onboard

    register_control(sub, add)
    register_cron(sub, add)
    register_onboard(sub, add)
    register_mcp(sub, add)
    from bot.store_cli import register as register_store

    register_store(sub, add)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("perch")
    except PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    for arg in given:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:  # bytes that are not UTF-8, decoded with surrogateescape
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            print(f"perch: argument {shown!r} is not valid UTF-8 text", file=sys.stderr)
            return 2  # argparse's code for a bad command line
    args = parser.parse_args(given)
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"perch: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
