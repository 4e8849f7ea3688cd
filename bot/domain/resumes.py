"""Resume claims: at most one resumer applies a decision to a suspended agent call, on any machine.

A resumer (the LangGraph `Resumer`, an OpenAI Agents or Pydantic AI continuation, ...) claims a key it
derives from what it resumes ("<framework>:<thread or run id>:<interrupt ids>") before it resumes, and
finishes the claim once it has. The claim is held by the server, so resumers on different machines
share it. Keys are scoped to the API token that claims them: two tokens never share a key.

States (a pure table: `may_take`):

    (none) --claim--> resuming --finish--> done | failed
    resuming --claim by another owner, after the lease ran out--> resuming (the new owner)

A `resuming` claim is held until `lease_until`; its owner renews it while it works. Past it, anyone
may take it over (its owner died, or lost its way). `done` and `failed` are final: nobody takes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from bot.domain.values import iso

MAX_KEY = 200
MAX_OWNER = 200
MAX_ERROR = 2000
MAX_REQUEST_IDS = 100
MIN_LEASE_SECONDS, MAX_LEASE_SECONDS, DEFAULT_LEASE_SECONDS = 5, 3600, 300


class ResumeState(StrEnum):
    RESUMING = "resuming"
    DONE = "done"
    FAILED = "failed"

    @property
    def is_final(self) -> bool:
        return self is not ResumeState.RESUMING


@dataclass(frozen=True)
class ResumeClaim:
    """One claim as stored: whose (`token`, the API token's name), which `key`, held by `owner`."""

    token: str
    key: str
    owner: str
    state: ResumeState
    lease_until: datetime
    created_at: datetime
    updated_at: datetime
    request_ids: tuple[str, ...] = ()
    error: str | None = None

    def may_take(self, owner: str, now: datetime) -> bool:
        """May `owner` hold this claim from `now` on: it holds it already, or the lease ran out, while
        it is still `resuming`. The stores write exactly this as their guard (storage/resume_sql.py)."""
        return self.state is ResumeState.RESUMING and (owner == self.owner or self.lease_until <= now)

    def holder_json(self) -> dict[str, Any]:
        """Who holds it and until when: what a loser is told (`resume_taken`'s details)."""
        return {"state": self.state.value, "owner": self.owner, "lease_until": iso(self.lease_until)}

    def to_json(self, *, won: bool | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"key": self.key, "state": self.state.value, "owner": self.owner,
                                "lease_until": iso(self.lease_until), "request_ids": list(self.request_ids),
                                "error": self.error, "updated_at": iso(self.updated_at)}
        if won is not None:
            body["won"] = won
        return body

