"""Reading `config.yaml`: `${VAR}` / `${VAR:-default}` interpolation, then validation.

Secrets can also come from files: `${file:/path}` and `${cred:name}` (systemd credentials),
see `secrets.py`. `load_config(path)` reads the file, interpolates environment variables,
and validates it with `schema.Config`. Every failure becomes one `ConfigError` whose message
names the file, the key path and the problem; the CLI prints it and exits with `EXIT_CONFIG`.
`load_config(path, lenient=True)` is for commands that never use secrets (status, pairing,
cron, ...): an unset `${VAR}` or unreadable secret file stays as its literal text and is
listed in `Config.unresolved` instead of failing. The YAML is read by `yaml_read.py` (alias
bombs and duplicate keys refused, `off`/`yes` booleans noted for a "quote it" hint), and the
files named under `secrets:` add their variables first (`secret_sources.py`).
No error shows a secret: a value that looks
like one (or sits under a key that names one) is not quoted, and URL passwords and secret
values are scrubbed from the message (`redact.py`). The secret files read, the secret values
and `$CREDENTIALS_DIRECTORY` are kept on the `Config` for the sandboxes, the layout check and
the log redactor.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from bot.config.errors import ConfigError
from bot.config.lenient import relax
from bot.config.models import missing_key
from bot.config.providers import with_implied_provider
from bot.config.redact import may_echo, scrub, secret_values
from bot.config.schema import Config
from bot.config.secret_sources import SecretSourceError, secret_env, secret_files
from bot.config.secrets import expand_secret_refs
from bot.config.shape import MAX_NESTING, deeper_than, too_deep
from bot.config.yaml_read import YamlProblem, read_yaml

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")


def interpolate(
    value: Any,
    env: dict[str, str],
    path: str = "",
    missing: list[tuple[str, str]] | None = None,
    seen: list[Path] | None = None,
) -> Any:
    """Replace `${VAR}` and `${VAR:-default}` in every string of a parsed YAML tree.

    With a `missing` list, an unset variable or an unreadable `${file:}`/`${cred:}` secret is
    left as written and noted there as (key path, one sentence naming it) instead of raising.
    The path of every secret file referenced is added to `seen`."""
    if isinstance(value, dict):
        return {
            k: interpolate(v, env, f"{path}.{k}" if path else str(k), missing, seen)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [interpolate(v, env, f"{path}[{i}]", missing, seen) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = env.get(name)
        if found is not None and (found != "" or default is None):
            return found
        if default is not None:
            return default
        if missing is not None:
            missing.append((path, f"{path} uses ${{{name}}}, which is not set (export {name}=...)"))
            return match.group(0)
        hint = (
            "export ANTHROPIC_API_KEY=sk-ant-... (or put it in the EnvironmentFile of the "
            "systemd unit)"
            if name == "ANTHROPIC_API_KEY"
            else f"export {name}=..., or write ${{{name}:-default}} in the file"
        )
        raise ConfigError(f"{path}: environment variable {name} is not set; {hint}")

    text = _ENV_REF.sub(substitute, value)
    if missing is None:
        return expand_secret_refs(text, env, path, seen)
    try:
        return expand_secret_refs(text, env, path, seen)
    except ConfigError as exc:  # an unreadable secret file: noted, left as written
        missing.append((path, str(exc)))
        return text


def _loc(error: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(p for p in error["loc"] if p != "[key]" and not str(p).startswith("function-"))


def _describe(error: Mapping[str, Any]) -> str:
    where = ".".join(str(p) for p in error["loc"] if not str(p).startswith("function-"))
    message = str(error["msg"]).removeprefix("Value error, ")
    if where and message.startswith(where + "."):
        return message  # a plug-in's message already names its key
    if error["type"] == "extra_forbidden":
        message = "unknown key (check the spelling against the shipped config.yaml)"
    elif (
        "input" in error
        and error["type"] not in ("missing",)
        and not isinstance(error["input"], dict | list)
        and repr(error["input"]) not in message
        and f"({error['input']})" not in message
    ):
        if may_echo(where, error["input"]):
            message += f" (got {error['input']!r})"
        else:
            message += " (the value is not shown: it looks like a secret)"
    return f"{where}: {message}" if where else message


def load_config(
    path: Path | str, env: dict[str, str] | None = None, *, lenient: bool = False
) -> Config:
    """Read, interpolate and validate a config file, or raise one readable `ConfigError`
    that shows no secret (`redact.scrub`).

    `lenient`: unset `${VAR}`s don't fail; they are listed in `Config.unresolved`."""
    env = dict(os.environ) if env is None else env
    secrets: list[str] = []
    try:
        return _load(Path(path), env, lenient, secrets)
    except ConfigError as exc:
        raise ConfigError(scrub(str(exc), secrets)) from None


def _load(path: Path, env: dict[str, str], lenient: bool, secrets: list[str]) -> Config:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} on line {line}); "
            "save the file as UTF-8"
        ) from None
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: no such file; run perch onboard (or perch init for the template), "
            "or pass --config PATH"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it: {exc.strerror}") from None
    return parse_config(text, path, env, lenient=lenient, secrets=secrets)


def parse_config(
    text: str,
    path: Path,
    env: dict[str, str] | None = None,
    *,
    lenient: bool = False,
    secrets: list[str] | None = None,
) -> Config:
    """`load_config` on text already read; `path` names it in errors and anchors its paths.
    `secrets` gathers the secret values met, for the caller's error messages."""
    env = dict(os.environ) if env is None else env
    secrets = [] if secrets is None else secrets
    try:
        parsed = read_yaml(text)
    except RecursionError:
        raise ConfigError(too_deep(path)) from None
    except YamlProblem as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        if "nesting depth" in problem:  # libyaml's own limit
            raise ConfigError(too_deep(path)) from None
        raise ConfigError(f"{path}: not valid YAML{where}: {problem}") from None
    raw = parsed.data if parsed.data is not None else {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections (agent:, ...)")
    if deeper_than(raw, MAX_NESTING):
        raise ConfigError(too_deep(path))
    missing: list[tuple[str, str]] | None = [] if lenient else None
    seen: list[Path] = []
    try:
        env = {**env, **secret_env(raw.get("secrets"), path.resolve().parent, env)}
    except SecretSourceError as exc:
        if missing is None:
            raise ConfigError(f"{path}: {exc}") from None
        missing.append((exc.key, str(exc)))
    seen += secret_files(raw.get("secrets"), path.resolve().parent)
    raw = with_implied_provider(raw)  # no providers: block: the key from the environment
    try:
        data = interpolate(raw, env, missing=missing, seen=seen)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    secrets += secret_values(data)
    notes = [note for _, note in missing or []]
    while True:
        try:
            config = Config.model_validate(data)
            break
        except ValidationError as exc:
            errors = exc.errors()
            if not missing or not relax(data, [where for where, _ in missing], errors, notes):
                problems = [_describe(e) + parsed.bool_hint(_loc(e)) for e in errors]
                raise ConfigError(f"{path}: " + "; ".join(problems)) from None
    config.source = path.resolve()
    config.unresolved = notes
    config.unresolved_keys = [where for where, _ in missing or []]
    config.secret_files = seen
    config.found_secrets = secrets
    credentials = env.get("CREDENTIALS_DIRECTORY")
    config.credentials_dir = Path(credentials) if credentials else None
    return config


def require_api_key(config: Config) -> None:
    """Refuse to start without a model API key, saying how to set one."""
    if (problem := missing_key(config)) is not None:
        raise ConfigError(problem)
