"""The Signal channel's settings (`channels.signal` in config.yaml), checked when it loads.

Owns `SignalOptions`, the config model the adapter runs on.
"""

from __future__ import annotations

from pydantic import model_validator

from channels.options import ChannelPolicy


class SignalOptions(ChannelPolicy):
    """Configuration of the Signal channel (`channels.signal` in config.yaml).

    `send_attempts` and `retry_initial` bound the retries of one send (429, 5xx, network
    errors); `reconnect_initial`/`reconnect_max` the backoff of the receive socket.
    """

    number: str = ""
    service_url: str = "http://127.0.0.1:8080"
    typing_interval: float = 10.0
    chunk_limit: int = 4000
    reconnect_initial: float = 1.0
    reconnect_max: float = 60.0
    send_read_receipts: bool = False
    send_attempts: int = 5
    retry_initial: float = 0.5

    @model_validator(mode="after")
    def _usable(self) -> SignalOptions:
        if not self.enabled:
            return self
        if not self.number:
            raise ValueError(
                "channels.signal.number is empty: set SIGNAL_NUMBER to the bot's registered "
                "number (E.164, e.g. +15551234567)"
            )
        return self
