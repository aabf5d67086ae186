"""The Discord plug-in: `plugin.PLUGIN` is what the registry knows; the adapter is imported only
when the channel is enabled (`adapter.DiscordChannel`)."""
