"""`perch doctor`: check that everything Perch needs is in place, one line per check.

Each check prints `OK` or `FAIL` with what it found and, on failure, what to do. It checks the
config, each model provider (`bot.operator.doctor_models`: key accepted, model listed), each enabled
channel's credentials against its platform (the plug-in's `probe`), each enabled MCP server
(it must start and list its tools), the trace collector when tracing is on
(`bot.operator.doctor_observe`), the database (opens, migrates, takes the write lock), the
workspace files, the layout (`perch run` refuses a workspace holding the state directory, the
config or a secret), the size of the prompt every request begins with (`doctor_prompt.py`),
the timezone, the skills and web search (`doctor_skills.py`), the webhooks' secrets and
the API's tokens (`doctor_hub.py`), spoken replies (`doctor_voice.py`). No line shows a password or
token. Exit code 0 when everything passed, 1 otherwise, 78 when
the config itself cannot be read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from functools import partial
from zoneinfo import ZoneInfo

import aiohttp

from bot.config.layout import layout_problem, layout_warnings
from bot.config.redact import scrub
from bot.config.schema import Config
from bot.kernel.workspace import bootstrap_dir
from bot.operator.checks import Check
from bot.operator.doctor_browser import browser_check
from bot.operator.doctor_exec import exec_checks
from bot.operator.doctor_hub import hub_checks
from bot.operator.doctor_mcp import doctor_checks as mcp_doctor_checks
from bot.operator.doctor_models import model_checks
from bot.operator.doctor_observe import observe_checks
from bot.operator.doctor_prompt import prompt_check
from bot.operator.doctor_skills import search_check, skill_checks
from bot.operator.doctor_voice import voice_check
from bot.store.open import open_store
from bot.store.urls import redact_url
from channels import registry
from channels.options import ChannelOptions
from channels.plugin import Probe

TIMEOUT = 10.0


async def run_checks(config: Config) -> list[Check]:
    checks: list[Check] = [Check(True, "config", f"{config.source} is valid")]
    # A `${...}` left unset is reported here and never used (as a key, a URL, a token).
    checks += [Check(False, "secret", missing) for missing in config.unresolved]
    async with _client() as http:
        model_probe = asyncio.create_task(_models(config, http))
        probes: list[Callable[[], Awaitable[Check]]] = []
        for name in config.channels.enabled():
            plugin, options = registry.get(name), config.channels.options(name)
            if config.is_unresolved(f"channels.{name}"):  # its token is a `${...}` left unset
                checks.append(Check(False, name, "not checked: a secret it needs is not set"))
            elif plugin is not None and plugin.probe is not None and options is not None:
                probes.append(partial(_channel, name, options, plugin.probe, http))
        checks.extend(await model_probe)
        checks.extend(await asyncio.gather(*(probe() for probe in probes)))
    checks.extend(await mcp_doctor_checks(config))
    checks.extend(await observe_checks(config))
    checks.append(await _database(config))
    checks.append(_workspace(config))
    checks.append(_layout(config))
    checks.append(await prompt_check(config))
    checks.append(_timezone(config))
    checks.extend(exec_checks(config))
    checks.append(await browser_check(config))
    checks.extend(skill_checks(config))
    checks.append(await search_check(config))
    checks.extend(hub_checks(config))  # webhooks' secrets and targets, the API's tokens
    checks.append(await voice_check(config))
    return checks


async def _models(config: Config, http: aiohttp.ClientSession) -> list[Check]:
    return [Check(*result) for result in await model_checks(config, http)]


async def _channel(
    name: str, options: ChannelOptions, probe: Probe, http: aiohttp.ClientSession
) -> Check:
    """One enabled channel's plug-in probe, as a doctor line."""
    try:
        result = await probe(options, http)
    except Exception as exc:  # a probe bug must not hide the other checks
        return Check(False, name, f"the probe failed: {exc}", "see the log; report it")
    return Check(result.ok, name, result.detail, result.fix)


async def _database(config: Config) -> Check:
    """Open (and migrate) the store, check a write transaction and the schema version."""
    where = config.store_target
    if config.store.url:
        shown = redact_url(config.store.url)
        fix_open = "check store.url and that the PostgreSQL server runs and accepts you"
        fix_write = "grant the store.url user write access (and use the primary server)"
    else:
        shown = str(where)
        fix_open = f"make {config.db_path.parent} writable by the service user"
        fix_write = f"make {where} writable by the service user"
    try:
        store = await open_store(where)
    except Exception as exc:
        return Check(False, "database", f"{shown}: {exc}", fix_open)
    try:
        version = await store.schema_version()
        await store.check_writable()
    except Exception as exc:
        return Check(False, "database", f"{shown}: not writable ({exc})", fix_write)
    finally:
        await store.close()
    if version != store.latest_schema:
        return Check(
            False,
            "database",
            f"schema {version}, expected {store.latest_schema}",
            "restart Perch to migrate",
        )
    return Check(True, "database", f"{store.location} writable, schema {version}")


def _workspace(config: Config) -> Check:
    workspace = config.workspace
    if not workspace.is_dir():
        return Check(False, "workspace", f"{workspace} does not exist", "run: perch init")
    templates = bootstrap_dir()
    names = sorted(p.name for p in templates.glob("*.md")) if templates.is_dir() else []
    missing = [n for n in names if not (workspace / n).exists()]
    if missing:
        return Check(False, "workspace", f"missing {', '.join(missing)}", "run: perch init")
    return Check(True, "workspace", f"{workspace} has {len(names)} persona files")


def _layout(config: Config) -> Check:
    """The same refusal as `perch run`: the workspace apart from state, config and secrets."""
    problem = layout_problem(config)
    if problem is not None:
        return Check(False, "layout", problem, "move the workspace; perch run refuses this")
    warnings = layout_warnings(config)
    if warnings:
        return Check(True, "layout", "; ".join(warnings), "move or chmod them", warn=True)
    return Check(True, "layout", "the workspace holds no state, config or secret file")


def _timezone(config: Config) -> Check:
    tz = config.agent.timezone
    now = time.strftime("%Y-%m-%d %H:%M")
    try:
        from datetime import datetime

        local = datetime.now(ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M %Z")
    except Exception as exc:
        return Check(False, "timezone", f"{tz}: {exc}", "set agent.timezone (e.g. Europe/Berlin)")
    return Check(True, "timezone", f"{tz}: {local} (system clock {now})")


async def check_model(config: Config) -> list[Check]:
    """The model checks alone (what `perch onboard` verifies after the key is given)."""
    async with _client() as http:
        return await _models(config, http)


async def check_channel(config: Config, name: str) -> Check | None:
    """One enabled channel's probe alone (what `perch onboard` verifies after its tokens)."""
    plugin, options = registry.get(name), config.channels.options(name)
    if plugin is None or plugin.probe is None or options is None:
        return None
    async with _client() as http:
        return await _channel(name, options, plugin.probe, http)


def _client() -> aiohttp.ClientSession:
    """The doctor's HTTP client: every check's calls within `TIMEOUT` seconds."""
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT))


def doctor(config: Config) -> int:
    """Print every check; the count of failures is the count of FAIL lines printed."""
    checks = asyncio.run(run_checks(config))
    for check in checks:
        print(scrub(check.line(), config.secret_values()))  # no password or token, whatever key
    failed = sum(not c.ok for c in checks)
    print(f"Doctor: {failed} of {len(checks)} checks failed." if failed else "All checks passed.")
    return 1 if failed else 0
