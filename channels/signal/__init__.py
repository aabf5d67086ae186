"""The Signal plug-in (signal-cli-rest-api in json-rpc mode): `plugin.PLUGIN` is what the
registry knows; the adapter is imported only when the channel is enabled
(`adapter.SignalChannel`)."""
