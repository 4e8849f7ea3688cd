"""The egress tests drive agent runs too: the scripted Anthropic fake and the agent app come from the agent suite."""

from __future__ import annotations

from tests.agent.conftest import agent, model

__all__ = ["agent", "model"]
