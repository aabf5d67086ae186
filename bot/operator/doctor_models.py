"""`perch doctor`'s model checks: one per provider, naming the one that fails.

A provider whose key or address kept an unset `${...}` is reported without a call, and no
request goes to a public host without a key (a loopback or private address may need none).
A provider is checked when `agent.model`, a fallback or `agent.recall.embeddings` uses it, or
when it is configured with a key or `models:`. Anthropic kinds get a free `count_tokens` call
with the model used; OpenAI kinds list `GET /models` (key accepted, and each used or offered
model listed; an endpoint that cannot list models is reported as reachable only). Results are
`(ok, name, detail, fix)` tuples the doctor prints; the check of the `anthropic` provider is
named `model`, any other `model <provider>`.
"""

from __future__ import annotations

import ipaddress
import json
from urllib.parse import urlsplit

import aiohttp

from agents.providers.model_names import DEFAULT_PROVIDER
from bot.config.agent import DEFAULT_MODEL
from bot.config.models import fallbacks, split_model
from bot.config.providers import ProviderConfig
from bot.config.schema import Config

Result = tuple[bool, str, str, str]


def _models_of(config: Config, provider: str) -> list[str]:
    """The models of `provider` that the config uses or offers."""
    out: list[str] = []
    settings = config.providers.get(provider)
    named = [config.agent.model, *fallbacks(config)]
    named += [f"{provider}/{m}" for m in (settings.models if settings else [])]
    for name in named:
        owner, model = split_model(config, name)
        if owner == provider and model not in out:
            out.append(model)
    embeddings = config.agent.recall.embeddings  # recall's vectors use a model too
    if embeddings is not None and embeddings.provider == provider and embeddings.model not in out:
        out.append(embeddings.model)
    return out


def checked_providers(config: Config) -> list[str]:
    names = []
    for name, settings in config.providers.items():
        used = bool(_models_of(config, name))
        configured = name != DEFAULT_PROVIDER and (settings.api_key or settings.models)
        if used or configured:
            names.append(name)
    return names


async def model_checks(config: Config, http: aiohttp.ClientSession) -> list[Result]:
    out: list[Result] = []
    for name in checked_providers(config):
        settings = config.providers.get(name)
        assert settings is not None
        label = "model" if name == DEFAULT_PROVIDER else f"model {name}"
        models = _models_of(config, name)
        if config.is_unresolved(f"providers.{name}"):
            fix = "set what the secret line above names (perch onboard, or secrets.env_file)"
            out.append((False, label, "not checked: its key or address is not set", fix))
        elif not settings.api_key and not _local(settings.base_url):
            fix = f"set providers.{name}.api_key (or point base_url at a local server)"
            out.append((False, label, "no API key, so nothing was sent", fix))
        elif settings.kind == "anthropic":
            out.append(await _anthropic(http, name, label, settings, models))
        else:
            out.append(await _openai(http, name, label, settings, models))
    return out


def _local(url: str) -> bool:
    """A loopback or private address (a local Ollama needs no key); never a public host."""
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


async def _anthropic(
    http: aiohttp.ClientSession, name: str, label: str, settings: ProviderConfig, models: list[str]
) -> Result:
    key_fix = (
        "export ANTHROPIC_API_KEY=sk-ant-..."
        if name == DEFAULT_PROVIDER
        else f"set providers.{name}.api_key"
    )
    if not settings.api_key:
        return False, label, "no API key", key_fix
    model = models[0] if models else DEFAULT_MODEL
    url = settings.base_url.rstrip("/") + "/v1/messages/count_tokens"
    body = {"model": model, "messages": [{"role": "user", "content": "ping"}]}
    headers = {"x-api-key": settings.api_key, "anthropic-version": "2023-06-01"}
    try:
        async with http.post(url, json=body, headers=headers) as response:
            status = response.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        return (
            False,
            label,
            f"{settings.base_url} unreachable ({type(exc).__name__})",
            f"check providers.{name}.base_url and the network",
        )
    if status == 200:
        return True, label, f"{model} via {settings.base_url} answers", ""
    if status in (401, 403):
        fix = "set a valid ANTHROPIC_API_KEY" if name == DEFAULT_PROVIDER else key_fix
        return False, label, "the API key was rejected", fix
    if status == 404:
        return (
            False,
            label,
            f"model {model!r} not found",
            "set agent.model to a model your key can use",
        )
    return (
        False,
        label,
        f"{settings.base_url} answered HTTP {status}",
        "try again later; check status.anthropic.com",
    )


async def _openai(
    http: aiohttp.ClientSession, name: str, label: str, settings: ProviderConfig, models: list[str]
) -> Result:
    url = settings.base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {settings.api_key or 'none'}"}
    try:
        async with http.get(url, headers=headers) as response:
            status = response.status
            payload = await response.read()
    except (aiohttp.ClientError, TimeoutError) as exc:
        return (
            False,
            label,
            f"provider {name}: {settings.base_url} unreachable ({type(exc).__name__})",
            f"check that the server runs and providers.{name}.base_url",
        )
    if status in (401, 403):
        return (
            False,
            label,
            f"provider {name}: the API key was rejected ({status})",
            f"set a valid providers.{name}.api_key",
        )
    if status != 200:
        return True, label, f"provider {name}: {settings.base_url} answers (cannot list models)", ""
    try:
        listed = {str(m.get("id")) for m in json.loads(payload).get("data", [])}
    except (ValueError, AttributeError):
        return True, label, f"provider {name}: {settings.base_url} answers", ""
    missing = [m for m in models if m not in listed]
    if missing:
        return (
            False,
            label,
            f"provider {name} does not list {', '.join(missing)}",
            f"pull or enable the model, or fix the name ({len(listed)} models listed)",
        )
    shown = ", ".join(models) or "no model used"
    return True, label, f"provider {name}: {shown} listed at {settings.base_url}", ""
