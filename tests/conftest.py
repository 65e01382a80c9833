"""Fixtures every test package may use: the real Docker engine (tests/docker_support.py)."""

pytest_plugins = ["tests.docker_support"]
