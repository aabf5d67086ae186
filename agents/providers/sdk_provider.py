"""What the two SDK-backed providers share (`anthropic.py`, `openai.py`), written once.

`SdkProvider` holds a provider's settings (its config name, key, address, timeouts, prices),
the retry policy (`agents.providers.retry`) around its own `classify`, and the SDK client: made
on first use, its first import (about a second of CPU) done in a worker thread so the event
loop keeps serving other chats. It runs one retried call and turns the policy's verdict into
the `ModelError` a user reads, naming the setting to fix. A subclass says how to make its SDK
client (`_make_sdk`, with the SDK's own retries off), what else it keeps (`_setup`) and
how to stream one response. The API
key never reaches a log or a repr.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable, Mapping
from typing import ClassVar, Generic, Protocol, TypeVar

from agents.model import ModelError, ModelResponse
from agents.pricing import Price
from agents.providers.retry import (
    CONNECT_TIMEOUT_S,
    BrokenAfterText,
    Failure,
    GaveUp,
    RetryPolicy,
    Sleep,
    broken_error,
    final_error,
)


class SdkClient(Protocol):
    """An SDK's async client, as far as the provider manages it."""

    async def close(self) -> None: ...


Sdk = TypeVar("Sdk", bound=SdkClient)


class SdkProvider(Generic[Sdk]):
    """A `ModelClient` on a vendor SDK: settings, retries, the client's life. `sleep` replaces
    `asyncio.sleep` between attempts (tests record the schedule with it); `prices` overrides
    the built-in price table per model (USD per million tokens)."""

    kind: ClassVar[str]  # the provider kind of the config (`providers.<name>.kind`)
    sdk_module: ClassVar[str]  # the SDK's import name, loaded off the event loop
    default_base_url: ClassVar[str]  # named in errors when no base_url is set

    def __init__(
        self,
        api_key: str,
        base_url: str | None = None,
        *,
        name: str | None = None,  # its config key; the kind by default
        timeout: float = 600,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        max_attempts: int = 8,
        backoff_base: float = 2.0,
        backoff_cap: float = 60.0,
        retry_after_cap: float = 120.0,
        unreachable_budget_s: float = 30.0,
        prices: Mapping[str, Price] | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        self.name = name or self.kind
        self._api_key = api_key
        self._base_url = base_url
        self._timeout = timeout
        self._connect_timeout = min(connect_timeout, timeout)
        self._prices = dict(prices or {})
        self.policy = RetryPolicy(
            self.classify,
            max_attempts=max_attempts,
            backoff_base=backoff_base,
            backoff_cap=backoff_cap,
            retry_after_cap=retry_after_cap,
            unreachable_budget_s=unreachable_budget_s,
            sleep=sleep,
        )
        self._client: Sdk | None = None
        self._setup()

    def __repr__(self) -> str:  # never show the key
        return f"{type(self).__name__}(name={self.name!r}, base_url={self._base_url!r})"

    @property
    def max_attempts(self) -> int:
        return self.policy.max_attempts

    @staticmethod
    def classify(exc: BaseException) -> Failure | None:
        """Map an SDK or transport exception to a `Failure`; None when it is not a model API
        error (such errors propagate unchanged)."""
        raise NotImplementedError

    def _setup(self) -> None:
        """Make what the subclass keeps besides the settings (called once, by `__init__`)."""

    def _make_sdk(self) -> Sdk:
        """The SDK's client on this provider's key, address and timeouts, its retries off."""
        raise NotImplementedError

    def _shown(self, model: str) -> str:
        """How a model of this provider is named in logs and errors."""
        return f"{self.name}/{model}"

    def _key_setting(self) -> str:
        """Where the user sets this provider's key (named when the key is refused)."""
        return f"providers.{self.name}.api_key"

    def _sdk(self) -> Sdk:
        if self._client is None:
            self._client = self._make_sdk()
        return self._client

    async def _sdk_off_loop(self) -> Sdk:
        """The SDK client; its first import runs in a worker thread."""
        if self._client is None:
            await asyncio.to_thread(importlib.import_module, self.sdk_module)
        return self._sdk()

    async def warm(self) -> None:
        """Load the SDK and build the client ahead of the first request (the daemon calls
        this in the background after READY), so the first reply is as quick as later ones."""
        await self._sdk_off_loop()

    async def aclose(self) -> None:
        """Close the HTTP connections (safe to call twice, or before any call)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def _retried(
        self, model: str, attempt: Callable[[], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        """`attempt` under the retry policy; `ModelError` when the policy gives up."""
        shown = self._shown(model)
        try:
            return await self.policy.call(shown, attempt)
        except BrokenAfterText as exc:
            raise broken_error(exc.failure) from exc.__cause__
        except GaveUp as exc:
            raise self._error(exc, shown) from exc.__cause__

    def _error(self, gave_up: GaveUp, shown: str) -> ModelError:
        return final_error(
            gave_up,
            shown,
            where=self._base_url or self.default_base_url,
            setting=f"providers.{self.name}.base_url",
            key_env=self._key_setting(),
            timeout=self._timeout,
        )

    def _price(self, model: str, answered_by: str) -> Price | None:
        """The configured price of the model asked for, else of the model that answered."""
        return self._prices.get(model) or self._prices.get(answered_by)
