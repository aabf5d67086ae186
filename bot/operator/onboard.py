"""`perch onboard`: set Perch up by answering questions, or by flags from a script.

Plain prompts (they work over SSH; secrets are read without echo on a terminal, and answers
may be piped); every answer can also be given as a flag, and a question whose answer came as a
flag is not asked. Each answer is checked when it is given and asked again on a bad one: the
model key and endpoint right away (a live `count_tokens` call), each platform's tokens by its
own options model, then live by its "who am I" probe (`bot.operator.doctor.check_channel`).
Only the questions that apply are asked: after each token the platform's section is tried
with what is known, and only a secret the options model still asks for (a webhook secret in
webhook mode, an app token in socket mode) becomes a question. `--no-verify` skips the live
checks (offline and scripted setups). Platforms are not named here: the channel names, their
`${VAR}` secrets and which of those are `Secret` fields come from the registry and the
shipped template.

It writes the config where every later command looks (`bot.config.paths.edited_config_path`:
`./config.local.yaml` in a checkout, first copied from the tracked `./config.yaml`, else
`~/.config/perch/config.yaml`), keeping its comments,
with `secrets.env_file` (mode 0600) or `secrets.credentials_dir` naming where the secrets went,
so no command needs anything sourced. Re-running it edits: current values are the defaults,
an existing config is only changed after a yes (or `--yes`), and the old one is kept as
`<name>.bak.N`. It then seeds the workspace as `perch init` does and runs `perch doctor`.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.config.errors import ConfigError
from bot.config.load import parse_config
from bot.config.schema import Config
from bot.operator.onboard_ask import Asker, OnboardError, not_empty, one_of
from bot.operator.onboard_files import (
    config_template,
    config_text,
    earlier_secrets,
    read_env_file,
    secret_refs,
    set_key,
    store_secrets,
    write_config,
)
from channels import registry
from channels.options import ChannelPolicy, is_secret_field

PROVIDER_KEY = "ANTHROPIC_API_KEY"
PROVIDER_URL = "ANTHROPIC_BASE_URL"
# The platforms strangers can write on (the console, your own terminal, needs no setup).
CHAT_CHANNELS = tuple(p.key for p in registry.plugins() if issubclass(p.options, ChannelPolicy))


@dataclass
class Answers:
    env: dict[str, str] = field(default_factory=dict)  # secret variable -> value
    channels: list[str] = field(default_factory=list)
    owners: dict[str, str] = field(default_factory=dict)  # channel -> owner id
    sets: dict[str, str] = field(default_factory=dict)  # dotted config key -> value
    secrets: str = "env"
    secrets_path: Path | None = None


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
    p.add_argument(
        "--no-verify", action="store_true", help="skip the live checks (offline, scripts)"
    )
    p.add_argument("--no-doctor", action="store_true", help="don't run perch doctor at the end")


def cmd_onboard(args: argparse.Namespace) -> int:
    from bot.config.paths import edited_config_path

    path = edited_config_path(args.config)
    try:
        return onboard(path, args, Asker(interactive=not args.yes))
    except OnboardError as exc:
        print(f"perch onboard: {exc}", file=sys.stderr)
        return 1


def onboard(path: Path, args: argparse.Namespace, asker: Asker) -> int:
    data = config_template(path)
    answers = Answers(sets=_pairs(args.set, "--set"))
    earlier = earlier_secrets(path, data, args.secrets_path)
    known = read_env_file(earlier)  # a re-run offers the earlier answers as defaults
    given = _pairs(args.env, "--env")
    if args.api_key:
        given[PROVIDER_KEY] = args.api_key
    if args.base_url:
        given[PROVIDER_URL] = args.base_url
    flow = _Flow(path, data, answers, asker, verify=not args.no_verify)
    flow.known = known

    owners = _pairs(args.owner, "--owner", sep=":")
    chosen = _channels(args.channels) if args.channels is not None else None  # flags first

    print(f"Perch setup ({path}). Enter keeps the value in [brackets].")
    flow.model(given, known)
    enabled = [n for n in CHAT_CHANNELS if data.get("channels", {}).get(n, {}).get("enabled")]
    answers.channels = (
        chosen
        if chosen is not None
        else _channels(
            asker.ask(
                f"Chat platforms to enable ({', '.join(CHAT_CHANNELS)}; 'none' for the console only)",
                ",".join(enabled) or "none",
                check=_channel_problem,
            )
        )
    )
    for channel in answers.channels:
        flow.channel(channel, given, known, owners.get(channel), args.pairing)
    _choose_secrets_place(path, args, asker, answers, earlier)

    if path.exists() and not (
        args.yes or asker.confirm(f"Update {path}? (the old one is kept as a backup)", True)
    ):
        raise OnboardError(f"{path} left as it was")
    _apply(data, answers)
    assert answers.secrets_path is not None
    values = {k: v for k, v in answers.env.items() if v}
    store_secrets(path, data, answers.secrets, answers.secrets_path, values)
    backup = write_config(path, data)
    print(f"Wrote {path}" + (f" (the old one is {backup.name})." if backup else "."))
    if args.pairing or len(answers.owners) < len(answers.channels):
        print("Pairing: DM the bot, then run: perch pairing approve <channel> <CODE>")
    from bot.kernel.workspace import seed_workspace

    config = flow.trial(lenient=True, secrets_from_file=True)
    seeded = seed_workspace(config.workspace)  # what perch init does
    config.db_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # as perch run's
    if seeded:
        print(f"Seeded {config.workspace} with: {', '.join(seeded)}")
    if args.no_doctor or args.no_verify:
        print("Check it any time with: perch doctor")
        return 0
    print("Running perch doctor:")
    from bot.operator.doctor import doctor

    return doctor(config)


class _Flow:
    """The questions that need the config tried as answered so far."""

    def __init__(
        self, path: Path, data: Any, answers: Answers, asker: Asker, *, verify: bool
    ) -> None:
        self.path, self.data, self.answers, self.asker = path, data, answers, asker
        self.verify = verify
        self.known: dict[str, str] = {}  # the earlier secrets file (a re-run)

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.known, **self.answers.env}

    def trial(self, *, lenient: bool = False, secrets_from_file: bool = False) -> Config:
        """The config as it would be written, read with the answers as its environment."""
        trial = self.data if secrets_from_file else copy.deepcopy(self.data)
        if not secrets_from_file:
            _apply(trial, self.answers)
            set_key(trial, "secrets", {})  # the answers stand in for the secrets file
        try:
            return parse_config(config_text(trial), self.path, self._env(), lenient=lenient)
        except ConfigError as exc:
            raise OnboardError(str(exc)) from None

    def model(self, given: dict[str, str], known: dict[str, str]) -> None:
        env, ask = self.answers.env, self.asker
        while True:
            env[PROVIDER_KEY] = given.get(PROVIDER_KEY) or ask.ask(
                f"Model API key ({PROVIDER_KEY})",
                known.get(PROVIDER_KEY) or os.environ.get(PROVIDER_KEY, ""),
                secret=True,
                check=not_empty(f"a model API key ({PROVIDER_KEY} or --api-key)"),
            )
            url = given.get(PROVIDER_URL)
            env[PROVIDER_URL] = (
                url
                if url and not _url_problem(url)
                else ask.ask(
                    "Model API base URL",
                    env.get(PROVIDER_URL)  # the one given before a failed check
                    or url
                    or known.get(PROVIDER_URL)
                    or "https://api.anthropic.com",
                    check=_url_problem,
                )
            )
            if not self.verify:
                return
            from bot.operator.doctor import check_model

            checks = [c for c in asyncio.run(check_model(self.trial(lenient=True)))]
            for check in checks:
                print("  " + check.line())
            if all(c.ok for c in checks):
                return
            self._retry_or_stop("the model check failed")
            given.pop(PROVIDER_KEY, None)
            known.pop(PROVIDER_KEY, None)

    def channel(
        self,
        name: str,
        given: dict[str, str],
        known: dict[str, str],
        owner: str | None,
        pairing: bool,
    ) -> None:
        section = self.data.get("channels", {}).get(name, {})
        refs = secret_refs(section)
        while True:
            asked: set[str] = set()
            for key, variable, fallback in refs:
                if fallback:  # a setting with a default (a service URL): offered, not required
                    self._secret(name, key, variable, given, known, fallback)
                    asked.add(variable)
                else:  # asked only if the platform's options need it (tried below)
                    self.answers.env[variable] = ""
            self._needed_secrets(name, refs, asked, given, known)
            if not self.verify:
                break
            from bot.operator.doctor import check_channel

            check = asyncio.run(check_channel(self.trial(lenient=True), name))
            if check is None or check.ok:
                if check is not None:
                    print("  " + check.line())
                break
            print("  " + check.line())
            self._retry_or_stop(f"the {name} check failed")
            for _, variable, _ in refs:
                given.pop(variable, None)
        if owner is None and not pairing:
            owner = self.asker.ask(
                f"  {name}: your own user id (Enter: approve yourself by pairing)"
            )
        if owner:
            self.answers.owners[name] = owner
            problem = self._problem(name)
            if problem:
                raise OnboardError(f"--owner {name}:{owner}: {problem}")

    def _needed_secrets(
        self,
        name: str,
        refs: list[tuple[str, str, str]],
        asked: set[str],
        given: dict[str, str],
        known: dict[str, str],
    ) -> None:
        """Ask the secrets the platform's options still ask for, one at a time."""
        while (problem := self._problem(name)) is not None:
            named = [r for r in refs if f"channels.{name}.{r[0]}" in problem]
            if not named:
                raise OnboardError(problem)
            key, variable, _ = named[0]
            if variable in asked:  # an answer the platform refuses: say why, ask again
                print(f"  {problem}")
                if not self.asker.interactive:
                    raise OnboardError(problem)
                given.pop(variable, None)
                known.pop(variable, None)
            self._secret(name, key, variable, given, known, "")
            asked.add(variable)

    def _secret(
        self, name: str, key: str, variable: str, given: dict[str, str], known: dict[str, str],
        fallback: str,
    ) -> None:  # fmt: skip
        plugin = registry.get(name)
        secret = plugin is not None and is_secret_field(plugin.options, key)
        default = known.get(variable) or os.environ.get(variable) or fallback
        if variable in given:
            self.answers.env[variable] = given[variable]
            return
        self.answers.env[variable] = self.asker.ask(
            f"  {name}: {key} ({variable})", default, secret=secret
        )

    def _problem(self, name: str) -> str | None:
        """What `channels.<name>`'s options model says about the answers, or None."""
        trial = copy.deepcopy(self.data)
        _apply(trial, self.answers)
        set_key(trial, "secrets", {})
        try:
            parse_config(config_text(trial), self.path, self._env())
        except ConfigError as exc:
            text = str(exc).removeprefix(f"{self.path}: ")
            return text if f"channels.{name}" in text else None
        return None

    def _retry_or_stop(self, what: str) -> None:
        if not self.asker.interactive:
            raise OnboardError(f"{what}; nothing written (--no-verify skips the live checks)")
        print("  Enter the values again (or Ctrl-C to stop; nothing is written yet).")


def _choose_secrets_place(
    path: Path, args: argparse.Namespace, asker: Asker, answers: Answers, earlier: Path
) -> None:
    answers.secrets = args.secrets or asker.ask(
        "Keep secrets in an env file (env) or a credentials directory (credentials)",
        "env",
        check=one_of(("env", "credentials"), "where secrets go"),
    )
    default = earlier if answers.secrets == "env" else path.parent / "credentials"
    chosen = args.secrets_path or asker.ask(
        "Env file" if answers.secrets == "env" else "Credentials directory",
        str(default),
        check=not_empty("a path"),
    )
    answers.secrets_path = Path(chosen).expanduser()


def _apply(data: Any, answers: Answers) -> None:
    channels = data.setdefault("channels", {})
    for name in CHAT_CHANNELS:
        channels.setdefault(name, {})["enabled"] = name in answers.channels
    for name, owner in answers.owners.items():
        allow = channels[name].get("allow_from") or []
        if owner not in [str(a) for a in allow]:
            channels[name]["allow_from"] = [owner, *allow]
    for dotted, value in answers.sets.items():
        set_key(data, dotted, value)


def _url_problem(value: str) -> str | None:
    return None if value.startswith(("http://", "https://")) else "give an http(s):// URL"


def _channel_problem(choice: str) -> str | None:
    try:
        _channels(choice)
    except OnboardError as exc:
        return str(exc)
    return None


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
