"""Wire-level fake servers (Anthropic, Telegram Bot API, Slack, signal-cli-rest-api) on 127.0.0.1."""
