"""The channel registry: config key -> plug-in. The one place that lists the platforms.

Adding a platform is one subpackage (`channels/<key>/` with its options model, adapter and
`plugin.PLUGIN`) and one line in `BUILTIN` below; tests and extensions call `register`.
`BUILTIN` names modules, imported one by one when this module loads: a platform subpackage
that is not there (removed from an install) is skipped with a debug line and the others work
as before; any other import error is a bug and raises. Registry order matters: the owner
(heartbeat, cron `owner`, the `message` tool) is looked for in the running channels in this
order.

The config loader validates `channels:` with `validate_channels`, a model composed from the
registered plug-ins' options models, so a bad option of any platform fails when the config
loads, naming its key. `build_channels` builds the enabled adapters, importing each platform's
library only then.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from channels.base import Channel
from channels.options import ChannelOptions, secret_values
from channels.plugin import Capabilities, ChannelContext, ChannelPlugin
from channels.state import ChannelState, MemoryState

log = logging.getLogger(__name__)

# The built-in plug-ins, in registry order: modules whose `PLUGIN` is a `ChannelPlugin`.
BUILTIN: tuple[str, ...] = (
    "channels.telegram.plugin",
    "channels.slack.plugin",
    "channels.signal.plugin",
    "channels.discord.plugin",
    "channels.whatsapp.plugin",
    "channels.matrix.plugin",
    "channels.email.plugin",
    "channels.console",
)


def load_plugins(module_names: Iterable[str]) -> tuple[ChannelPlugin, ...]:
    """The plug-ins of the modules that are installed, in the given order."""
    found: list[ChannelPlugin] = []
    for name in module_names:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # Only the plug-in's own module or package missing means "not installed"; a
            # module missing further down is a broken plug-in and must say so.
            if exc.name is None or not (name == exc.name or name.startswith(exc.name + ".")):
                raise
            log.debug("channel plug-in %s is not installed; skipped", name)
            continue
        plugin = getattr(module, "PLUGIN", None)
        if not isinstance(plugin, ChannelPlugin):
            raise TypeError(f"{name}.PLUGIN must be a ChannelPlugin, got {type(plugin).__name__}")
        found.append(plugin)
    return tuple(found)


_builtin: tuple[ChannelPlugin, ...] = load_plugins(BUILTIN)
_plugins: dict[str, ChannelPlugin] = {p.key: p for p in _builtin}
# Built-in platforms whose subpackage is not installed: a config naming one is told so.
_absent: tuple[str, ...] = tuple(
    key for key in (name.split(".")[1] for name in BUILTIN) if key not in _plugins
)
_KEY = re.compile(r"^[a-z][a-z0-9_]*$")


def register(plugin: ChannelPlugin) -> None:
    """Add a plug-in (after the built-in ones), or replace the one with the same key."""
    if not _KEY.match(plugin.key):
        raise ValueError(f"channel key {plugin.key!r}: use lower-case letters, digits and _")
    _plugins[plugin.key] = plugin


def unregister(key: str) -> None:
    """Forget a plug-in added by `register` (the built-in ones come back if replaced)."""
    _plugins.pop(key, None)
    for plugin in _builtin:
        if plugin.key == key:
            _plugins[key] = plugin


def builtin() -> tuple[ChannelPlugin, ...]:
    """The built-in plug-ins that are installed, in registry order."""
    return _builtin


def plugins() -> tuple[ChannelPlugin, ...]:
    """Every plug-in, in registry order."""
    return tuple(_plugins.values())


def names() -> tuple[str, ...]:
    return tuple(_plugins)


def get(key: str) -> ChannelPlugin | None:
    return _plugins.get(key)


def capabilities(key: str) -> Capabilities:
    """A channel's capabilities (defaults for a channel no plug-in knows)."""
    plugin = _plugins.get(key)
    return plugin.capabilities if plugin is not None else Capabilities()


def single_receiver(key: str, options: ChannelOptions | None) -> bool:
    """True if channel `key` with these options must receive on one instance at a time."""
    plugin = _plugins.get(key)
    return plugin is not None and options is not None and plugin.single_receiver(options)


def in_registry_order(keys: Iterable[str]) -> list[str]:
    """`keys` sorted by registry order; unknown keys follow in their given order."""
    given = list(dict.fromkeys(keys))
    known = [k for k in _plugins if k in given]
    return known + [k for k in given if k not in _plugins]


# -- the `channels:` config section ----------------------------------------------------------


class ChannelsConfig(BaseModel):
    """The validated `channels:` section: one options model per registered plug-in."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def options(self, key: str) -> ChannelOptions | None:
        """The options of channel `key` (enabled or not), or None for an unknown key."""
        value = getattr(self, key, None)
        return value if isinstance(value, ChannelOptions) else None

    def all(self) -> dict[str, ChannelOptions]:
        """Every channel's options, in registry order."""
        found = {key: self.options(key) for key in type(self).model_fields}
        return {k: v for k, v in found.items() if v is not None}

    def enabled(self) -> list[str]:
        return [key for key, options in self.all().items() if options.enabled]


_models: dict[tuple[tuple[str, type[ChannelOptions]], ...], type[ChannelsConfig]] = {}


def channels_model() -> type[ChannelsConfig]:
    """The `channels:` model for the plug-ins registered right now."""
    signature = tuple((p.key, p.options) for p in _plugins.values())
    model = _models.get(signature)
    if model is None:
        fields: dict[str, Any] = {
            key: (options, Field(default_factory=options)) for key, options in signature
        }
        model = create_model("ChannelsConfig", __base__=ChannelsConfig, **fields)
        _models[signature] = model
    return model


def validate_channels(data: object) -> ChannelsConfig:
    """The `channels:` section validated by each plug-in's model (pydantic's ValidationError
    on a bad option, located at `<key>.<field>`)."""
    model = channels_model()
    if isinstance(data, model):
        return data
    if isinstance(data, ChannelsConfig):
        data = {k: v.model_dump() for k, v in data.all().items()}
    if isinstance(data, Mapping):
        data = without_absent(data)
    return model.model_validate({} if data is None else data)


def without_absent(sections: Mapping[str, Any]) -> dict[str, Any]:
    """`channels:` without the sections of built-in platforms this install lacks: a disabled
    one is dropped (it asks for nothing), an enabled one is refused saying the platform is
    not installed (not "unknown key", as for a misspelt one)."""
    kept: dict[str, Any] = {}
    for key, section in sections.items():
        if key in _plugins or key not in _absent:
            kept[key] = section
            continue
        if not isinstance(section, Mapping) or not _switched_on(section.get("enabled")):
            log.debug("channels.%s: the platform is not installed; its section is ignored", key)
            continue
        raise ValueError(
            f"channels.{key}: the {key} platform is not installed in this Perch (its package "
            f"channels/{key} is missing): reinstall Perch with it, or set "
            f"channels.{key}.enabled: false"
        )
    return kept


def _switched_on(value: object) -> bool:
    """`enabled:` as the options model reads it (off unless set; "false", 0 ... are off)."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def default_channels() -> ChannelsConfig:
    return channels_model()()


# -- what the daemon asks of the plug-ins ----------------------------------------------------


def build_channels(
    config: ChannelsConfig,
    request_stop: Callable[[], None] | None = None,
    state_dir: Path | None = None,
    state: Callable[[str], ChannelState] | None = None,
) -> dict[str, Channel]:
    """The enabled channels' adapters, in registry order (each library imported only now);
    `state_dir` and `state(key)` are handed to each in its `ChannelContext` (what it keeps
    across restarts: files, and small values in the store; in memory when not given)."""
    enabled = config.enabled()
    built: dict[str, Channel] = {}
    for key in enabled:
        plugin = _plugins[key]
        options = config.options(key)
        assert options is not None
        others = tuple(k for k in enabled if k != key)
        kept = state(key) if state is not None else MemoryState()
        context = ChannelContext(request_stop, others, state_dir, kept)
        built[key] = plugin.create(options, context)
    return built


def secrets(config: ChannelsConfig) -> list[str]:
    """Every credential in the channel options (fields typed `Secret`)."""
    return [value for options in config.all().values() for value in secret_values(options)]


def redaction_patterns() -> list[re.Pattern[str]]:
    """Token shapes the plug-ins ask the log redactor to hide."""
    return [pattern for plugin in _plugins.values() for pattern in plugin.redact]


def quiet_loggers() -> list[str]:
    """Library loggers that put credentials in URLs at INFO/DEBUG; the daemon quiets them."""
    return [name for plugin in _plugins.values() for name in plugin.quiet_loggers]


def owner_ids(config: ChannelsConfig, keys: Mapping[str, object]) -> dict[str, tuple[str, ...]]:
    """Owner ids of each channel in `keys`, in registry order (channels without options: none)."""
    found: dict[str, tuple[str, ...]] = {}
    for key in in_registry_order(keys):
        options = config.options(key)
        found[key] = options.owner_ids() if options is not None else ()
    return found
