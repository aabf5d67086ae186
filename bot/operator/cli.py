"""The `perch` command: run, init, doctor, status, sessions, pairing, cron, chat, send, mcp,
skills, memory.

The config path is `--config PATH`, else `$PERCH_CONFIG`, else in a checkout
`./config.local.yaml` if it exists and `./config.yaml` if not, else
`$XDG_CONFIG_HOME/perch/config.yaml` (`bot.config.paths`). A config problem prints one
line and exits 78 (EX_CONFIG), which systemd is told not to restart on: so do a workspace
that holds the state directory, the config or a secret (`bot.config.layout`), and exec
enabled where its sandbox cannot start. `perch run` sets the umask to 077, so everything the
daemon writes is private to its user, under systemd or not.
Only `run` (and `chat` without a running daemon) need the model key: every other command
loads the config leniently, so an unset `${VAR}` never stops it (`doctor` reports it).
Heavy imports (the Anthropic SDK, channel libraries) happen only in the commands that need
them, so `perch status` and `perch pairing` answer at once. The commands that talk to the
daemon live in `bot/operator/control_cli.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from bot.config.errors import EXIT_CONFIG, ConfigError
from bot.config.layout import layout_warnings, require_apart
from bot.config.load import load_config, require_api_key
from bot.config.paths import config_path, log_path, template_text
from bot.config.redact import scrub
from bot.operator import (
    control_cli,
    cron_cli,
    mcp_cli,
    memory_cli,
    onboard,
    skills_cli,
    store_cli,
)
from bot.operator.redacted_output import redact_output
from bot.store.rows import SchemaTooNew

# Each adds its subcommands to the parser: register(subparsers, add).
COMMANDS = (
    control_cli.register,
    cron_cli.register,
    onboard.register,
    mcp_cli.register,
    memory_cli.register,
    skills_cli.register,
    store_cli.register,
)
# Commands that hold a conversation on this terminal keep its real streams.
TALKING = frozenset({"run", "chat", "onboard"})


def cmd_run(args: argparse.Namespace) -> int:
    from bot.process.logs import divert_stderr, ensure_standard_fds, restore_stderr, setup_logging

    ensure_standard_fds()  # `perch run <&-`: a closed stdin is /dev/null from here on
    config = load_config(config_path(args.config))
    require_api_key(config)
    require_apart(config)  # a workspace holding the state, config or secrets: exit 78
    from bot.daemon import Daemon, StartupError
    from bot.process.hardening import private_umask

    private_umask()  # data, logs and the socket are the daemon user's alone, unit or not

    # The console chats on this terminal: the log (and children's stderr) goes to a file.
    terminal = None
    log_file = config.resolve(config.logging.file) if config.logging.file else None
    if "console" in config.channels.enabled() and os.isatty(0) and os.isatty(1):
        log_file = log_path(config)
        terminal = divert_stderr(log_file)
        print(f"perch: logging to {log_file} while the console uses this terminal", file=terminal)
    setup_logging(
        config.logging.level,
        config.logging.format,
        config.secret_values(),
        file=None if terminal is not None else log_file,
    )
    for warning in layout_warnings(config):
        logging.getLogger("perch").warning("layout: %s", warning)
    try:
        with asyncio.Runner(loop_factory=event_loop_factory(config.gateway.event_loop)) as runner:
            runner.run(Daemon(config).run())
    except StartupError as exc:  # what was opened is closed again; one line, no traceback
        print(f"perch: {scrub(str(exc), config.secret_values())}", file=terminal or sys.stderr)
        # A config that cannot work (exec on without a working sandbox): systemd must not retry.
        # Nor a database a newer Perch upgraded: restarting this version cannot help.
        return EXIT_CONFIG if isinstance(exc.__cause__, ConfigError | SchemaTooNew) else 1
    finally:
        if terminal is not None:
            restore_stderr(terminal)
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
    from bot.kernel.workspace import seed_workspace

    path = config_path(args.config)
    if not path.exists():  # a fresh clone or machine: start from the shipped template
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template_text(), encoding="utf-8")
        print(f"Wrote {path} from the shipped template (every key, with its default).")
    config = load_config(path, lenient=True)
    copied = seed_workspace(config.workspace)
    config.db_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # as perch run's
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
    from bot.operator.doctor import doctor

    return doctor(config)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="perch", description="Perch, your self-hosted assistant")
    parser.add_argument("--version", action="version", version=f"perch {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, func: Callable[[argparse.Namespace], int], text: str) -> Any:
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument(
            "--config",
            help="config file (default: $PERCH_CONFIG; in a checkout ./config.local.yaml "
            "if it exists, else ./config.yaml; else ~/.config/perch/config.yaml)",
        )
        p.set_defaults(func=func)
        return p

    add("run", cmd_run, "start the daemon in the foreground")
    add("init", cmd_init, "seed the workspace from bootstrap/ and create the data folder")
    add("doctor", cmd_doctor, "check config, credentials, model, channels, database, workspace")
    for register in COMMANDS:
        register(sub, add)
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
    if args.command != "run":  # one-shot commands print results, not log lines
        logging.getLogger().addHandler(logging.NullHandler())
    if args.command not in TALKING:  # what it prints passes the one redactor
        redact_output()
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"perch: {scrub(str(exc))}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
