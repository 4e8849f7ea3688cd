"""Signoff's errors. Each carries a stable `code`; handlers turn them into clear messages.

SignoffError
  +-- InvalidInput         400  the caller sent something we cannot accept (details name the fields)
  |     +-- NotBatchable   400  policy asks about an action of a batch with more than a batch can give
  +-- Forbidden            403  this token may not do that (e.g. an agent token revoking a grant)
  +-- NotFound             404  no request with that id
  +-- IdempotencyMismatch  409  the Idempotency-Key was used with a different body
  +-- RunsUnavailable      409  this server cannot run agents (no ANTHROPIC_API_KEY)
  +-- Conflict             409  not in a state that allows it (e.g. redeliver while pending)
"""

from __future__ import annotations

from typing import Any


class SignoffError(Exception):
    code = "error"
    status = 400
    retry_after: int | None = None  # seconds, sent as Retry-After (a 429's)

    def __init__(self, message: str, *, details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or []

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return {"error": body}


class InvalidInput(SignoffError):
    code = "invalid_request"
    status = 400


class NotBatchable(InvalidInput):
    """An action of a batch needs its own request under policy (a quorum, typed confirmation, the
    critical tier, other approvers): `not_batchable`, so a client can submit the actions one by one."""

    code = "not_batchable"


class Forbidden(SignoffError):
    code = "forbidden"
    status = 403


class NotFound(SignoffError):
    code = "not_found"
    status = 404


class Gone(SignoffError):
    """The request existed and was archived by retention (SIGNOFF_RETENTION_DAYS)."""

    code = "archived"
    status = 410


class IdempotencyMismatch(SignoffError):
    code = "idempotency_key_reused"
    status = 409


class RunsUnavailable(SignoffError):
    code = "runs_unavailable"
    status = 409


class TooManyPending(SignoffError):
    """The calling token already has its most pending requests (SIGNOFF_MAX_PENDING_PER_TOKEN): 429."""

    code = "too_many_pending"
    status = 429
    retry_after = 30  # a slot frees when a person decides or a request times out: no exact time to give


class Conflict(SignoffError):
    """The request is not in a state that allows this (e.g. redelivering a pending request's webhook)."""

    code = "conflict"
    status = 409
