"""Logging the bot's account in: a matrix-nio `AsyncClient` with its device restored.

Owns `log_in(options, state)`. With an `access_token` the device is the token's (asked of
`/account/whoami`); with a `password` Perch logs in once as `device_name` and keeps the
device and its token in the state folder, so a restart is the same device (its keys, its
trust) and not a new one each time; a kept token the server no longer knows is replaced by
a fresh login. With `encryption` on, the client's crypto store (SQLite) is in the same folder,
encrypted with a key made once and kept beside it (`state.py`), set before nio opens it (a
password login opens it at once). A refused token or password raises `LoginRefused` (retrying
cannot fix it); anything else is the caller's to retry.
"""

from __future__ import annotations

import logging

import nio
from nio.crypto import ENCRYPTION_ENABLED
from nio.store import SqliteStore

from channels.matrix.options import MatrixOptions
from channels.matrix.state import AccountState

log = logging.getLogger("channels.matrix")

_REFUSED = {"M_UNKNOWN_TOKEN", "M_FORBIDDEN", "M_USER_DEACTIVATED", "M_MISSING_TOKEN"}


class LoginRefused(Exception):
    """The homeserver refused the account's credentials; the message says what to change."""


def encryption_available() -> bool:
    """True when the crypto extra (vodozemac) is installed."""
    return bool(ENCRYPTION_ENABLED)


def _config(options: MatrixOptions, state: AccountState) -> nio.AsyncClientConfig:
    encrypted = options.encryption and encryption_available()
    return nio.AsyncClientConfig(
        pickle_key=state.pickle_key() if encrypted else "DEFAULT_KEY",
        store=SqliteStore,  # nio asks for a store class even with encryption off
        encryption_enabled=encrypted,
        store_sync_tokens=False,  # the sync position is Perch's own (state.py)
        max_limit_exceeded=20,
        max_timeouts=2,
        request_timeout=options.sync_timeout + 30,
    )


async def log_in(options: MatrixOptions, state: AccountState) -> nio.AsyncClient:
    """A logged-in client whose device (and crypto store, if on) is restored."""
    folder = state.prepare()
    client = nio.AsyncClient(
        options.api_base, options.user_id, store_path=str(folder), config=_config(options, state)
    )
    try:
        if options.access_token:
            await _with_token(client, options, state)
        else:
            await _with_password(client, options, state)
    except BaseException:
        await client.close()
        raise
    return client


async def _with_token(client: nio.AsyncClient, options: MatrixOptions, state: AccountState) -> None:
    client.access_token = options.access_token
    device_id = await _whoami(client, options)
    if not device_id:
        raise LoginRefused(
            "the access token has no device (an appservice token?); use a user's login token, "
            "or channels.matrix.password"
        )
    state.save_device(device_id, "")
    client.restore_login(options.user_id, device_id, options.access_token)


async def _with_password(
    client: nio.AsyncClient, options: MatrixOptions, state: AccountState
) -> None:
    kept = state.device()
    if kept is not None and kept.access_token:
        client.access_token = kept.access_token
        try:
            if await _whoami(client, options) == kept.device_id:
                client.restore_login(options.user_id, kept.device_id, kept.access_token)
                return
        except LoginRefused:
            log.info("matrix: the kept device's token is no longer valid; logging in again")
        client.access_token = ""
    if kept is not None:
        client.device_id = kept.device_id  # log the same device in again, keys and all
    response = await client.login(options.password, device_name=options.device_name)
    if isinstance(response, nio.LoginError):
        if response.status_code in _REFUSED:
            raise LoginRefused(
                f"the homeserver refused the password for {options.user_id} "
                f"({response.status_code}): check MATRIX_PASSWORD"
            )
        raise ConnectionError(f"login failed: {response}")
    state.save_device(response.device_id, response.access_token)  # login loaded the store
    log.info("matrix: logged in as %s, device %s", response.user_id, response.device_id)


async def _whoami(client: nio.AsyncClient, options: MatrixOptions) -> str:
    """The token's device id, after checking it is the configured user's."""
    response = await client.whoami()
    if isinstance(response, nio.WhoamiError):
        if response.status_code in _REFUSED:
            raise LoginRefused(
                f"the homeserver refused the access token ({response.status_code}): set "
                "MATRIX_ACCESS_TOKEN to a valid token of the bot's account"
            )
        raise ConnectionError(f"whoami failed: {response}")
    if response.user_id != options.user_id:
        raise LoginRefused(
            f"the access token is {response.user_id}'s, not {options.user_id}'s: fix "
            "channels.matrix.user_id or the token"
        )
    return response.device_id or ""
