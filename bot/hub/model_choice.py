"""`/model`: the model each session uses, chosen per chat and kept across restarts.

`ModelChoices` reads a session key's choice from the store once and caches it (a turn costs
no query; the cache keeps the `CACHED_SESSIONS` most recently used keys, so memory stays flat
in the number of chats that ever spoke, and an evicted key is read again); `command(key, argument)` answers `/model` (list, marking the current one),
`/model <provider>/<model>` (switch this session) and `/model default` (back to
`agent.model`). Sub-agents inherit the choice through `ToolContext.model`.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

from agents.providers.model_names import parse_model_name
from bot.config.models import display_model, offered_models
from bot.config.schema import Config

CACHED_SESSIONS = 4096
USAGE = "Switch with /model <provider>/<model>; /model default returns to the configured one."


class ModelStore(Protocol):
    async def session_model(self, session_key: str) -> str: ...

    async def set_session_model(self, session_key: str, model: str) -> None: ...


class ModelChoices:
    def __init__(self, store: ModelStore, config: Config) -> None:
        self._store = store
        self._config = config
        self._cache: OrderedDict[str, str] = OrderedDict()

    @property
    def default(self) -> str:
        return display_model(self._config, self._config.agent.model)

    async def chosen(self, session_key: str) -> str:
        """The session's own choice, "" when it uses the default."""
        choice = self._cache.get(session_key)
        if choice is None:
            choice = await self._store.session_model(session_key)
            self._remember(session_key, choice)
        else:
            self._cache.move_to_end(session_key)
        return choice

    def _remember(self, session_key: str, choice: str) -> None:
        self._cache[session_key] = choice
        self._cache.move_to_end(session_key)
        while len(self._cache) > CACHED_SESSIONS:
            self._cache.popitem(last=False)

    async def current(self, session_key: str) -> str:
        return await self.chosen(session_key) or self.default_for(session_key)

    def default_for(self, session_key: str) -> str:
        """The configured model of the agent the session belongs to (`agents:`)."""
        agent = session_key.split(":", 2)[1] if session_key.startswith("agent:") else ""
        try:
            config = self._config.for_agent(agent)
        except KeyError:
            return self.default
        return display_model(config, config.agent.model)

    async def command(self, session_key: str, argument: str) -> str:
        wanted = argument.strip()
        default = self.default_for(session_key)  # the session's agent's model
        if not wanted:
            return await self._listing(session_key)
        if wanted.lower() == "default":
            await self._set(session_key, "")
            return f"Back to the configured model: {default}."
        problem = self._problem(wanted)
        if problem is not None:
            return problem
        shown = display_model(self._config, wanted)
        await self._set(session_key, "" if shown == default else shown)
        note = "" if shown in offered_models(self._config) else " (not in the configured list)"
        return f"This chat now uses {shown}{note}. /model default goes back to {default}."

    def _problem(self, wanted: str) -> str | None:
        parsed = parse_model_name(wanted, self._config.providers.root)
        providers = [name for name, _ in self._config.providers.items()]
        if parsed.prefix is not None and not parsed.explicit:
            return (
                f"Unknown provider {parsed.prefix!r} in {wanted!r}. Configured providers: "
                f"{', '.join(providers)}. Write /model <provider>/<model>."
            )
        provider = parsed.provider
        settings = self._config.providers.get(provider)
        if settings is not None and settings.kind == "anthropic" and not settings.api_key:
            return f"Provider {provider!r} has no API key (providers.{provider}.api_key)."
        return None

    async def _set(self, session_key: str, model: str) -> None:
        await self._store.set_session_model(session_key, model)
        self._remember(session_key, model)

    async def _listing(self, session_key: str) -> str:
        current = await self.current(session_key)
        default = self.default_for(session_key)
        models = offered_models(self._config)
        if default not in models:
            models.insert(0, default)
        if current not in models:
            models.append(current)
        lines = ["Models (* = this chat):"]
        for model in models:
            mark = "*" if model == current else " "
            suffix = " (default)" if model == default else ""
            lines.append(f"{mark} {model}{suffix}")
        lines.append(USAGE)
        return "\n".join(lines)
