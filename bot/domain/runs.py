"""Agent runs as plain, frozen values: the run, its tool executions, queued interventions.

A run is a durable tool-use loop. Its message log lives in storage as append-only rows;
these values describe where the loop stands, so any process can pick it up.

    Run status:   running -> waiting -> running -> ... -> completed | failed | cancelled
                  failed -> running (a person took it over: Retry, Correct and retry) | cancelled
    Run phase:    model (the next thing is a model call) | tools (the last assistant turn's
                  tool calls need results before the next model call)
    Execution:    waiting (a person decides) -> ready -> started -> finished
                  ready (allowed by policy)  -> started -> finished
                  finished directly (rejected, answered, invalid input, unknown outcome)
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any


class RunStatus(enum.StrEnum):
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        return self in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


class Phase(enum.StrEnum):
    MODEL = "model"
    TOOLS = "tools"


class ExecStatus(enum.StrEnum):
    WAITING = "waiting"
    READY = "ready"
    STARTED = "started"
    FINISHED = "finished"


class Gate(enum.StrEnum):
    """How a tool call was let through: by policy, after a person's decision, or not at all."""

    ALLOW = "allow"
    ASK = "ask"
    QUESTION = "question"
    INVALID = "invalid"


@dataclass(frozen=True)
class Run:
    id: str
    status: RunStatus
    task: str
    channel: str
    agent: str
    created_at: datetime
    updated_at: datetime
    phase: Phase = Phase.MODEL
    step_count: int = 0
    next_seq: int = 0  # the seq the next appended message gets (= messages so far)
    turn_seq: int | None = None  # seq of the assistant message whose tool calls are pending
    version: int = 1
    root_ts: str | None = None
    requested_by: str | None = None
    cancel_requested: bool = False
    cancelled_by: str | None = None
    result: str | None = None
    error: str | None = None
    # Completed runs: how many calls ran after a decision and failed (bot.domain.outcomes).
    failed_steps: int = 0
    # A failed run a person took over (Retry, Correct and retry): the step it stops at now (None: the
    # server's SIGNOFF_RUN_MAX_STEPS) and how many times it was taken over.
    step_limit: int | None = None
    retries: int = 0
    lease_owner: str | None = None
    lease_until: datetime | None = None

    def evolve(self, **changes: Any) -> Run:
        return replace(self, **changes)


@dataclass(frozen=True)
class ToolExecution:
    """One tool_use block of one assistant turn, and what became of it (keyed by tool_use_id)."""

    run_id: str
    tool_use_id: str
    turn_seq: int
    position: int
    name: str
    input: dict[str, Any]
    gate: Gate
    status: ExecStatus
    risk: str = "low"
    request_id: str | None = None
    final_input: dict[str, Any] | None = None
    note: str | None = None  # what the model is told besides the output (edits, who approved)
    result: Any = None  # the tool_result content (str or list of text blocks)
    is_error: bool = False
    attempts: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None

    def evolve(self, **changes: Any) -> ToolExecution:
        return replace(self, **changes)

    def tool_result(self) -> dict[str, Any]:
        """The `tool_result` block the next model request carries for this call."""
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": self.tool_use_id, "content": self.result}
        if self.is_error:
            block["is_error"] = True
        return block


@dataclass(frozen=True)
class Intervention:
    """A person's message in the run's thread, queued for the next model call."""

    run_id: str
    text: str
    user_id: str
    created_at: datetime
    user_name: str | None = None
    slack_ts: str | None = None
    id: int | None = None
    consumed_seq: int | None = None


@dataclass(frozen=True)
class RunMessage:
    run_id: str
    seq: int
    role: str
    content: Any
    created_at: datetime | None = None


@dataclass(frozen=True)
class NewRun:
    """What starting a run needs."""

    task: str
    channel: str
    agent: str
    requested_by: str | None = None


_ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def run_id_for(key: str) -> str:
    """The run id a start keyed `key` gets (an Idempotency-Key, a Slack command's trigger id): the same key
    always names the same run, so a second start with it fails on the primary key instead of running twice."""
    digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:17], "big")
    chars = []
    for _ in range(26):
        chars.append(_ID_ALPHABET[digest & 31])
        digest >>= 5
    return "run_" + "".join(chars)


def slack_command_key(team: str, trigger_id: str) -> str:
    """A `/signoff run`'s key: Slack's trigger id (the same when the stored command is replayed after a
    crash). The NULs keep it apart from any Idempotency-Key, which an HTTP header cannot carry."""
    return f"\0slack-command\0{team}\0{trigger_id}"

