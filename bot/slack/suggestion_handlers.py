"""The "Approve & always allow ..." buttons: accept one of Claude's permission suggestions.

One click approves the request AND makes one grant per rule of the suggestion, in the same unit
as the guarded decision (`Service.decide(also=...)`): a losing click leaves no grant, a crash
leaves both or neither. The decision records which suggestion was accepted (`request.extra`), so
the agent can hand it back to Claude Code (`updated_permissions` / `updatedPermissions`).

Who may click: exactly who may Approve (approvers, separation of duties), and only while the
suggestion is offered (`bot.domain.suggestions`: one approval decides, not critical, no typed
confirmation, under a policy file). A forged or stale button is refused and nothing is written.
"""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncApp

from bot.approvals.checked import decide_checked
from bot.process.clock import new_id
from bot.domain.duties import approve_refusal
from bot.domain.grants import Grant
from bot.domain.model import Actor, Outcome, Request, Via
from bot.domain.suggestions import ACCEPTED_KEY, offered, single_approval_refusal
from bot.approvals.grants import Grants
from bot.slack.interactions import Interactions, Refusal, already_decided_text
from bot.slack.payloads import BadPayload, Click, extract_click
from bot.slack.suggestion_cards import SUGGEST_ACTION, accepted_text


class SuggestionInteractions:
    def __init__(self, interactions: Interactions, grants: Grants) -> None:
        self.interactions = interactions
        self.service = interactions.service
        self.grants = grants
        self.clock = interactions.clock

    async def accept(self, click: Click, index: int) -> str:
        """Approve and remember suggestion `index`; the note to tell the clicker."""
        checked = await self.interactions.check(click.request_id, click.user_id, click)
        if isinstance(checked, Refusal):
            return checked.text
        refusal = approve_refusal(checked, click.user_id)
        if refusal is not None:
            return refusal
        suggestion = offered(checked, index)
        if suggestion is None:
            why = single_approval_refusal(checked) or "it is not one of this request's offered suggestions"
            return f"That suggestion cannot be accepted here: {why}. Nothing was changed."
        assert suggestion.scope is not None
        now = self.clock.now()
        made = [Grant(id=new_id("grt"), tool=rule.tool, match=dict(rule.match), scope=suggestion.scope,
                      scope_value=suggestion.scope_value, created_by=click.user_id, created_at=now,
                      request_id=checked.id, any_other_params=True) for rule in suggestion.rules]
        grant_ids = [g.id for g in made]

        async def recheck(state: Request) -> str | None:  # on every state the decision is written on
            refusal = await self.interactions.refusal(state, click.user_id, decision="approve")
            if refusal is None and offered(state, index) != suggestion:
                refusal = "That suggestion is no longer offered on this request. Nothing was changed."
            return None if refusal is None else refusal + " No grant was made."

        result = await decide_checked(
            self.service, checked, recheck, Outcome.APPROVED, via=Via.BUTTON,
            actor=Actor(click.user_id, click.user_name), comment=accepted_text(suggestion, grant_ids), grants=tuple(made),
            extra={ACCEPTED_KEY: {"index": suggestion.index, "update": dict(suggestion.raw), "grant_ids": grant_ids}})
        if result.refused is not None:
            return result.refused
        if result.duplicate:
            return "You had already approved this request. No grant was made."
        if result.counted:  # cannot happen while offers need quorum 1; said plainly if it ever does
            return "Your approval was counted; the request needs more approvals, so no grant was made."
        if not result.won:
            return already_decided_text(result.request) + " No grant was made."
        if result.held:
            return (f"Approved: it runs at the end of its undo window unless you undo it on the card; from then on "
                    f"Signoff will {suggestion.meaning()} (grant {', '.join(grant_ids)}).")
        return (f"Approved, and from now on Signoff will {suggestion.meaning()} (grant {', '.join(grant_ids)}). "
                "Claude Code remembers it too. See or revoke grants with `/signoff grants` or on the Home tab.")


def register(app: AsyncApp, si: SuggestionInteractions) -> None:
    async def on_accept(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        try:
            click = extract_click(body)
        except BadPayload as exc:
            user = (body.get("user") or {}).get("id")
            if user:
                await si.interactions.tell(user, (body.get("channel") or {}).get("id"), f"{exc}. Nothing was changed.")
            return
        found = SUGGEST_ACTION.match(click.action_id)
        note = await si.accept(click, int(found.group(1))) if found else "Unknown button. Nothing was changed."
        await si.interactions.tell(click.user_id, click.channel_id, note)

    app.action(SUGGEST_ACTION)(on_accept)
