"""`perch doctor` lines about `exec`: which sandbox mode is active and whether secrets sit
in the daemon's environment while the model can run commands."""

from __future__ import annotations

import os
from collections.abc import Mapping

from agents.tools.exec_env import is_secret_name, looks_like_secret_value
from bot.config.errors import ConfigError
from bot.config.schema import Config
from bot.operator.checks import Check
from bot.tools.belt import exec_sandbox

# Names that match a secret marker but hold no secret (session plumbing of a desktop login).
_HARMLESS = frozenset(
    {
        "SSH_AUTH_SOCK",
        "XDG_SESSION_ID",
        "XDG_SESSION_TYPE",
        "XDG_SESSION_CLASS",
        "XDG_SESSION_DESKTOP",
        "DESKTOP_SESSION",
        "SESSION_MANAGER",
        "GPG_AGENT_INFO",
    }
)


def exec_checks(config: Config, environ: Mapping[str, str] | None = None) -> list[Check]:
    """The sandbox line, and a warning per environment holding secrets while exec is on."""
    cfg = config.agent.exec
    if not cfg.enabled:
        return [Check(True, "exec", "disabled: the model cannot run commands")]
    try:
        sandbox = exec_sandbox(config)
    except ConfigError as exc:
        return [Check(False, "exec sandbox", str(exc), "install bubblewrap or set sandbox: none")]
    checks = [
        Check(
            True,
            "exec sandbox",
            sandbox.describe(),
            "install bubblewrap and set agent.exec.sandbox: auto",
            warn=sandbox.mode == "none",
        )
    ]
    env = os.environ if environ is None else environ
    exposed = sorted(
        name
        for name, value in env.items()
        if name not in _HARMLESS and (is_secret_name(name) or looks_like_secret_value(value))
    )
    if exposed:
        checks.append(
            Check(
                True,
                "secrets",
                f"exec is on and the environment holds {', '.join(exposed)}",
                "read them from files instead: ${cred:name} or ${file:/path} in config.yaml "
                "(docs/security.md)",
                warn=True,
            )
        )
    return checks
