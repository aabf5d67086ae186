"""The Matrix channel: a Matrix account on any homeserver, encrypted rooms included (matrix-nio)."""
