"""Security tests drive agent runs too: the scripted Anthropic fake comes from the agent suite."""

from __future__ import annotations

from tests.agent.conftest import model

__all__ = ["model"]
