"""The bounded label values metrics and spans share: outcome lists and the stand-in names.

A label that could take a value from outside (a made-up tool name, a model a session was
switched to, a turn without a chat) takes one of the stand-ins here instead.
"""

from __future__ import annotations

TURN_OUTCOMES = ("ok", "error", "cancelled", "max_iterations", "blocked", "skipped", "failed")
CRON_OUTCOMES = ("ok", "delivered", "error", "skipped", "missed")
SEND_OUTCOMES = ("ok", "error")
TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")
NO_CHANNEL = "none"  # the channel of a turn without a chat (cron, heartbeat, perch chat)
OTHER_MODEL = "other"  # a model the config does not name
UNKNOWN_TOOL = "unknown"  # a tool the belt does not have
