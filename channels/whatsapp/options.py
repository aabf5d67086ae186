"""The WhatsApp channel's settings (`channels.whatsapp` in config.yaml), checked when it loads.

Owns `WhatsAppOptions`, the config model the adapter runs on, and `wa_id`, the one spelling
of a phone number Perch uses: the digits WhatsApp calls a `wa_id` (`+1 555-010-0001` and
`15550100001` are the same person). `allow_from` may hold E.164 numbers; they are kept as
`wa_id`s so they compare with the senders the webhook names. Every refusal names the
`channels.whatsapp` key at fault and says what to put there.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from channels.options import ChannelPolicy, IdList, Secret

_PHONE_MARKS = re.compile(r"[\s().+-]")


def wa_id(number: str) -> str:
    """`number` as WhatsApp's `wa_id`: the digits alone (E.164 without `+`, spaces, dashes)."""
    return _PHONE_MARKS.sub("", number)


def _numbers(ids: list[str]) -> list[str]:
    found: list[str] = []
    for given in ids:
        if given == "*":
            found.append(given)
            continue
        digits = wa_id(given)
        if not digits.isdigit() or not 6 <= len(digits) <= 15:
            raise ValueError(
                f"{given!r} is not a phone number; write it in E.164, e.g. +15550100001"
            )
        found.append(digits)
    return found


class WindowTemplate(BaseModel):
    """An approved message template sent instead of a free-form message that falls outside
    the 24-hour customer-service window: `name` and `language` as approved in WhatsApp
    Manager; its body's one variable `{{1}}` gets the start of the held text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    language: str = "en_US"


class WhatsAppOptions(ChannelPolicy):
    """Configuration of the WhatsApp channel (`channels.whatsapp` in config.yaml).

    Beyond the documented keys: `send_attempts`/`retry_initial` bound the retries of one
    Graph call (429, 5xx, network errors); `media_timeout` bounds one media download;
    `typing_interval` is how often the typing indicator is renewed while a reply is written.
    """

    phone_number_id: str = ""
    access_token: Secret = ""
    app_secret: Secret = ""
    verify_token: Secret = ""
    api_base: str = "https://graph.facebook.com/v23.0"
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = Field(8444, ge=0, le=65535)
    webhook_path: str = "/whatsapp/webhook"
    allow_from: Annotated[IdList, AfterValidator(_numbers)] = Field(default_factory=list)
    window_template: WindowTemplate | None = None
    read_receipts: bool = True
    chunk_limit: int = Field(4096, ge=100, le=4096)
    typing_interval: float = 20.0
    media_timeout: float = 15.0
    send_attempts: int = 4
    retry_initial: float = 0.5

    @model_validator(mode="after")
    def _usable(self) -> WhatsAppOptions:
        if not self.enabled:
            return self
        missing = [
            (key, variable)
            for key, variable in (
                ("phone_number_id", "WHATSAPP_PHONE_NUMBER_ID"),
                ("access_token", "WHATSAPP_ACCESS_TOKEN"),
                ("app_secret", "WHATSAPP_APP_SECRET"),
                ("verify_token", "WHATSAPP_VERIFY_TOKEN"),
            )
            if not getattr(self, key)
        ]
        if missing:
            key, variable = missing[0]
            raise ValueError(
                f"channels.whatsapp.{key} is empty; set {variable} (Meta app dashboard > "
                "WhatsApp > API Setup, or App settings > Basic for the app secret)"
            )
        if not self.phone_number_id.isdigit():
            raise ValueError(
                "channels.whatsapp.phone_number_id must be the numeric Phone number ID from "
                "WhatsApp > API Setup (not the phone number itself)"
            )
        if not self.api_base.startswith(("https://", "http://")):
            raise ValueError("channels.whatsapp.api_base must be an http(s) URL")
        if not self.webhook_path.startswith("/"):
            raise ValueError("channels.whatsapp.webhook_path must start with /")
        return self
