"""The `web:` config section: the dashboard the daemon serves (`bot/web/`).

`web: {enabled, listen, token}`: off by default; on, it listens on `listen` (`host:port`,
`[v6]:port`; 127.0.0.1:8787 by default). Every page needs the token (a login form, or
`Authorization: Bearer`): a listen address that is not loopback needs `token` set here,
and on loopback an unset token makes the daemon generate one and keep it in the state
directory (`web.token`, mode 0600) rather than serve the dashboard to anyone on the machine.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from bot.config.observe import is_loopback, split_listen

DEFAULT_WEB_LISTEN = "127.0.0.1:8787"
MIN_TOKEN_CHARS = 16


class WebConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    listen: str = DEFAULT_WEB_LISTEN
    token: str | None = None  # required when `listen` is not loopback; else generated

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        split_listen(value)
        return value.strip()

    @field_validator("token")
    @classmethod
    def _token(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if len(value.strip()) < MIN_TOKEN_CHARS:
            raise ValueError(
                f"must be at least {MIN_TOKEN_CHARS} characters (e.g. the output of "
                "openssl rand -hex 24), or null on a loopback listen"
            )
        return value.strip()

    @model_validator(mode="after")
    def _token_off_loopback(self) -> WebConfig:
        host, _port = split_listen(self.listen)
        if self.enabled and not is_loopback(host) and not self.token:
            raise ValueError(
                f"listen {self.listen} is reachable from other machines: set web.token "
                "(the dashboard's login) or listen on 127.0.0.1"
            )
        return self
