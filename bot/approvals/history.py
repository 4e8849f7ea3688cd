"""Use case: read the decision record of the last days and say what policy could stop asking (or deny),
and (`HistorySuggestions`) offer it in Slack, accepted as a grant (allow or deny) in one tap.

The record is read in pages by creation time (requests created before the window but decided in it
are not counted: the window is a lower bound on the evidence, never an upper one); the judgement is
bot.domain.history's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.approvals.access import GroupMembers, GroupsUnknown, in_listed_group
from bot.domain.grants import ALLOW, Grant
from bot.domain.history import Decided, HistorySuggestion, Thresholds, grant_prefix, suggest, suggested_grant
from bot.domain.model import Request, Risk, Status
from bot.domain.policy import Call, Evaluation, Policy, evaluate
from bot.process.clock import Clock
from storage.base import Store
from storage.grants import GrantStore

PAGE = 500


async def history_suggestions(store: Store, now: datetime, thresholds: Thresholds = Thresholds()
                              ) -> list[HistorySuggestion]:
    since = now - timedelta(days=thresholds.days)
    decided: list[Decided] = []
    for status in (Status.APPROVED, Status.REJECTED):
        after: tuple[datetime, str] = (since, "")
        while True:
            page = await store.list_requests(status=status, limit=PAGE, after=after)
            for request in page:
                decided.extend(_decided(request))
            if len(page) < PAGE:
                break
            after = (page[-1].created_at, page[-1].id)
    return suggest(decided, now, thresholds)


def _decided(request: Request) -> Iterator[Decided]:
    decision = request.decision
    if decision is None:
        return
    if not request.items:
        yield Decided(request.action.name, request.action.params, decision.outcome, decision.via,
                      decision.decided_by.id if decision.decided_by else None, decision.decided_at, request.risk,
                      edited=bool(decision.changes), channel=request.channel)
        return
    for item in decision.items or request.items:
        if item.outcome is None:
            continue
        actor = item.decided_by or decision.decided_by
        yield Decided(item.action.name, item.action.params, item.outcome, item.via or decision.via,
                      actor.id if actor else None, decision.decided_at, request.risk, edited=bool(item.changes),
                      channel=request.channel)


# -- in Slack: offered to approvers (App Home, the weekly digest), accepted or dismissed in one tap ---------

TTL = timedelta(seconds=60)  # how long a read of the record serves App Home and the digest


@dataclass(frozen=True)
class Offer:
    """A suggestion as Slack shows it: the evidence, the tier policy gives its tool now, and what
    accepting adds (`grant`, allow or deny, id shown as its prefix)."""

    suggestion: HistorySuggestion
    tier: Risk
    grant: Grant


@dataclass(frozen=True)
class Accepted:
    grant: Grant
    made: bool  # False: it was there already (a double tap, a racing tap, or someone before)


@dataclass(frozen=True)
class Refused:
    text: str  # why, for the person; nothing was written
    groups: GroupsUnknown | None = None


class HistorySuggestions:
    """Suggestions from the decision record, in Slack. Invariants:
    - offered only under a policy file (grants apply only there), an allow never for a tool policy now
      puts at the critical tier (a deny only makes things stricter: offered at every tier), never when
      policy already does what it suggests, never once accepted (a live grant under its `grant_prefix`),
      and to a person only if they may accept it and did not dismiss it;
    - accepting is a person's act: re-read fresh, refused (nothing written) for an allow at critical,
      and for anyone not an approver of the tool's tier (its listed approvers, or, when it lists none,
      the people whose decisions are the evidence; and the policy's `grant_admins`); it makes exactly
      the offered grant (an allow, or a deny that policy honours before ask rules, grants and allow
      rules), once (`GrantStore.add_first`), audited with the person's Slack id."""

    def __init__(self, store: Store, grants: GrantStore, clock: Clock, *, thresholds: Thresholds = Thresholds(),
                 grant_days: int | None = 30, policy: Callable[[], Policy | None] = lambda: None,
                 members: GroupMembers | None = None) -> None:
        self.store = store
        self.grants = grants
        self.clock = clock
        self.thresholds = thresholds
        self.grant_days = grant_days
        self.policy = policy
        self.members = members
        self._read: tuple[datetime, list[HistorySuggestion]] | None = None

    async def current(self, *, fresh: bool = False) -> list[HistorySuggestion]:
        now = self.clock.now()
        if not fresh and self._read is not None and timedelta(0) <= now - self._read[0] < TTL:
            return self._read[1]
        found = await history_suggestions(self.store, now, self.thresholds)
        self._read = (now, found)
        return found

    def _offer(self, policy: Policy, suggestion: HistorySuggestion, now: datetime) -> Offer | None:
        judged = self._judge(policy, suggestion, now)
        if (judged.tier is Risk.CRITICAL and suggestion.effect == ALLOW) or judged.outcome.value == suggestion.effect:
            return None  # a person always decides critical; policy already does it
        grant = suggested_grant(suggestion, grant_id=grant_prefix(suggestion) + "…", by="", now=now,
                                days=self.grant_days)
        return Offer(suggestion, judged.tier, grant)

    @staticmethod
    def _judge(policy: Policy, suggestion: HistorySuggestion, now: datetime) -> Evaluation:
        channel = suggestion.channels[0] if len(suggestion.channels) == 1 else None
        return evaluate(policy, Call(tool=suggestion.tool, params=suggestion.sample, channel=channel), None, now)

    async def offers(self, *, fresh: bool = False) -> list[Offer]:
        """Every suggestion Slack may show now (to whom: `for_user`, `for_channel`)."""
        policy = self.policy()
        if policy is None:
            return []
        now = self.clock.now()
        found = [o for o in (self._offer(policy, s, now) for s in await self.current(fresh=fresh)) if o is not None]
        taken = await self.grants.with_prefix([grant_prefix(o.suggestion) for o in found], now)
        return [o for o in found if grant_prefix(o.suggestion) not in taken]

    async def for_user(self, user: str, *, limit: int = 3) -> list[Offer]:
        """What App Home shows `user`: offers they may accept and did not dismiss (a user group Slack
        cannot list now hides what rests on it)."""
        offers = await self.offers()
        if not offers:
            return []
        hidden = await self.grants.dismissed(user)
        shown = []
        for offer in offers:
            if offer.suggestion.key_hash in hidden:
                continue
            try:
                if await self._may_accept(user, offer):
                    shown.append(offer)
            except GroupsUnknown:
                continue
            if len(shown) >= limit:
                break
        return shown

    async def for_channel(self, channel: str, *, limit: int = 5) -> list[Offer]:
        """What a channel's weekly digest shows: offers whose evidence includes that channel."""
        return [o for o in await self.offers() if channel in o.suggestion.channels][:limit]

    async def _may_accept(self, user: str, offer: Offer) -> bool:
        policy = self.policy()
        admins = policy.grant_admins if policy is not None else ()
        now = self.clock.now()
        listed = self._judge(policy, offer.suggestion, now).approvers if policy is not None else ()
        entries = (*(listed or offer.suggestion.deciders), *admins)
        return user in entries or await in_listed_group(user, entries, self.members)

    async def accept(self, user: str, key: str) -> Accepted | Refused:
        """`user` tapped Accept on the suggestion `key` (the button's value)."""
        policy = self.policy()
        if policy is None:
            return Refused("Grants apply only under a policy file, and none is loaded. Nothing was changed.")
        now = self.clock.now()
        suggestion = next((s for s in await self.current(fresh=True) if s.key == key), None)
        if suggestion is None:
            return Refused("That suggestion no longer holds: the decision record of the last "
                           f"{self.thresholds.days} days does not support it now. Nothing was changed.")
        judged = self._judge(policy, suggestion, now)
        if judged.tier is Risk.CRITICAL and suggestion.effect == ALLOW:
            return Refused(f"`{suggestion.tool}` is at the critical tier: a person decides each such request, so "
                           "nothing is remembered for it. Nothing was changed.")
        offer = Offer(suggestion, judged.tier, suggested_grant(suggestion, grant_id="", by=user, now=now,
                                                               days=self.grant_days))
        try:
            allowed = await self._may_accept(user, offer)
        except GroupsUnknown as exc:
            return Refused("", groups=exc)
        if not allowed:
            return Refused(f"Only approvers of `{suggestion.tool}`'s tier ({judged.tier.value}) may accept this "
                           "suggestion. Nothing was changed.")

        def make(grant_id: str) -> Grant:
            return suggested_grant(suggestion, grant_id=grant_id, by=user, now=now, days=self.grant_days)

        grant, made = await self.grants.add_first(grant_prefix(suggestion), make, now, {
            "suggestion": suggestion.text(), "rule": suggestion.rule(), "tier": judged.tier.value})
        return Accepted(grant, made)

    async def dismiss(self, user: str, key: str) -> bool:
        """Hide the suggestion `key` from `user`'s App Home; True the first time."""
        suggestion = next((s for s in await self.current() if s.key == key), None)
        key_hash = suggestion.key_hash if suggestion is not None else hashlib.sha256(key.encode()).hexdigest()
        return await self.grants.dismiss(user, key_hash, self.clock.now())
