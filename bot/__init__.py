"""Signoff, the server: a Slack bot that puts a person between an AI agent and its risky actions."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("signoff-server")
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"
