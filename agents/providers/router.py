"""One `ModelClient` over several named providers, with fallbacks that may cross them.

Model names are `<provider>/<model>` (`local/qwen3:8b`), read by
`agents.providers.model_names`: a name whose first segment is no configured provider is a
model of the default provider (`claude-sonnet-5-5` means `anthropic/claude-sonnet-5-5`;
`openrouter/anthropic/claude-x` is OpenRouter's model `anthropic/claude-x`). When a model gives up with a failure another model may not share
(429, 5xx, overload, timeout, unreachable, unknown model), the call moves to the next name of
`fallbacks`; each model is tried once per call. `ModelResponse.model` is the qualified name
of the model that answered, so the loop can keep using it for the rest of its turn. Each
model tried is one call to the `RunObserver` (`agents.observer`), with its provider's name.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from agents.model import ModelClient, ModelError, ModelRequest, ModelResponse, TextCallback
from agents.observer import NO_OBSERVER, ModelCallWatch, RunObserver
from agents.providers.model_names import DEFAULT_PROVIDER, parse_model_name

log = logging.getLogger(__name__)


class ModelRouter:
    """Routes each request to its provider; `providers` maps config names to clients."""

    def __init__(
        self,
        providers: Mapping[str, ModelClient],
        *,
        default_provider: str = DEFAULT_PROVIDER,
        fallbacks: Sequence[str] = (),
        observer: RunObserver = NO_OBSERVER,
    ) -> None:
        if not providers:
            raise ValueError("ModelRouter needs at least one provider")
        self.observer = observer
        self.providers = dict(providers)
        self.default_provider = default_provider
        self.fallbacks = tuple(self.qualify(f) for f in fallbacks)

    def split(self, name: str) -> tuple[str, str]:
        """(provider, model) of a model name."""
        parsed = parse_model_name(name, self.providers, self.default_provider)
        return parsed.provider, parsed.model

    def qualify(self, name: str) -> str:
        return parse_model_name(name, self.providers, self.default_provider).qualified

    def display(self, name: str) -> str:
        """The name as a user writes it: bare for the default provider."""
        parsed = parse_model_name(name, self.providers, self.default_provider)
        return parsed.shown(self.default_provider)

    def chain(self, name: str) -> list[str]:
        """The models a call for `name` may try, in order, each once."""
        first = self.qualify(name)
        if first in self.fallbacks:  # already on a fallback: go on from there
            return list(self.fallbacks[self.fallbacks.index(first) :])
        return [first, *(f for f in self.fallbacks if f != first)]

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        chain = self.chain(request.model)
        for index, qualified in enumerate(chain):
            provider, model = self.split(qualified)
            client = self.providers.get(provider)
            if client is None:
                raise ModelError(
                    f"Model {qualified!r} names no configured provider {provider!r}. "
                    "Add it under providers: in config.yaml.",
                    kind="not_found",
                )
            try:
                with self.observer.model_call(provider, model, request) as watch:
                    call = replace(request, model=model)
                    response = await client.complete(call, _noting_first(on_text, watch))
                    watch.finished(response)
            except ModelError as exc:
                if exc.may_fall_back and index + 1 < len(chain):
                    log.warning(
                        "model %s failed for good (%s); falling back to %s",
                        self.display(qualified),
                        exc.kind,
                        self.display(chain[index + 1]),
                    )
                    continue
                if index > 0:
                    tried = ", ".join(self.display(m) for m in chain[: index + 1])
                    raise ModelError(
                        f"{exc} Tried models: {tried}.",
                        status=exc.status,
                        retryable=exc.retryable,
                        kind=exc.kind,
                        detail=exc.detail,
                    ) from exc
                raise
            response.model = self.display(qualified)
            return response
        raise AssertionError("unreachable: the last model either returns or raises")

    async def warm(self) -> None:
        """Warm every provider's SDK and client, one after the other; a failure is logged
        (the first real request reports it properly) and never raised."""
        began = time.perf_counter()
        for name, client in self.providers.items():
            try:
                await client.warm()
            except Exception as exc:
                log.warning("could not prepare model provider %s ahead of time: %s", name, exc)
        log.info("model providers loaded in %.0f ms", (time.perf_counter() - began) * 1000)

    async def aclose(self) -> None:
        for client in self.providers.values():
            await client.aclose()


def _noting_first(on_text: TextCallback | None, watch: ModelCallWatch) -> TextCallback | None:
    """`on_text` that tells `watch` when the first text arrives (None stays None)."""
    if on_text is None:
        return None
    first = True

    async def noting(delta: str) -> None:
        nonlocal first
        if first:
            first = False
            watch.first_text()
        await on_text(delta)

    return noting
