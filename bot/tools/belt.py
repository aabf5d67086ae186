"""The main agent's tools, assembled from config: what exists and what the policy allows.

`build_tools(config)` returns the registry for top-level runs: the workspace file tools,
memory tools (`memory_search` on the search index when one is given) and `read_skill` always,
`skill_search` while there are too many skills to list (with the index), `web_fetch` unless disabled, `web_search` once
`agent.web_search.provider` is set, `browser` when a browser pool is given (`browser_pool`: `agent.browser.enabled`), `exec` only when enabled (seeing the skills outside the
workspace read-only at `/skills/<name>`), then the `agent.tools` allow/deny policy. Daemon services (cron, spawn, message) add their tools
through `extra`; tool sources that change at run time (the MCP servers) through `providers`,
and the same policy filters their tools.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from agents.skills.catalog import SkillCatalog
from agents.tools.base import Tool, ToolProvider, ToolRegistry
from agents.tools.browser import BrowserTool
from agents.tools.browser_pool import BrowserPool, BrowserSettings
from agents.tools.cgroups import CgroupHome
from agents.tools.exec import ExecTool
from agents.tools.files import file_tools
from agents.tools.memory import memory_tools
from agents.tools.read_skill import ReadSkillTool
from agents.tools.sandbox import Limits, Sandbox, SandboxUnavailable, select_sandbox
from agents.tools.skill_search import SkillSearchTools
from agents.tools.web_fetch import WebFetchTool
from agents.tools.web_search import WebSearchTool
from bot.config.errors import ConfigError
from bot.config.layout import sandbox_hidden, unreadable
from bot.config.schema import Config
from bot.recall.index import SearchIndex
from bot.tools.skills import skill_catalog

log = logging.getLogger(__name__)


def build_tools(
    config: Config,
    extra: Iterable[Tool] = (),
    providers: Iterable[ToolProvider] = (),
    skills: SkillCatalog | None = None,
    index: SearchIndex | None = None,
    browser: BrowserPool | None = None,
) -> ToolRegistry:
    agent = config.agent
    skills = skills if skills is not None else skill_catalog(config)
    tools: list[Tool] = [
        *file_tools(),
        *memory_tools(index),
        ReadSkillTool(skills, hidden=unreadable(config)),  # no secret beside a SKILL.md
    ]
    if agent.web_fetch.enabled:
        tools.append(
            WebFetchTool(
                allow_hosts=agent.web_fetch.allow_hosts,
                max_bytes=agent.web_fetch.max_bytes,
                timeout=agent.web_fetch.timeout_s,
            )
        )
    search = agent.web_search
    if search.provider is not None:
        tools.append(
            WebSearchTool(
                search.provider,
                api_key=search.api_key,
                base_url=search.base_url,
                max_results=search.max_results,
                cache_s=search.cache_s,
                timeout_s=search.timeout_s,
            )
        )
    if agent.exec.enabled:
        tools.append(
            ExecTool(
                timeout_s=agent.exec.timeout_s,
                max_timeout_s=agent.exec.max_timeout_s,
                max_output_chars=agent.exec.max_output_chars,
                allow_env=agent.exec.allow_env,
                sandbox=exec_sandbox(config),
                mounts=skills.mounts,
            )
        )
    if browser is not None:
        tools.append(BrowserTool(browser))
    tools.extend(extra)
    belt = ToolRegistry(tools, providers).restricted(agent.tools.allow, agent.tools.deny)
    if index is None or "read_skill" not in belt:
        return belt
    searching = SkillSearchTools(skills, index)  # skill_search, while the skills are too many
    return ToolRegistry(tools, [*providers, searching]).restricted(
        agent.tools.allow, agent.tools.deny
    )


def browser_pool(config: Config) -> BrowserPool | None:
    """The browser behind the `browser` tool when `agent.browser.enabled`, else None."""
    cfg = config.agent.browser
    if not cfg.enabled:
        return None
    return BrowserPool(
        BrowserSettings(
            executable=cfg.executable,
            headless=cfg.headless,
            allow_private=tuple(cfg.allow_private),
            max_pages=cfg.max_pages,
            timeout=cfg.timeout,
            idle_close=cfg.idle_close,
            max_bytes=cfg.max_bytes,
            memory_bytes=config.agent.exec.memory_mb * 2**20,
            processes=config.agent.exec.max_processes,
        ),
        CgroupHome.find(),
    )


def exec_sandbox(config: Config) -> Sandbox:
    """The sandbox `agent.exec` asks for, or ConfigError (exit 78) saying what to do."""
    cfg = config.agent.exec
    limits = Limits(cfg.cpu_s, cfg.memory_mb, cfg.max_processes, cfg.max_file_mb, cfg.tmp_mb)
    hide = sandbox_hidden(config)
    try:
        sandbox = select_sandbox(cfg.sandbox, network=cfg.network, limits=limits, hide=hide)
    except SandboxUnavailable as exc:
        raise ConfigError(f"agent.exec: {exc}") from None
    log.info("exec sandbox: %s", sandbox.describe())
    return sandbox
