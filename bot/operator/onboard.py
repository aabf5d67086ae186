"""`perch onboard`: set Perch up by answering questions, or by flags from a script.

Plain `input()` prompts (they work over SSH and with piped stdin); every answer can also be
given as a flag, and a question whose answer came as a flag is not asked. The wizard asks
for the model key and endpoint, which chat platforms to turn on and their secrets, the
owner's id on each (or pairing), and where secrets live: an env file (mode 0600) or a
systemd credentials directory (one 0600 file per secret). It checks the key and every
platform live (`bot.operator.doctor.run_checks`: the model's `count_tokens`, each platform's "who am
I"), writes `config.yaml` keeping its comments (`bot/onboard_files.py`), seeds the workspace
as `perch init` does, then runs `perch doctor`. Platforms are not named here: the channel
names and the secrets each one needs come from the config model and the `${VAR}` references
of the shipped `config.yaml`.

Re-running it edits: current values are the defaults, an existing `config.yaml` is only
changed after a yes (or `--yes`), and a copy of the old one is kept as `config.yaml.bak`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.config.errors import ConfigError
from bot.config.load import load_config
from bot.operator.onboard_files import (
    ENV_REF,
    config_template,
    config_text,
    read_env_file,
    write_config,
    write_credentials,
    write_env_file,
)
from channels import registry
from channels.options import ChannelPolicy

PROVIDER_KEY = "ANTHROPIC_API_KEY"
PROVIDER_URL = "ANTHROPIC_BASE_URL"
# The platforms strangers can write on (the console, your own terminal, needs no setup).
CHAT_CHANNELS = tuple(p.key for p in registry.plugins() if issubclass(p.options, ChannelPolicy))


class OnboardError(Exception):
    """Stops the wizard with one line for the person running it."""


@dataclass
class Answers:
    env: dict[str, str] = field(default_factory=dict)  # secret variable -> value
    channels: list[str] = field(default_factory=list)
    owners: dict[str, str] = field(default_factory=dict)  # channel -> owner id
    sets: dict[str, str] = field(default_factory=dict)  # dotted config key -> value
    secrets: str = "env"
    secrets_path: Path | None = None


class Asker:
    """Asks only what the flags left open; with `--yes`, never asks at all."""

    def __init__(self, interactive: bool, read: Callable[[str], str] = input) -> None:
        self.interactive = interactive
        self._read = read

    def ask(self, question: str, default: str = "", *, secret: bool = False) -> str:
        if not self.interactive:
            return default
        shown = ("(set, Enter keeps it)" if secret else default) if default else ""
        try:
            answer = self._read(f"{question}{f' [{shown}]' if shown else ''}: ").strip()
        except EOFError:
            raise OnboardError(
                "input ended before the setup was complete; nothing written"
            ) from None
        return answer or default

    def confirm(self, question: str, default: bool) -> bool:
        if not self.interactive:
            return default
        answer = self.ask(question + (" [Y/n]" if default else " [y/N]")).lower()
        return default if not answer else answer.startswith("y")


def register(sub: Any, add: Any) -> None:
    """Add `perch onboard` to the parser (called by `bot.operator.cli.build_parser`)."""
    p = add("onboard", cmd_onboard, "interactive setup: key, platforms, owner, secrets, doctor")
    p.add_argument("--api-key", help=f"model API key ({PROVIDER_KEY})")
    p.add_argument("--base-url", help="model API base URL (default https://api.anthropic.com)")
    p.add_argument(
        "--channels", help=f"platforms to enable, comma-separated: {', '.join(CHAT_CHANNELS)}"
    )
    p.add_argument("--env", action="append", default=[], metavar="VAR=VALUE", help="a secret")
    p.add_argument("--owner", action="append", default=[], metavar="CHANNEL:ID")
    p.add_argument("--pairing", action="store_true", help="no owner ids: approve by pairing")
    p.add_argument("--secrets", choices=["env", "credentials"], help="where secrets are kept")
    p.add_argument("--secrets-path", help="the env file or credentials directory")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="any other config key"
    )
    p.add_argument("--yes", action="store_true", help="ask nothing: flags and defaults only")
    p.add_argument("--no-doctor", action="store_true", help="don't run perch doctor at the end")


def cmd_onboard(args: argparse.Namespace) -> int:
    from bot.config.paths import config_path

    path = config_path(args.config)
    asker = Asker(interactive=not args.yes)
    try:
        return onboard(path, args, asker)
    except OnboardError as exc:
        print(f"perch onboard: {exc}", file=sys.stderr)
        return 1


def onboard(path: Path, args: argparse.Namespace, asker: Asker) -> int:
    data = config_template(path)
    answers = Answers(sets=_pairs(args.set, "--set"))
    earlier = Path(args.secrets_path) if args.secrets_path else path.parent / "perch.env"
    known = read_env_file(earlier)  # a re-run offers the earlier answers as defaults
    given = _pairs(args.env, "--env")
    if args.api_key:
        given[PROVIDER_KEY] = args.api_key
    if args.base_url:
        given[PROVIDER_URL] = args.base_url

    print("Perch setup. Enter keeps the value in [brackets].")
    current = known.get(PROVIDER_KEY) or os.environ.get(PROVIDER_KEY, "")
    answers.env[PROVIDER_KEY] = given.get(PROVIDER_KEY) or asker.ask(
        f"Model API key ({PROVIDER_KEY})", current, secret=True
    )
    if not answers.env[PROVIDER_KEY]:
        raise OnboardError(f"a model API key is needed: pass --api-key or answer {PROVIDER_KEY}")
    url = given.get(PROVIDER_URL) or asker.ask(
        "Model API base URL", known.get(PROVIDER_URL) or "https://api.anthropic.com"
    )
    answers.env[PROVIDER_URL] = url

    enabled = [n for n in CHAT_CHANNELS if data.get("channels", {}).get(n, {}).get("enabled")]
    choice = (
        args.channels
        if args.channels is not None
        else asker.ask(
            f"Chat platforms to enable ({', '.join(CHAT_CHANNELS)}; 'none' for the console only)",
            ",".join(enabled) or "none",
        )
    )
    answers.channels = _channels(choice)
    for channel in answers.channels:
        section = data.get("channels", {}).get(channel, {})
        for key, variable, fallback in _secret_refs(section):
            default = known.get(variable) or os.environ.get(variable) or fallback
            answers.env[variable] = given.get(variable) or asker.ask(
                f"  {channel}: {key} ({variable})", default, secret="token" in key
            )
    owners = _pairs(args.owner, "--owner", sep=":")
    for channel in answers.channels:
        if channel in owners or args.pairing:
            answer = owners.get(channel, "")
        else:
            answer = asker.ask(
                f"  {channel}: your own user id (Enter: approve yourself by pairing)"
            )
        if answer:
            answers.owners[channel] = answer

    _choose_secrets_place(path, args, asker, answers)
    if not _checks_pass(path, data, answers, asker):
        raise OnboardError("nothing written; fix the failed checks and run perch onboard again")
    if path.exists() and not (
        args.yes or asker.confirm(f"Update {path}? (the old one is kept as {path.name}.bak)", True)
    ):
        raise OnboardError(f"{path} left as it was")
    _apply(data, answers)
    _store_secrets(path, data, answers)
    write_config(path, data)
    print(f"Wrote {path}.")
    if args.pairing or len(answers.owners) < len(answers.channels):
        print("Pairing: DM the bot, then run: perch pairing approve <channel> <CODE>")
    from bot.workspace import seed_workspace

    config = load_config(path, {**os.environ, **answers.env}, lenient=True)
    seeded = seed_workspace(config.workspace)  # what perch init does
    config.db_path.parent.mkdir(parents=True, exist_ok=True)
    if seeded:
        print(f"Seeded {config.workspace} with: {', '.join(seeded)}")
    if args.no_doctor:
        return 0
    print("Running perch doctor:")
    from bot.operator.doctor import doctor

    return doctor(config)


def _choose_secrets_place(
    path: Path, args: argparse.Namespace, asker: Asker, answers: Answers
) -> None:
    place = args.secrets or asker.ask(
        "Keep secrets in an env file (env) or a systemd credentials directory (credentials)",
        "env",
    )
    if place not in ("env", "credentials"):
        raise OnboardError(f"--secrets must be env or credentials, got {place!r}")
    answers.secrets = place
    default = path.parent / ("perch.env" if place == "env" else "credentials")
    given = args.secrets_path or asker.ask(
        "Env file" if place == "env" else "Credentials directory", str(default)
    )
    answers.secrets_path = Path(given).expanduser()


def _checks_pass(path: Path, data: dict[str, Any], answers: Answers, asker: Asker) -> bool:
    """Check the key and each platform live against a config built from the answers."""
    import copy

    from bot.operator.doctor import run_checks

    trial = copy.deepcopy(data)
    _apply(trial, answers)
    probe = path.with_name(f".{path.name}.onboard-check")
    probe.write_text(config_text(trial), encoding="utf-8")
    try:
        config = load_config(probe, {**os.environ, **answers.env})
    except ConfigError as exc:
        raise OnboardError(str(exc).replace(str(probe), str(path))) from None
    finally:
        probe.unlink(missing_ok=True)
    wanted = {"model", *answers.channels}
    checks = [c for c in asyncio.run(run_checks(config)) if c.name in wanted]
    for check in checks:
        print("  " + check.line())
    if all(c.ok for c in checks):
        return True
    return asker.confirm("Some checks failed. Save anyway?", False)


def _apply(data: dict[str, Any], answers: Answers) -> None:
    channels = data.setdefault("channels", {})
    for name in CHAT_CHANNELS:
        channels.setdefault(name, {})["enabled"] = name in answers.channels
    for name, owner in answers.owners.items():
        allow = channels[name].get("allow_from") or []
        if owner not in [str(a) for a in allow]:
            channels[name]["allow_from"] = [owner, *allow]
    for dotted, value in answers.sets.items():
        node = data
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value


def _store_secrets(path: Path, data: dict[str, Any], answers: Answers) -> None:
    assert answers.secrets_path is not None
    values = {k: v for k, v in answers.env.items() if v}
    if answers.secrets == "env":
        write_env_file(answers.secrets_path, values)
        print(
            f"Secrets written to {answers.secrets_path} (mode 0600). Load it before perch run "
            f"(set -a; . {answers.secrets_path}; set +a) or name it in the unit's "
            "EnvironmentFile=."
        )
        return
    lines = write_credentials(answers.secrets_path, values)
    print(
        f"Secrets written to {answers.secrets_path}/ (mode 0600). Add to the service "
        "(systemctl edit perch):\n" + "\n".join(lines)
    )
    _point_at_credentials(data, values)


def _point_at_credentials(data: Any, values: dict[str, str]) -> None:
    """Make each `${VAR}` of a stored secret read the credential: `${cred:var}`."""
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, str):
                match = ENV_REF.fullmatch(value)
                if match and match.group(1) in values:
                    data[key] = "${cred:" + match.group(1).lower() + "}"
            else:
                _point_at_credentials(value, values)


def _secret_refs(section: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(key, variable, its `:-` default) of each `${VAR}` value in a channel's section."""
    found = []
    for key, value in section.items():
        match = ENV_REF.fullmatch(value) if isinstance(value, str) else None
        if match:
            found.append((str(key), match.group(1), match.group(2) or ""))
    return found


def _channels(choice: str) -> list[str]:
    names = [c.strip().lower() for c in choice.replace(" ", ",").split(",") if c.strip()]
    if names in ([], ["none"]):
        return []
    unknown = [n for n in names if n not in CHAT_CHANNELS]
    if unknown:
        raise OnboardError(
            f"unknown platform {unknown[0]!r}; choose from {', '.join(CHAT_CHANNELS)} or none"
        )
    return names


def _pairs(items: list[str], flag: str, sep: str = "=") -> dict[str, str]:
    pairs = {}
    for item in items:
        key, found, value = item.partition(sep)
        if not found or not key:
            raise OnboardError(f"{flag} {item!r}: write it as NAME{sep}VALUE")
        pairs[key.strip()] = value.strip()
    return pairs
