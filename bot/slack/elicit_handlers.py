"""The elicitation card's buttons and form: Answer (opens the form), Decline, Done (URL mode).

Thin listeners: ack, parse, delegate. Who may answer is who may answer a question (the people
asked, `Service.may_decide`), checked again on every state the answer is written on
(bot/approvals/checked.py). The form is read and checked against the schema before the ack, so a
wrong value goes back into the form and nothing is written; a refusal after the ack is said to
the person in an ephemeral message. One answer wins: the decision is a guarded write.
"""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.approvals.access import GroupsUnknown
from bot.approvals.checked import decide_checked
from bot.domain.elicitation import is_elicitation
from bot.domain.model import Actor, Kind, Outcome, Request, Via
from bot.slack import elicit_blocks as eb
from bot.slack.interactions import Interactions, already_decided_text
from bot.slack.payloads import BadPayload, Click, Submission, extract_click, extract_submission
from bot.slack.text import groups_unknown_text, strip_markup

NOT_ASKED = "You are not one of the people asked, so your answer was not recorded. Nothing was changed."


class ElicitInteractions:
    def __init__(self, interactions: Interactions) -> None:
        self.interactions = interactions
        self.service = interactions.service

    def _recheck(self, user_id: str) -> Any:
        async def recheck(state: Request) -> str | None:
            if not state.is_pending:
                return already_decided_text(state)
            try:
                return None if await self.service.may_decide(state, user_id) else NOT_ASKED
            except GroupsUnknown as exc:
                return groups_unknown_text(exc, "answer")
        return recheck

    async def _found(self, request_id: str, message_ts: str | None, channel: str | None) -> Request | str:
        """The pending elicitation the button or form names, or why not (read from our database only)."""
        request = await self.service.reads.request(request_id)
        if request is None or request.kind is not Kind.QUESTION or not is_elicitation(
                request.action.name, request.action.params):
            return "This card points to a Signoff question that does not exist. Nothing was changed."
        if request.card_ts and message_ts and (message_ts != request.card_ts or (
                channel and request.card_channel and channel != request.card_channel)):
            return "This button does not belong to the card it was clicked on. Nothing was changed."
        if not request.is_pending:
            return already_decided_text(request)
        return request

    async def _checked(self, click: Click) -> Request | None:
        found = await self._found(click.request_id, click.message_ts if click.view_id is None else None,
                                  click.channel_id)
        refusal = found if isinstance(found, str) else await self._recheck(click.user_id)(found)
        if refusal is not None:
            await self.interactions.tell(click.user_id, click.channel_id, refusal)
            return None
        assert isinstance(found, Request)
        return found

    async def open_form(self, click: Click) -> None:
        request = await self._checked(click)
        if request is not None:
            await self.interactions.open_view(click, request, eb.form_modal(request))

    async def decline(self, click: Click) -> None:
        request = await self._checked(click)
        if request is not None:
            await self._decide(request, click.user_id, click.user_name, click.channel_id, Outcome.REJECTED, {})

    async def done(self, click: Click) -> None:
        request = await self._checked(click)
        if request is None:
            return
        if request.action.params.get("mode") != "url":
            await self.interactions.tell(click.user_id, click.channel_id, "This question is answered in its form.")
            return
        await self._decide(request, click.user_id, click.user_name, click.channel_id, Outcome.ANSWERED, {})

    async def check_form(self, sub: Submission) -> tuple[Request | None, dict[str, Any], dict[str, str]]:
        """Before the ack: (request, content, errors by block id); errors mean nothing is written."""
        found = await self._found(sub.request_id, sub.message_ts, sub.channel_id)
        first = next(iter(sub.values), f"{eb.FIELD_PREFIX}")
        if isinstance(found, str):
            return None, {}, {first: strip_markup(found)}
        if found.action.params.get("mode") != "form":
            return None, {}, {first: "This question has no form. Nothing was changed."}
        content, errors = eb.read_form(found, sub.values)
        return (None, {}, errors) if errors else (found, content, {})

    async def finish_form(self, sub: Submission, request: Request, content: dict[str, Any]) -> None:
        await self._decide(request, sub.user_id, sub.user_name, sub.channel_id or request.card_channel,
                           Outcome.ANSWERED, {"content": content}, via=Via.MODAL)

    async def _decide(self, request: Request, user_id: str, user_name: str | None, channel: str | None,
                      outcome: Outcome, params: dict[str, Any], via: Via = Via.BUTTON) -> None:
        result = await decide_checked(self.service, request, self._recheck(user_id), outcome, via=via,
                                      actor=Actor(user_id, user_name), params=params)
        if result.refused is not None:
            await self.interactions.tell(user_id, channel, result.refused)
        elif not result.won:
            await self.interactions.tell(user_id, channel, already_decided_text(result.request))


def register(app: AsyncApp, ei: ElicitInteractions) -> None:
    async def click_of(body: dict[str, Any]) -> Click | None:
        try:
            return extract_click(body)
        except BadPayload as exc:
            user = (body.get("user") or {}).get("id")
            if user:
                await ei.interactions.tell(user, (body.get("channel") or {}).get("id"),
                                           f"That button could not be used: {exc}. Nothing was changed.")
            return None

    async def on_open(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        click = await click_of(body)
        if click is not None:
            await ei.open_form(click)  # views.open straight from the listener: trigger_id lives 3 s

    async def on_decline(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        click = await click_of(body)
        if click is not None:
            await ei.decline(click)

    async def on_done(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        click = await click_of(body)
        if click is not None:
            await ei.done(click)

    async def on_submit(ack: AsyncAck, body: dict[str, Any]) -> None:
        try:
            sub = extract_submission(body)
        except BadPayload as exc:
            values = ((body.get("view") or {}).get("state") or {}).get("values") or {}
            await ack(response_action="errors", errors={next(iter(values), eb.FIELD_PREFIX): str(exc)})
            return
        request, content, errors = await ei.check_form(sub)
        if errors or request is None:
            await ack(response_action="errors", errors=errors)
            return
        await ack()
        await ei.finish_form(sub, request, content)

    app.action(eb.OPEN)(on_open)
    app.action(eb.DECLINE)(on_decline)
    app.action(eb.DONE)(on_done)
    app.view(eb.FORM_VIEW)(on_submit)
