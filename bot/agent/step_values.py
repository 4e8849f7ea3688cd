"""What a step of an agent run is given (an `Agent`, a `StepConfig`) and what it ends with (`StepResult`,
or `LeaseLost` when another process took the run over)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path

from bot.agent.access import RunAccess
from bot.agent.tools import Toolset
from bot.outbox.egress import EgressPolicy


class StepResult(enum.Enum):
    CONTINUE = "continue"  # more work now
    SUSPEND = "suspend"  # waiting for a person (or for the root message): release the run
    DONE = "done"  # the run ended


class LeaseLost(Exception):
    """Another process took the run over (our lease expired): stop without writing."""


@dataclass(frozen=True)
class Agent:
    name: str
    system: str
    tools: Toolset


@dataclass(frozen=True)
class StepConfig:
    model: str
    max_tokens: int
    lease_seconds: float
    max_steps: int
    workspace: Path
    email_outbox: Path
    http_timeout: float = 30.0
    api_key_set: bool = True
    egress: EgressPolicy = field(default_factory=EgressPolicy)
    access: RunAccess = field(default_factory=RunAccess)
