"""A lean HTTP/1.1 client on asyncio's own transports, for the calls made on every turn.

The libraries Perch talks through (python-telegram-bot, the model SDKs) send each request
through httpx, whose layers (httpx, httpcore, h11, anyio) cost about 1 ms of CPU per call
here: as much as the rest of a turn's work in Perch (bench/README.md, issue 19). This package
keeps the wire part small. `connection.Connection` speaks one request and its answer at a
time, with the answer read as it arrives. `pool.Pool` keeps connections alive per origin and
bounds how many are busy. The adapters (`channels.telegram.keepalive`,
`agents.providers.transport`) plug it into each library's own request interface. It knows no
platform and imports none of `agents`, `bot` or `channels`.
"""
