"""The store wing: what the daemon persists, as small role protocols (`roles.py`) with their
row types (`rows.py`), and the backends behind them (`sqlite/`, `postgres/`); `open.py`
picks one for an address."""
