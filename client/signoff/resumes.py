"""Resume claims held by the Signoff server: at most one resumer, on any machine, resumes a thing once.

    claim = client.claim_resume(f"langgraph:{thread_id}:{interrupt_ids}", request_ids=[...])
    if claim is None:
        return                       # another resumer has it, or it was resumed already
    ... resume, renewing the lease (client.renew_resume(claim)) while it takes long ...
    client.finish_resume(claim)      # or state="failed", error="..."

A claim is `resuming` until its owner finishes it (`done` / `failed`: final). Its lease runs out
`lease_seconds` after the last claim or renewal; past that, another owner may take it over (the
holder died). Keys are the calling token's own. Every call is safe to retry: claiming again as the
same owner holds it again, finishing again as the same state answers as the first finish did.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx2
from urllib.parse import quote

from signoff.errors import SignoffError, SignoffRequestError

Json = dict[str, Any]
PATH = "/api/v1/resumes"
DEFAULT_LEASE_SECONDS = 300
TAKEN = "resume_taken"


def default_owner() -> str:
    """A new owner name, `host|pid|random`: unique to one resumer, and says where it runs."""
    return f"{socket.gethostname()[:100]}|{os.getpid()}|{uuid.uuid4().hex[:12]}"


class ResumeTaken(SignoffRequestError):
    """Another owner holds the claim, or it was finished: whoever gets this must not resume.

    `state`, `owner` and `lease_until` are the server's word on the claim as it stands."""

    code = TAKEN

    @property
    def _holder(self) -> Mapping[str, Any]:
        found = self.details[0] if isinstance(self.details, list) and self.details else {}
        return found if isinstance(found, Mapping) else {}

    @property
    def state(self) -> str | None:
        return self._holder.get("state")

    @property
    def owner(self) -> str | None:
        return self._holder.get("owner")

    @property
    def lease_until(self) -> str | None:
        return self._holder.get("lease_until")


@dataclass(frozen=True)
class ResumeClaim:
    """A claim this caller holds (or held): renew it while resuming, finish it when done."""

    key: str
    owner: str
    state: str
    lease_until: datetime | None
    lease_seconds: int = DEFAULT_LEASE_SECONDS
    request_ids: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any], lease_seconds: int) -> ResumeClaim:
        until = body.get("lease_until")
        return cls(key=str(body.get("key")), owner=str(body.get("owner")), state=str(body.get("state")),
                   lease_until=datetime.fromisoformat(until.replace("Z", "+00:00")) if isinstance(until, str) else None,
                   lease_seconds=lease_seconds, request_ids=tuple(str(r) for r in body.get("request_ids") or ()),
                   raw=dict(body))


def item_path(key: str, action: str = "") -> str:
    """The claim's path: the key percent-encoded whole (it may hold "/" and ":")."""
    return f"{PATH}/{quote(key, safe='')}" + (f"/{action}" if action else "")


def claim_body(key: str, owner: str | None, lease_seconds: int, request_ids: Sequence[str]) -> dict[str, Any]:
    if not isinstance(key, str) or not key:
        raise SignoffError("a resume claim needs a key (1-200 characters)")
    body: dict[str, Any] = {"key": key, "owner": owner or default_owner(), "lease_seconds": lease_seconds}
    if request_ids:
        body["request_ids"] = list(request_ids)
    return body


def finish_body(claim: ResumeClaim, state: str, error: str | None) -> dict[str, Any]:
    if state not in ("done", "failed"):
        raise SignoffError(f"a resume finishes as done or failed, not {state!r}")
    return {"owner": claim.owner, "state": state, "error": error[:2000] if error else None}


def taken(exc: SignoffRequestError) -> ResumeTaken | None:
    """The typed error for a 409 `resume_taken`, else None."""
    if exc.status != 409 or exc.error_code != TAKEN:
        return None
    return ResumeTaken(exc.message, status=exc.status, error_code=exc.error_code, details=exc.details)


class ResumeCalls:
    """`SignoffClient`'s resume-claim calls (it provides `_send`: retries, backoff, errors)."""

    def _send(self, method: str, path: str, *, json: Any = None, key: str | None = None,
              timeout: httpx2.Timeout | None = None, allow_conflict: bool = False) -> tuple[Json, int]:
        raise NotImplementedError

    def claim_resume(self, key: str, owner: str | None = None, *, lease_seconds: int = DEFAULT_LEASE_SECONDS,
                     request_ids: Sequence[str] = ()) -> ResumeClaim | None:
        """Hold `key` (this token's) to resume it: the claim, or None when another owner holds it or it was
        finished. `owner` defaults to a new `host|pid|random` name: pass the claim's own to claim again."""
        body = claim_body(key, owner, lease_seconds, request_ids)
        try:
            return ResumeClaim.from_json(self._send("POST", PATH, json=body)[0], lease_seconds)
        except SignoffRequestError as exc:
            if taken(exc) is None:
                raise
            return None

    def renew_resume(self, claim: ResumeClaim, *, lease_seconds: int | None = None) -> ResumeClaim:
        """Extend the lease (by `claim.lease_seconds` from now unless given); `ResumeTaken` if it was lost."""
        seconds = lease_seconds or claim.lease_seconds
        body = {"owner": claim.owner, "lease_seconds": seconds}
        return ResumeClaim.from_json(self._claim_call(item_path(claim.key, "renew"), body), seconds)

    def finish_resume(self, claim: ResumeClaim, state: str = "done", error: str | None = None) -> ResumeClaim:
        """End the claim as `done` (resumed) or `failed` (with `error`); `ResumeTaken` if it is not ours."""
        body = finish_body(claim, state, error)
        return ResumeClaim.from_json(self._claim_call(item_path(claim.key, "finish"), body), claim.lease_seconds)

    def get_resume(self, key: str) -> ResumeClaim | None:
        """The claim on `key` as the server has it (whoever holds it), or None when there is none."""
        try:
            return ResumeClaim.from_json(self._send("GET", item_path(key))[0], DEFAULT_LEASE_SECONDS)
        except SignoffRequestError as exc:
            if exc.status != 404:
                raise
            return None

    def _claim_call(self, path: str, body: Json) -> Json:
        try:
            return self._send("POST", path, json=body)[0]
        except SignoffRequestError as exc:
            raise taken(exc) or exc from None


class AsyncResumeCalls:
    """`AsyncSignoffClient`'s resume-claim calls: `ResumeCalls`, awaited."""

    async def _send(self, method: str, path: str, *, json: Any = None, key: str | None = None,
                    timeout: httpx2.Timeout | None = None, allow_conflict: bool = False) -> tuple[Json, int]:
        raise NotImplementedError

    async def claim_resume(self, key: str, owner: str | None = None, *, lease_seconds: int = DEFAULT_LEASE_SECONDS,
                           request_ids: Sequence[str] = ()) -> ResumeClaim | None:
        """Hold `key` (this token's) to resume it: the claim, or None when another owner holds it or it was
        finished. `owner` defaults to a new `host|pid|random` name: pass the claim's own to claim again."""
        body = claim_body(key, owner, lease_seconds, request_ids)
        try:
            return ResumeClaim.from_json((await self._send("POST", PATH, json=body))[0], lease_seconds)
        except SignoffRequestError as exc:
            if taken(exc) is None:
                raise
            return None

    async def renew_resume(self, claim: ResumeClaim, *, lease_seconds: int | None = None) -> ResumeClaim:
        """Extend the lease (by `claim.lease_seconds` from now unless given); `ResumeTaken` if it was lost."""
        seconds = lease_seconds or claim.lease_seconds
        body = {"owner": claim.owner, "lease_seconds": seconds}
        return ResumeClaim.from_json(await self._claim_call(item_path(claim.key, "renew"), body), seconds)

    async def finish_resume(self, claim: ResumeClaim, state: str = "done", error: str | None = None) -> ResumeClaim:
        """End the claim as `done` (resumed) or `failed` (with `error`); `ResumeTaken` if it is not ours."""
        body = finish_body(claim, state, error)
        return ResumeClaim.from_json(await self._claim_call(item_path(claim.key, "finish"), body), claim.lease_seconds)

    async def get_resume(self, key: str) -> ResumeClaim | None:
        """The claim on `key` as the server has it (whoever holds it), or None when there is none."""
        try:
            return ResumeClaim.from_json((await self._send("GET", item_path(key)))[0], DEFAULT_LEASE_SECONDS)
        except SignoffRequestError as exc:
            if exc.status != 404:
                raise
            return None

    async def _claim_call(self, path: str, body: Json) -> Json:
        try:
            return (await self._send("POST", path, json=body))[0]
        except SignoffRequestError as exc:
            raise taken(exc) or exc from None
