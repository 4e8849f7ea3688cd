"""The timer buttons on a card (Snooze, Escalate, hand back): their listeners' work and the Escalate
modal (a pure builder and parser).

The modal picks where the request goes (the next configured level by default, a named person,
or, for someone it was escalated to, back to whoever escalated it), takes an optional note for
them, and lets the escalator step back from the approvers. Validation errors go in the ack;
everything else happens after it (handlers.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.approvals.access import PRE_ACK_LOOKUP_SECONDS
from bot.approvals.checked import Recheck
from bot.domain.model import Actor, Request
from bot.domain.timing import TimerState, Timing, next_level
from bot.process.metrics import Metrics
from bot.approvals.service import Service
from bot.slack.interactions import Interactions, Refusal, already_decided_text
from bot.slack.payloads import Click, Submission
from bot.slack.previews import plain
from bot.slack.text import clip, neutralise, one_line, strip_markup, when
from bot.approvals.timers import Moved, Timers

log = logging.getLogger(__name__)

ESCALATE_VIEW = "signoff_escalate_view"
TARGET_BLOCK, PERSON_BLOCK, NOTE_BLOCK, STEP_BACK_BLOCK = "target", "person", "note", "step_back"
VALUE = "value"
NEXT, PERSON, BACK = "next", "person", "back"
NOTE_MAX = 1000


@dataclass(frozen=True)
class EscalationChoice:
    where: str  # NEXT | PERSON | BACK
    person: str | None
    note: str | None
    step_back: bool


def escalate_modal(req: Request, user_id: str, *, may_pick: bool = True) -> dict[str, Any]:
    """The "Escalate request" modal for `user_id`; its private_metadata is set by the caller.

    `may_pick`: whether `user_id` may name a person (only those who may decide may hand approval on)."""
    timing, state = req.timing or Timing(), req.timers or TimerState()
    options = []
    upcoming = next_level(timing, state)
    if upcoming is not None:
        round_ = f", round {upcoming.loop + 1}" if upcoming.loop else ""
        options.append(_option(f"Next level ({upcoming.number} of {upcoming.of}{round_})", NEXT))
    if state.may_hand_back(user_id):
        options.append(_option("Hand it back to whoever escalated it", BACK))
    if may_pick or not options:
        options.append(_option("A person I choose (below)", PERSON))
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": plain(one_line(neutralise(req.summary)) or req.action.name, limit=500)},
        {
            "type": "input",
            "block_id": TARGET_BLOCK,
            "label": plain("Escalate to"),
            "element": {"type": "static_select", "action_id": VALUE, "options": options,
                        "initial_option": options[0]},
        },
        {
            "type": "input",
            "block_id": PERSON_BLOCK,
            "optional": True,
            "label": plain("Person"),
            "hint": plain("Used when you choose “A person I choose”. They become an approver."),
            "element": {"type": "users_select", "action_id": VALUE},
        },
        {
            "type": "input",
            "block_id": NOTE_BLOCK,
            "optional": True,
            "label": plain("Note for them"),
            "element": {"type": "plain_text_input", "action_id": VALUE, "multiline": True, "max_length": NOTE_MAX,
                        "placeholder": plain("Why are you escalating? They see this note.")},
        },
    ]
    if user_id in req.approvers:
        blocks.append({
            "type": "input",
            "block_id": STEP_BACK_BLOCK,
            "optional": True,
            "label": plain("Your part"),
            "element": {"type": "checkboxes", "action_id": VALUE,
                        "options": [_option("Remove me from the approvers", "yes")]},
        })
    return {
        "type": "modal",
        "callback_id": ESCALATE_VIEW,
        "title": plain("Escalate request"),
        "submit": plain("Escalate"),
        "close": plain("Cancel"),
        "blocks": blocks,
    }


def _option(text: str, value: str) -> dict[str, Any]:
    return {"text": plain(clip(text, 75)), "value": value}


def parse_escalate_submission(values: dict[str, Any], user_id: str) -> tuple[EscalationChoice | None, dict[str, str]]:
    """The choice in a submitted Escalate modal, or inline errors keyed by block id."""
    def state(block: str) -> dict[str, Any]:
        return (values.get(block) or {}).get(VALUE) or {}

    where = (state(TARGET_BLOCK).get("selected_option") or {}).get("value") or PERSON
    person = state(PERSON_BLOCK).get("selected_user") or None
    if person and where == NEXT:
        where = PERSON  # naming someone is the clearer intent
    note = (state(NOTE_BLOCK).get("value") or "").strip() or None
    step_back = bool(state(STEP_BACK_BLOCK).get("selected_options"))
    if where not in (NEXT, PERSON, BACK):
        return None, {TARGET_BLOCK: "Pick where the request goes."}
    if where == PERSON and not person:
        return None, {PERSON_BLOCK: "Pick the person to escalate to."}
    if where == PERSON and person == user_id:
        return None, {PERSON_BLOCK: "Pick someone other than yourself."}
    if note is not None and len(note) > NOTE_MAX:
        return None, {NOTE_BLOCK: f"Keep the note under {NOTE_MAX} characters."}
    return EscalationChoice(where, person if where == PERSON else None, note, step_back), {}


class TimerInteractions:
    """Snooze and Escalate, from a card or App Home."""

    def __init__(self, interactions: Interactions, timers: Timers, client: AsyncWebClient, metrics: Metrics) -> None:
        self.interactions = interactions
        self.service: Service = interactions.service
        self.timers = timers
        self.client = client
        self.metrics = metrics

    async def snooze(self, click: Click) -> None:
        checked = await self.interactions.check(click.request_id, click.user_id, click)
        if isinstance(checked, Refusal):
            await self.interactions.tell(click.user_id, click.channel_id, checked.text)
            return
        result = await self.timers.snooze(checked.id, Actor(click.user_id, click.user_name),
                                          recheck=self._recheck(click.user_id, naming=False, escalated=False,
                                                                what="snooze"))
        if not isinstance(result, Moved):
            await self.interactions.tell(click.user_id, click.channel_id, result.text)
            return
        state = result.request.timers or TimerState()
        next_at = when(state.remind_at)
        text = f"💤 Snoozed: the next reminder comes {next_at}." if state.remind_at else "💤 Snoozed."
        if state.expires_at is not None:
            text += f" The timeout is unchanged ({when(state.expires_at)})."
        await self.interactions.tell(click.user_id, click.channel_id, text)

    def _recheck(self, user_id: str, *, naming: bool, escalated: bool = True, what: str = "escalation") -> Recheck:
        """The person's right to a move, checked again on every state it is written on (bot/approvals/checked.py):
        approvers may snooze and escalate; the people it was escalated to may escalate on or hand back;
        naming a person (who becomes an approver) takes the right to decide."""
        async def recheck(state: Request) -> str | None:
            refusal = await self.interactions.refusal(state, user_id, what=what)
            if refusal is not None and escalated and not naming and state.timers \
                    and user_id in state.timers.escalated_to:
                return None
            return refusal
        return recheck

    async def _as_target(self, request_id: str, user_id: str, refusal: Refusal) -> Request | Refusal:
        """The request if `user_id` is one of the people it was escalated to (who may escalate on or hand
        it back without being an approver), else `refusal` (why they may not decide it). A button that is
        not on the request's card stays refused."""
        if refusal.wrong_card:
            return refusal
        request = await self.service.reads.request(request_id)
        if request is not None and request.is_pending and request.timers and user_id in request.timers.escalated_to:
            return request
        return refusal

    async def open_modal(self, click: Click) -> None:
        """Approvers may escalate; so may the people it was escalated to (to pass it on or hand it back).
        Only someone who may decide may name a person: the one check's verdict (one read, one group walk)."""
        first = await self.interactions.check(click.request_id, click.user_id, click)
        checked = first if not isinstance(first, Refusal) else await self._as_target(click.request_id,
                                                                                    click.user_id, first)
        if isinstance(checked, Refusal):
            await self.interactions.tell(click.user_id, click.channel_id, checked.text)
            return
        may_pick = not isinstance(first, Refusal)
        await self.interactions.open_view(click, checked, escalate_modal(checked, click.user_id, may_pick=may_pick))

    async def check_submission(self, sub: Submission) -> tuple[EscalationChoice | None, dict[str, str]]:
        """Inline errors (for the ack) or the choice to carry out after it."""
        # One check, one bound on its group lookups (Slack's ack waits): whether the person may decide
        # (and so may name a person) is its verdict; a refused one may still pass it on as an escalation target.
        first = await self.interactions.check(sub.request_id, sub.user_id, within=PRE_ACK_LOOKUP_SECONDS,
                                              what="answer")
        refused = first if isinstance(first, Refusal) else None
        checked = first if refused is None else await self._as_target(sub.request_id, sub.user_id, refused)
        if isinstance(checked, Refusal):
            return None, {TARGET_BLOCK: strip_markup(checked.text)}
        choice, errors = parse_escalate_submission(sub.values, sub.user_id)
        if choice is not None and choice.where == PERSON and refused is not None:
            if refused.unknown_groups:
                return None, {PERSON_BLOCK: strip_markup(refused.text)}
            # Naming a person makes them an approver: only someone who may decide can hand that on.
            return None, {PERSON_BLOCK: "You were notified of this request, not made an approver, so you cannot "
                                        "name a person. Pass it to the next level or hand it back."}
        if choice is not None and choice.where == BACK and not (checked.timers or TimerState()).may_hand_back(
                sub.user_id):
            return None, {TARGET_BLOCK: "Only someone this request was escalated to can hand it back."}
        if choice is not None and choice.where == NEXT and next_level(checked.timing or Timing(),
                                                                      checked.timers or TimerState()) is None:
            return None, {TARGET_BLOCK: "There is no further level any more; pick a person."}
        return choice, errors

    async def finish_submission(self, sub: Submission, choice: EscalationChoice) -> None:
        actor = Actor(sub.user_id, sub.user_name)
        recheck = self._recheck(sub.user_id, naming=choice.where == PERSON)
        if choice.where == BACK:
            result = await self.timers.hand_back(sub.request_id, actor, note=choice.note, recheck=recheck)
        else:
            result = await self.timers.escalate(sub.request_id, actor, to_person=choice.person, note=choice.note,
                                                step_back=choice.step_back, recheck=recheck)
        text = result.text
        if not isinstance(result, Moved):
            request = await self.service.reads.request(sub.request_id)
            if request is not None and not request.is_pending:
                text = already_decided_text(request)
        if text:
            channel = sub.channel_id or (result.request.card_channel if isinstance(result, Moved) else None)
            await self.interactions.tell(sub.user_id, channel, text)

