"""The hub: what runs a message, from intake to the reply.

The gateway (dedupe -> access -> commands -> lanes -> run), one turn (`turns.py` with its inputs),
chat commands, upkeep after turns, crash recovery and the sub-agents' host. It stands on the
kernel (`bot.kernel`) and the wings it uses (media, recall, observe, cluster slots); the wings
that drive it (cron, operator) reach it only through the kernel's ports, handed over by
`bot/build.py`.
"""
