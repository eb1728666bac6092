"""Tests of ``citeguard serve`` (a package, so its conftest is ``serve.conftest`` and never
shadows ``tests/conftest.py``)."""
