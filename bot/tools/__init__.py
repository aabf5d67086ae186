"""The tools wing: the agent's tools as the daemon provides them (the belt built from the
config, MCP servers, the chats the `message` tool may reach)."""
