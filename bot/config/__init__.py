"""The config wing: `config.yaml` read (`load.py`), validated (`schema.py` and one module per
larger section), secrets resolved (`secrets.py`), and the one error type (`errors.py`)."""
