"""Pure functions on Slack's wire text, no I/O: message markup in (`<@U…>`, `<#C…|name>`,
`<url|label>`, `&lt;` entities, `/cmd@bot`) and out (mrkdwn escaping), and the error code of
a refused Web API call.
"""

from __future__ import annotations

import re

from slack_sdk.errors import SlackApiError

_ANGLE = re.compile(r"<([^<>\n]*)>")
_COMMAND = re.compile(r"/([A-Za-z0-9_]+)@([A-Za-z0-9_.\-]+)(?=\s|$)")


def _decode_angle(match: re.Match[str]) -> str:
    target, _, label = match.group(1).partition("|")
    if not target:
        return match.group(0)
    if target[0] in "@#":
        return target[0] + (label.lstrip(target[0]) or target[1:])
    if target[0] == "!":
        return label or "@" + target[1:].split("^", 1)[0]
    if target.startswith("mailto:"):
        return label or target[len("mailto:") :]
    if label and label != target:
        return f"{label} ({target})"
    return target


def normalise_slack_text(text: str, bot_user_id: str, bot_name: str = "") -> tuple[str, bool]:
    """Slack message markup -> plain text for the model, and whether the bot was @mentioned.

    The bot's own `<@U…>` mention is removed (with a following `:`/`,` and spaces); other
    markup becomes readable (`<@U2>` -> `@U2`, `<#C1|general>` -> `#general`, `<url|label>`
    -> `label (url)`, `<!here>` -> `@here`); `&lt; &gt; &amp;` are unescaped; the result is
    stripped, and `/cmd@<bot_name>` at the start becomes `/cmd`.
    """
    mentioned = False
    if bot_user_id:
        own = re.compile(rf"<@{re.escape(bot_user_id)}(?:\|[^<>]*)?>[:,]?[ \t]*")
        text, count = own.subn("", text)
        mentioned = count > 0
    text = _ANGLE.sub(_decode_angle, text)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").strip()
    command = _COMMAND.match(text)
    if command is not None and bot_name and command.group(2).lower() == bot_name.lower():
        text = f"/{command.group(1)}{text[command.end() :]}"
    return text, mentioned


def escape_mrkdwn(text: str) -> str:
    """Escape the three characters Slack treats as markup (`&`, `<`, `>`)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_error_code(exc: SlackApiError) -> str:
    """The `error` field of a refused call (`missing_scope`, ...), or "unknown_error"."""
    response = exc.response
    error = response.get("error") if response is not None else None
    return str(error or "unknown_error")
