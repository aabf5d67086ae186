"""The dashboard wing: the running daemon at a glance, in a browser (`web:` in config.yaml).

`server.py` serves it with aiohttp (Jinja2 templates and static files shipped as package
data); `auth.py` and `guard.py` keep it to the token holder; `pages.py` reads, `actions.py`
changes through the control operations (`bot/operator/ops.py`), so the CLI and the page
never disagree; `views.py`, `chart.py` and `logtail.py` shape what the pages show.
"""
