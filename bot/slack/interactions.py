"""What happens when a person clicks a card button or submits a modal.

Listeners in `handlers.py` ack first and then call in here. Every refusal is a
clear ephemeral message (or an inline modal error) and writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass
from collections.abc import Coroutine
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.approvals.access import GroupsUnknown, in_listed_group
from bot.approvals.checked import RECHECKS, decide_checked
from bot.process.clock import Clock
from bot.domain.choices import allowed_decisions
from bot.domain.choices import refusal as choices_refusal
from bot.domain.duties import approve_refusal
from bot.domain.edits import compute_changes
from bot.domain.undo import held
from bot.domain.model import Actor, Kind, Outcome, Request, Via
from bot.process.metrics import Metrics
from bot.approvals.service import Service
from bot.slack import blocks
from bot.slack.duties import CONFIRM_VIEW, confirm_block, confirm_errors, confirm_modal, counted_text, duplicate_text
from bot.slack.payloads import Click, Submission
from bot.slack.received import REPLAYING
from bot.slack.text import groups_unknown_text, mention, mentions, strip_markup, when

log = logging.getLogger(__name__)

_OUTCOME_WORDS = {
    "approved": "approved",
    "rejected": "rejected",
    "expired": "expired",
    "cancelled": "cancelled",
    "answered": "answered",
}


DECIDING_AT_ONCE = 4
BATCH_BUTTONS = ("This request holds several actions: on its card, tick the ones to approve and click "
                 "Approve selected (or Reject all), or use an action's own buttons. Nothing was changed.")
_VIEW_DECISION = {blocks.EDIT_VIEW: "edit", blocks.REJECT_VIEW: "reject", blocks.RESPOND_VIEW: "respond",
                  CONFIRM_VIEW: "approve"}


@dataclass(frozen=True)
class Refusal:
    text: str
    unknown_groups: bool = False  # Slack could not say who is in a group the check rested on
    wrong_card: bool = False  # the button is not on the request's card: refused whoever clicked it


def already_decided_text(request: Request) -> str:
    approval = held(request)
    if approval is not None:  # in its undo window: approved, not run yet (bot/domain/undo.py)
        return (f"Already approved by {mention(approval.actor.id)}; it runs {when(approval.until)} unless they "
                "undo it. Nothing was changed.")
    decision = request.decision
    word = _OUTCOME_WORDS.get(request.status.value, request.status.value)
    if decision is None:
        return f"This request was already {word}."
    who = mention(decision.decided_by.id) if decision.decided_by else {
        "timeout": "timeout", "policy": "policy", "api": "the agent"}.get(decision.via.value, "Signoff")
    return f"Already {word} by {who} ({when(decision.decided_at)}). Nothing was changed."


# chat.postEphemeral's answers when the person cannot see the channel (a form opened from App Home
# about a card in a channel they are not in, an archived channel): the note goes as a DM instead.
NOT_THERE = frozenset({"user_not_in_channel", "channel_not_found", "not_in_channel", "is_archived"})


async def tell(client: AsyncWebClient, metrics: Metrics, user_id: str, channel: str | None, text: str,
               thread_ts: str | None = None) -> None:
    """An ephemeral note to one person (a DM when there is no channel, e.g. a click in App Home, or
    when the person cannot see the channel)."""
    method = "chat.postEphemeral"
    try:
        if channel:
            try:
                await client.chat_postEphemeral(channel=channel, user=user_id, text=text, thread_ts=thread_ts)
                return
            except SlackApiError as exc:
                if exc.response.get("error") not in NOT_THERE:
                    raise
                metrics.slack_api_errors.labels(method, str(exc.response.get("error"))).inc()
        method = "chat.postMessage"
        await client.chat_postMessage(channel=user_id, text=text)
    except SlackApiError as exc:
        metrics.slack_api_errors.labels(method, str(exc.response.get("error"))).inc()
        log.warning("could not tell %s: %s", user_id, exc.response.get("error"))
    except (aiohttp.ClientError, TimeoutError) as exc:  # a note is best effort: Slack down or slow
        metrics.slack_api_errors.labels(method, "connection").inc()
        log.warning("could not tell %s: %s: %s", user_id, type(exc).__name__, exc)


class _Again:
    """The click is to be checked again: on `request` as just read, or (None) on a fresh read."""

    def __init__(self, request: Request | None) -> None:
        self.request = request


class Interactions:
    def __init__(self, service: Service, client: AsyncWebClient, clock: Clock, metrics: Metrics, *,
                 background: set[asyncio.Task[Any]] | None = None) -> None:
        self.service = service
        self.client = client
        self.clock = clock
        self.metrics = metrics
        self._deciding = asyncio.Semaphore(DECIDING_AT_ONCE)
        # Ephemeral notes still being posted (the process's background set: a graceful stop waits for them)
        self._notes: set[asyncio.Task[Any]] = background if background is not None else set()

    # -- checks shared by every interaction ----------------------------------

    async def _check(
        self, request_id: str, user_id: str, click: Click | None = None, *, authorize: bool = True,
        decision: str | None = None, held: Request | None = None, what: str = "click", within: float | None = None,
    ) -> Request | Refusal:
        """`held`: the request to check instead of reading it (bot/live/pending_states.py's, or one just read);
        `what`: the person's input, as a refusal names it ("your click was not recorded")."""
        request = held if held is not None else await self.service.reads.request(request_id)
        if request is None:
            return Refusal("This card points to a Signoff request that does not exist. Nothing was changed.")
        if click is not None and request.card_ts and click.message_ts and click.view_id is None:
            if click.message_ts != request.card_ts or (click.channel_id and click.channel_id != request.card_channel):
                return Refusal("This button does not belong to the card it was clicked on. Nothing was changed.",
                               wrong_card=True)
        if not request.is_pending:
            return Refusal(already_decided_text(request))
        if request.kind is not Kind.APPROVAL:
            return Refusal("This is a question, not an approval: answer it in its thread. Nothing was changed.")
        offered = allowed_decisions(request.kind, request.extra)
        if decision is not None and decision not in offered:
            return Refusal(choices_refusal(decision, offered))
        try:
            allowed = not authorize or await self.service.may_decide(request, user_id, within=within)
        except GroupsUnknown as exc:
            return Refusal(groups_unknown_text(exc, what), unknown_groups=True)
        if not allowed:
            escalated = _escalated_to(request)
            if escalated:  # a late click from someone the request moved away from
                return Refusal(f"This request was escalated to {escalated}, and you are no longer one of its "
                               f"approvers, so your {what} was not recorded. " + _approvers_text(request))
            return Refusal(
                f"You are not one of the approvers of this request, so your {what} was not recorded. "
                + _approvers_text(request)
            )
        return request

    async def refusal(self, state: Request, user_id: str, *, decision: str | None = None,
                      what: str = "click") -> str | None:
        """Why `user_id` may not make `decision` on the request as `state` has it, or None (bot/approvals/checked.py's
        recheck: run again on every state a decision is about to be written on)."""
        checked = await self._check(state.id, user_id, decision=decision, held=state, what=what)
        if isinstance(checked, Refusal):
            return checked.text
        return approve_refusal(state, user_id) if decision in ("approve", "edit") else None

    async def check(self, request_id: str, user_id: str, click: Click | None = None, *,
                    within: float | None = None, what: str = "click") -> Request | Refusal:
        """The pending request if `user_id` may act on it from `click`, else why not (for other modules).
        `within`: before an ack, a user group's lookup gives up after that long (bot.approvals.access.bounded)."""
        return await self._check(request_id, user_id, click, within=within, what=what)

    async def tell(self, user_id: str, channel: str | None, text: str, thread_ts: str | None = None) -> None:
        await tell(self.client, self.metrics, user_id, channel, text, thread_ts)

    # -- buttons -------------------------------------------------------------

    async def approve(self, click: Click, *, opens_view: bool = False) -> None:
        """`opens_view`: the card's Approve asks to type a confirmation, so the click's trigger_id
        (3 s) must reach views.open now, not after the decision slot frees up."""
        if opens_view:
            note = await self._approve(click)
        else:
            await self._look_up_groups(click)
            # A burst of clicks waits here, using no CPU, rather than all at once: the event loop stays
            # free to answer the next clicks' acks promptly (Slack's 3 s), while decisions go at full speed.
            async with self._deciding:
                note = await self._approve(click)
        if note is not None and REPLAYING.get() and await self._decided_by(click.request_id, click.user_id):
            return  # a replayed click (bot/slack/received.py) whose decision committed before the crash: it is theirs
        if note is not None:
            # After the slot is released, and in the background: a slow or rate-limited Slack (with
            # its retries) delays only this person's note, never someone else's decision.
            self.later(self.tell(click.user_id, click.channel_id, note))

    async def _decided_by(self, request_id: str, user_id: str) -> bool:
        """Whether `user_id` decided the request, or voted on it."""
        request = await self.service.reads.request(request_id)
        if request is None:
            return False
        decided = request.decision is not None and request.decision.decided_by is not None \
            and request.decision.decided_by.id == user_id
        return decided or any(v.voter.id == user_id for v in request.votes)

    async def _look_up_groups(self, click: Click) -> None:
        """Before a decision slot is taken: the members of the user groups the click's check will need
        (of a request this process holds), so a slow Slack keeps this click waiting, not the slots
        everyone else's decisions need. Failures are the directory's to remember; the check tells them."""
        held = self.service.known.get(click.request_id)
        directory = self.service.directory
        if held is None or directory is None or click.user_id in held.approvers:
            return
        with contextlib.suppress(GroupsUnknown):  # the same walk as the check's: it stops at the first group
            await in_listed_group(click.user_id, held.approvers, directory.group_members)  # holding the person

    def later(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._notes.add(task)
        task.add_done_callback(self._notes.discard)

    async def _approve(self, click: Click) -> str | None:
        """Decide; returns the note to tell the clicker, if any (the caller posts it).

        The click is checked on a state of the request and decided on that version only
        (`only_on_read`): first on the request as this process last committed it, if it holds it
        (bot/live/pending_states.py: no read), else as read. If the request moved on since, nothing is written and
        the click is checked again on the request as the decision found it, so a click is never
        decided on a state its check did not see (an escalation that took the clicker away, a card
        ts stored meanwhile). A refusal on a held state is not told: it is checked again as read."""
        held = self.service.known.get(click.request_id)
        state, trusted = (held, False) if held is not None else (None, True)
        for _ in range(RECHECKS):
            note = await self._approve_on(click, state, trusted=trusted)
            if not isinstance(note, _Again):
                if not trusted:
                    self.service.known.used += 1
                return note
            if not trusted:
                self.service.known.forget(click.request_id)  # out of date: the row moved on without us
            state, trusted = note.request, True
        return ("This request kept changing while your click was being recorded, so it was not. "
                "Click again to approve it as it is now.")

    async def _approve_on(self, click: Click, state: Request | None, *, trusted: bool) -> str | _Again | None:
        """`state`: the request to check (None: read it); `trusted`: it is as read, so a refusal is told."""
        checked = await self._check(click.request_id, click.user_id, click, decision="approve", held=state)
        if isinstance(checked, Refusal):
            return checked.text if trusted else _Again(None)
        refusal = BATCH_BUTTONS if checked.is_batch else approve_refusal(checked, click.user_id)
        if refusal is not None:  # separation of duties: told why, nothing written
            return refusal if trusted else _Again(None)
        if checked.confirm is not None:  # typed confirmation: the modal approves, not the click
            if not trusted:
                return _Again(None)
            await self.open_view(click, checked, confirm_modal(checked))  # within 3 s of the click: now
            return None
        result = await self.service.decide(
            checked.id, Outcome.APPROVED, via=Via.BUTTON, actor=Actor(click.user_id, click.user_name), read=checked,
            only_on_read=True,
        )
        if result.stale:  # the request as the decision read it: checked next, no read again
            return _Again(result.request)
        if result.duplicate:
            return duplicate_text(result.request)
        if result.counted:
            return counted_text(result.request)
        if not result.won:
            return already_decided_text(result.request)
        if _escalated_to(checked) and click.user_id not in (checked.timers.escalated_to if checked.timers else ()):
            return (f"Approved. This request had been escalated to {_escalated_to(checked)}; your decision "
                    "counts because you are still one of its approvers.")
        return None

    async def undo(self, click: Click) -> None:
        """Undo: the approver takes back their approval while it waits in its window (bot/approvals/undo.py)."""
        why = await self.service.undo_window.undo(click.request_id, Actor(click.user_id, click.user_name))
        if why is not None:
            await self.tell(click.user_id, click.channel_id, why)

    async def open_modal(self, click: Click, kind: str) -> None:
        """`kind`: edit, reject or respond ("Reply instead")."""
        checked = await self._check(click.request_id, click.user_id, click, decision=kind)
        if isinstance(checked, Refusal):
            await self.tell(click.user_id, click.channel_id, checked.text)
            return
        if checked.is_batch:
            await self.tell(click.user_id, click.channel_id, BATCH_BUTTONS)
            return
        if kind == "edit":
            refusal = approve_refusal(checked, click.user_id)
            if refusal is None and checked.quorum > 1:
                refusal = (f"This request needs {checked.quorum} approvers, who each approve the same parameters, "
                           "so it cannot be edited. Approve it as it is, or reject it with a reason.")
            if refusal is not None:
                await self.tell(click.user_id, click.channel_id, refusal)
                return
        modal = {"edit": blocks.edit_modal, "respond": blocks.respond_modal}.get(kind, blocks.reject_modal)
        view = modal(checked)
        if kind == "edit" and checked.confirm is not None:  # editing approves: it asks to type too
            view["blocks"] = [*view["blocks"][:99], confirm_block(checked)]
        await self.open_view(click, checked, view)

    async def open_view(self, click: Click, request: Request, view: dict[str, Any], **meta: Any) -> None:
        """Open a modal about `request` from `click` (straight away: its trigger_id lives 3 s).

        The modal remembers the request, the version it showed, the card it came from and `meta`.
        If Slack refuses or does not answer in time, the person is told to click again: never left
        without an answer.
        """
        view["private_metadata"] = json.dumps(
            {"request_id": request.id, "version": request.version, "channel": click.channel_id,
             "message_ts": click.message_ts, **meta}
        )
        try:
            await self.client.views_open(trigger_id=click.trigger_id, view=view)
            if request.first_viewed_at is None:  # a person opened it: its first view (bot/domain/stats.py)
                self.later(self.service.stats.viewed([request.id]))
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            why = str(exc.response.get("error")) if isinstance(exc, SlackApiError) else "connection"
            self.metrics.slack_api_errors.labels("views.open", why).inc()
            log.warning("views.open failed for %s: %s", request.id, why)
            await self.tell(
                click.user_id, click.channel_id,
                "Slack could not open the form (it took too long). Please click again.",
            )

    # -- modal submissions: validation happens before the ack ------------------

    async def check_submission(self, sub: Submission) -> tuple[Request | None, dict[str, Any], dict[str, str]]:
        """(request, edited params, inline errors) for a submitted form; errors mean nothing is written.

        Runs before the ack, so it reads only our database; whether the person may decide can
        need a Slack call (user groups) and is checked after the ack, in `finish_submission`.
        """
        first_block = "reason" if sub.callback_id in (blocks.REJECT_VIEW, blocks.RESPOND_VIEW) else next(iter(sub.values), "reason")
        oversize = _oversize_inputs(sub.values)
        if oversize:
            return None, {}, oversize
        decision = _VIEW_DECISION.get(sub.callback_id, "reject")
        checked = await self._check(sub.request_id, sub.user_id, authorize=False, decision=decision)
        if isinstance(checked, Refusal):
            return None, {}, {first_block: strip_markup(checked.text)}
        if sub.callback_id == blocks.RESPOND_VIEW and not blocks.parse_respond_submission(sub.values):
            return None, {}, {"reason": "Write the reply the agent should get."}
        if sub.message_ts and checked.card_ts and (sub.message_ts != checked.card_ts or (
                sub.channel_id and checked.card_channel and sub.channel_id != checked.card_channel)):
            # The form was opened from another card than this request's: its metadata was tampered with.
            return None, {}, {first_block: "This form does not belong to that request. Nothing was changed."}
        refusal = _form_refusal(sub, checked)
        if refusal is not None:
            return None, {}, {first_block: strip_markup(refusal)}
        if sub.callback_id in (blocks.EDIT_VIEW, CONFIRM_VIEW):
            errors = confirm_errors(checked, sub.values)  # nothing is written on a mismatch
            if errors:
                return None, {}, errors
        if sub.callback_id == blocks.EDIT_VIEW:
            params, errors = blocks.parse_edit_submission(checked, sub.values)
            if not errors:
                problem = await self.service.recheck_edit(checked, params)  # policy re-evaluates the edit (12a)
                if problem:
                    errors = {first_block: strip_markup(problem)[:2000]}
            return (None, {}, errors) if errors else (checked, params, {})
        return checked, checked.action.params, {}

    async def finish_submission(self, sub: Submission, request: Request, params: dict[str, Any]) -> None:
        """After the ack: decide the checked form, on a state of the request on which the person may
        (their membership of a user group can need a Slack call, so it is checked here; bot/approvals/checked.py)."""
        channel = sub.channel_id or request.card_channel
        decision = _VIEW_DECISION.get(sub.callback_id, "reject")

        async def recheck(state: Request) -> str | None:
            checked = await self._check(state.id, sub.user_id, decision=decision, held=state, what="answer")
            if isinstance(checked, Refusal):
                return checked.text
            refusal = _form_refusal(sub, checked)
            if refusal is None and sub.callback_id == blocks.EDIT_VIEW:
                # Again now, as the edit is decided: a deny made since the form was checked (another
                # replica's, a colleague's grant) holds; the form is closed, so the person is told.
                problem = await self.service.recheck_edit(checked, params, form_open=False)
                if problem:
                    return f"{problem} Nothing was changed."
            return refusal

        decide: dict[str, Any]
        if sub.callback_id == blocks.EDIT_VIEW:
            decide = {"via": Via.MODAL, "params": params, "changes": compute_changes(request.action.params, params)}
        elif sub.callback_id == blocks.RESPOND_VIEW:  # recorded as a rejection: the action must not run
            decide = {"via": Via.REPLY, "comment": blocks.parse_respond_submission(sub.values)}
        elif sub.callback_id == CONFIRM_VIEW:
            decide = {"via": Via.MODAL}
        else:
            decide = {"via": Via.MODAL, "comment": blocks.parse_reject_submission(sub.values)}
        outcome = Outcome.APPROVED if decision in ("edit", "approve") else Outcome.REJECTED
        result = await decide_checked(self.service, request, recheck, outcome,
                                      actor=Actor(sub.user_id, sub.user_name), **decide)
        if result.refused is not None:
            await self.tell(sub.user_id, channel, result.refused)
        elif result.duplicate:
            await self.tell(sub.user_id, channel, duplicate_text(result.request))
        elif result.counted:
            await self.tell(sub.user_id, channel, counted_text(result.request))
        elif not result.won:
            await self.tell(sub.user_id, channel, already_decided_text(result.request))


def _form_refusal(sub: Submission, request: Request) -> str | None:
    """Why this form may not decide `request` as it is, beyond `Interactions._check` (or None)."""
    if request.is_batch:
        return BATCH_BUTTONS
    if sub.callback_id in (blocks.EDIT_VIEW, CONFIRM_VIEW):
        refusal = approve_refusal(request, sub.user_id)
        if refusal is not None:
            return refusal
    if sub.callback_id == blocks.EDIT_VIEW and request.quorum > 1:
        return f"This request needs {request.quorum} approvers and cannot be edited. Nothing was changed."
    return None


def _escalated_to(request: Request) -> str:
    """Who the request was last escalated to, as mentions ("" if it never was)."""
    state = request.timers
    if state is None or not state.escalated or state.handed_back or not state.escalated_to:
        return ""
    return mentions(state.escalated_to)


def _approvers_text(request: Request) -> str:
    return "Approvers: " + mentions(request.approvers)


# Slack's text inputs hold at most 3000 characters; anything longer did not come from Slack's own form.
INPUT_MAX = 3000
REASON_MAX = 2000


def _oversize_inputs(values: dict[str, Any]) -> dict[str, str]:
    errors = {}
    for block_id, actions in values.items():
        for action in (actions or {}).values() if isinstance(actions, dict) else ():
            value = action.get("value") if isinstance(action, dict) else None
            limit = REASON_MAX if block_id == "reason" else INPUT_MAX
            if isinstance(value, str) and len(value) > limit:
                errors[str(block_id)] = f"must be at most {limit} characters (this is {len(value)})"
    return errors

