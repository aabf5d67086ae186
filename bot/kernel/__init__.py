"""The kernel: the small modules both the hub and the wings stand on.

Session keys, chat routing strings, the one delivery path, lanes, the spending guard, the owner,
the workspace seed, and `ports.py` (the few calls a wing makes into the hub). Nothing here
imports the hub (`bot.hub`) or a wing that imports it.
"""
