"""The main agent's tools, assembled from config: what exists and what the policy allows.

`build_tools(config)` returns the registry for top-level runs: the workspace file tools and
memory tools always, `web_fetch` unless disabled, `exec` only when enabled, then the
`agent.tools` allow/deny policy. Daemon services (cron, spawn, message) add their tools
through `extra`; tool sources that change at run time (the MCP servers) through `providers`,
and the same policy filters their tools.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from agents.tools.base import Tool, ToolProvider, ToolRegistry
from agents.tools.exec import ExecTool
from agents.tools.files import file_tools
from agents.tools.memory import memory_tools
from agents.tools.sandbox import Limits, Sandbox, SandboxUnavailable, select_sandbox
from agents.tools.web_fetch import WebFetchTool
from bot.config.errors import ConfigError
from bot.config.layout import sandbox_hidden
from bot.config.schema import Config

log = logging.getLogger(__name__)


def build_tools(
    config: Config, extra: Iterable[Tool] = (), providers: Iterable[ToolProvider] = ()
) -> ToolRegistry:
    agent = config.agent
    tools: list[Tool] = [*file_tools(), *memory_tools()]
    if agent.web_fetch.enabled:
        tools.append(
            WebFetchTool(
                allow_hosts=agent.web_fetch.allow_hosts,
                max_bytes=agent.web_fetch.max_bytes,
                timeout=agent.web_fetch.timeout_s,
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
            )
        )
    tools.extend(extra)
    return ToolRegistry(tools, providers).restricted(agent.tools.allow, agent.tools.deny)


def exec_sandbox(config: Config) -> Sandbox:
    """The sandbox `agent.exec` asks for, or ConfigError (exit 78) saying what to do."""
    cfg = config.agent.exec
    limits = Limits(cfg.cpu_s, cfg.memory_mb, cfg.max_processes, cfg.max_file_mb)
    hide = sandbox_hidden(config)
    try:
        sandbox = select_sandbox(cfg.sandbox, network=cfg.network, limits=limits, hide=hide)
    except SandboxUnavailable as exc:
        raise ConfigError(f"agent.exec: {exc}") from None
    log.info("exec sandbox: %s", sandbox.describe())
    return sandbox
