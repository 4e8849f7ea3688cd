"""Signoff, the server: a Slack bot that puts a person between an AI agent and its risky actions."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    # Read when asked for: `signoff hook claude-code` starts through this package on every tool call,
    # and importlib.metadata costs more than the hook's own work.
    if name != "__version__":
        raise AttributeError(f"module 'bot' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("signoff-server")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "0+unknown"
