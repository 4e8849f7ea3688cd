"""Use cases of resume claims (bot/domain/resumes.py): claim, renew, finish, read. The only caller of
their storage. Every key is the calling API token's: the edge passes the token's name, never a name
the body gives, so two tokens never share a key. Times come from the server's clock.

A caller that is not the holder gets `ResumeTaken` (409 `resume_taken`) naming the holder's state,
owner and lease: it must not resume. Finishing again as the same state is answered as the first
finish was (a lost response can be retried); finishing as another state is a `ResumeTaken`.
"""

from __future__ import annotations

from datetime import timedelta
from collections.abc import Sequence

from bot.domain.resumes import ResumeClaim, ResumeState
from bot.errors import NotFound, SignoffError
from bot.process.clock import Clock
from storage.base import Store


class ResumeTaken(SignoffError):
    """Another owner holds the claim, or it is finished: the caller must not resume."""

    code = "resume_taken"
    status = 409

    def __init__(self, claim: ResumeClaim, why: str) -> None:
        super().__init__(f"resume {claim.key!r} {why}", details=[claim.holder_json()])
        self.claim = claim


def _why(claim: ResumeClaim) -> str:
    if claim.state.is_final:
        return f"is already {claim.state.value}"
    return f"is held by {claim.owner!r} until {claim.holder_json()['lease_until']}"


class Resumes:
    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    async def claim(self, token: str, key: str, owner: str, *, lease_seconds: int,
                    request_ids: Sequence[str] = ()) -> ResumeClaim:
        """The claim, now held by `owner`; ResumeTaken if another owner holds it or it is finished."""
        now = self.clock.now()
        wanted = ResumeClaim(token, key, owner, ResumeState.RESUMING, now + timedelta(seconds=lease_seconds),
                             now, now, tuple(dict.fromkeys(request_ids)))
        won, found = await self.store.claim_resume(wanted, now)
        if not won:
            raise ResumeTaken(found, _why(found))
        return found

    async def renew(self, token: str, key: str, owner: str, *, lease_seconds: int) -> ResumeClaim:
        now = self.clock.now()
        renewed, found = await self.store.renew_resume(token, key, owner, now + timedelta(seconds=lease_seconds), now)
        if found is None:
            raise NotFound(f"no resume claim with key {key!r}")
        if not renewed:
            raise ResumeTaken(found, _why(found))
        return found

    async def finish(self, token: str, key: str, owner: str, state: ResumeState, error: str | None) -> ResumeClaim:
        if not state.is_final:
            raise ValueError(state)
        finished, found = await self.store.finish_resume(token, key, owner, state, error, self.clock.now())
        if found is None:
            raise NotFound(f"no resume claim with key {key!r}")
        if not finished and not (found.owner == owner and found.state is state):  # the holder's retry: as before
            raise ResumeTaken(found, _why(found))
        return found

    async def get(self, token: str, key: str) -> ResumeClaim:
        found = await self.store.get_resume(token, key)
        if found is None:
            raise NotFound(f"no resume claim with key {key!r}")
        return found
