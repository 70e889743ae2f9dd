"""The package version, in a leaf module so that any layer may read it (`jfsm.__version__`
re-exports it; `pyproject.toml` states the same number and a test checks they agree)."""

__version__ = "0.1.0"
