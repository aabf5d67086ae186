"""`perch doctor` lines about the hub: the webhooks' secrets and targets, the API's tokens.

For each endpoint of an enabled `hooks:`: its secret is set (not a `${...}` left unset),
not guessable (at least 8 different characters), not another endpoint's or an API token
(one leaked secret should open one door), and its `deliver` names a chat of an enabled
channel. For an enabled `api:`: its tokens are set, not guessable and all different. When
either is on, one line says where they are served (`web.listen`) and warns when that is
reachable from other machines (put TLS in front). No line shows a secret.
"""

from __future__ import annotations

from bot.config.observe import is_loopback, split_listen
from bot.config.schema import Config
from bot.kernel.routing import parse_target
from bot.operator.checks import Check

MIN_DISTINCT = 8
MAKE_ONE = "make one with openssl rand -hex 24 and give it through ${ENV} or ${file:...}"


def _weak(secret: str) -> bool:
    return len(set(secret)) < MIN_DISTINCT


def hook_checks(config: Config) -> list[Check]:
    hooks = config.hooks
    if not hooks.enabled:
        return []
    checks: list[Check] = []
    tokens = set(config.api.tokens) if config.api.enabled else set()
    seen: dict[str, str] = {}
    accounts = {name: "" for name in config.channels.enabled()}
    if not hooks.endpoints:
        checks.append(Check(True, "hooks", "enabled, but no endpoints", warn=True))
    for name, endpoint in hooks.endpoints.items():
        label = f"hook {name}"
        if config.is_unresolved(f"hooks.endpoints.{name}"):
            checks.append(Check(False, label, "its secret is not set", MAKE_ONE))
            continue
        if _weak(endpoint.secret):
            checks.append(Check(False, label, "its secret is guessable", MAKE_ONE))
        elif endpoint.secret in seen or endpoint.secret in tokens:
            other = f"hook {seen[endpoint.secret]}" if endpoint.secret in seen else "an API token"
            checks.append(Check(False, label, f"its secret is also {other}'s", MAKE_ONE))
        else:
            seen[endpoint.secret] = name
            checks.append(
                Check(True, label, f"{endpoint.signature}-signed, runs agent {endpoint.agent}")
            )
        if endpoint.deliver.strip().lower() != "none":
            try:
                parse_target(endpoint.deliver.strip(), accounts)
            except ValueError as exc:
                fix = "deliver: <channel>:<chat id> of an enabled channel, or none"
                checks.append(Check(False, f"{label} deliver", str(exc), fix))
    return checks


def api_checks(config: Config) -> list[Check]:
    api = config.api
    if not api.enabled:
        return []
    if config.is_unresolved("api.tokens"):
        return [Check(False, "api", "a token is not set", MAKE_ONE)]
    if any(_weak(token) for token in api.tokens):
        return [Check(False, "api", "a token is guessable", MAKE_ONE)]
    if len(set(api.tokens)) != len(api.tokens):
        return [Check(False, "api", "two tokens are the same", "give each caller its own")]
    agents = ", ".join(config.agent_ids())
    return [Check(True, "api", f"{len(api.tokens)} token(s); models: {agents}")]


def listen_checks(config: Config) -> list[Check]:
    if not (config.hooks.enabled or config.api.enabled):
        return []
    host, _port = split_listen(config.web.listen)
    where = f"served on {config.web.listen}"
    if is_loopback(host):
        return [Check(True, "hub listen", where)]
    fix = "put a TLS reverse proxy in front (tokens and bodies travel in clear otherwise)"
    return [Check(True, "hub listen", where + ", reachable from other machines", fix, warn=True)]


def hub_checks(config: Config) -> list[Check]:
    return [*hook_checks(config), *api_checks(config), *listen_checks(config)]
