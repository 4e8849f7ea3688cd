"""Slack listeners for grants and delegation: "Approve & remember", Revoke, `/signoff grants`,
`/signoff away ...`, `/signoff back`, and the Home tab's Away… / I'm back.

Listeners ack first (modal validation errors go in the ack) and then call in here. "Approve &
remember" writes the grant in the same unit as the approval (the guarded decide): a losing click
never leaves a grant behind, and a crash leaves both or neither.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from datetime import UTC, tzinfo
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError

from bot.approvals.access import PRE_ACK_LOOKUP_SECONDS, GroupMembers, GroupsUnknown, bounded
from bot.approvals.checked import decide_checked
from bot.process.clock import new_id
from bot.domain.duties import approve_refusal
from bot.domain.grants import Grant, generalise
from bot.domain.model import Actor, Outcome, Request, Via
from bot.approvals.gate import policy_gate
from bot.approvals.grants import Grants
from bot.slack import grant_views as views
from bot.slack.interactions import Interactions, Refusal, already_decided_text
from bot.slack.payloads import BadPayload, extract_click, extract_submission, user_of
from bot.slack.policy_cards import REMEMBER, remember_allowed
from bot.slack.text import groups_unknown_text, slack_date, when

if TYPE_CHECKING:
    from bot.slack.home import Home

log = logging.getLogger(__name__)
_UNTIL = re.compile(r"\buntil\b", re.IGNORECASE)  # as parse_away reads it (any whitespace around it)
MAY_REVOKE = ("You see and may revoke the grants you made, those made on requests you are an approver of, and "
              "every grant if the policy file names you in `grant_admins`.")
_ZONE_TIMEOUT = 0.5  # seconds of the slash command's 3 s ack budget users.info may use (then: UTC)


class GrantInteractions:
    def __init__(self, interactions: Interactions, grants: Grants, home: Home | None = None) -> None:
        self.interactions = interactions
        self.service = interactions.service
        self.grants = grants
        self.home = home
        self.client = interactions.client
        self.clock = interactions.clock
        self._zones: dict[str, tzinfo] = {}

    async def _open(self, user: str, channel: str | None, trigger_id: str | None, view: dict[str, Any]) -> None:
        try:
            await self.client.views_open(trigger_id=trigger_id, view=view)
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("views.open failed: %s", exc)
            await self.interactions.tell(user, channel, "Slack could not open the form (it took too long). "
                                                        "Please click again.")

    # -- approve & remember ---------------------------------------------------------------

    async def open_remember(self, body: dict[str, Any]) -> None:
        click = extract_click(body)
        checked = await self.interactions.check(click.request_id, click.user_id, click)
        if isinstance(checked, Refusal):
            await self.interactions.tell(click.user_id, click.channel_id, checked.text)
            return
        if not remember_allowed(checked):
            await self.interactions.tell(click.user_id, click.channel_id, "Critical requests (and ones that ask to "
                                         "type a confirmation) cannot be remembered: each one asks. Nothing was changed.")
            return
        refusal = approve_refusal(checked, click.user_id)  # separation of duties holds here too
        if refusal is not None:
            await self.interactions.tell(click.user_id, click.channel_id, refusal)
            return
        view = views.remember_modal(checked)
        view["private_metadata"] = json.dumps({"request_id": checked.id, "version": checked.version,
                                               "channel": click.channel_id, "message_ts": click.message_ts})
        await self._open(click.user_id, click.channel_id, click.trigger_id, view)

    async def check_remember(self, body: dict[str, Any]) -> tuple[Any, dict[str, str]]:
        """Before the ack (our database only): the request and the parsed choice, or inline errors."""
        try:
            sub = extract_submission(body)
        except BadPayload as exc:
            return None, {views.SCOPE: str(exc)}
        request = await self.service.reads.request(sub.request_id)
        if request is None or not request.is_pending:
            text = already_decided_text(request) if request is not None else "This request no longer exists."
            return None, {views.SCOPE: _plain(text)}
        if not remember_allowed(request):
            return None, {views.SCOPE: "Critical requests cannot be remembered."}
        choice, errors = views.parse_remember(request, sub.values)
        if errors:
            return None, errors
        return (sub, request, choice), {}

    async def finish_remember(self, sub: Any, request: Any, choice: views.RememberChoice) -> None:
        channel = sub.channel_id or request.card_channel

        async def recheck(state: Request) -> str | None:  # on every state the decision is written on
            refusal = await self.interactions.refusal(state, sub.user_id, decision="approve", what="approval")
            if refusal is None and not remember_allowed(state):
                refusal = "Critical requests (and ones that ask to type a confirmation) cannot be remembered."
            return None if refusal is None else refusal + " No grant was made."

        match = generalise(request.action.params, choice.choices)
        now = self.clock.now()
        grant = Grant(id=new_id("grt"), tool=request.action.name, match=match, scope=choice.scope,
                      scope_value=views.scope_value(request, choice.scope), created_by=sub.user_id, created_at=now,
                      expires_at=now + choice.duration if choice.duration else None, request_id=request.id)
        result = await decide_checked(self.service, request, recheck, Outcome.APPROVED, via=Via.MODAL,
                                      actor=Actor(sub.user_id, sub.user_name),
                                      comment=f"Approved and remembered as grant {grant.id}",
                                      grants=(grant,))  # one unit: both or neither (or held: bot/domain/undo.py)
        if result.refused is not None:
            await self.interactions.tell(sub.user_id, channel, result.refused)
            return
        if not result.won or result.duplicate:
            text = "You had already approved this request." if result.duplicate else \
                already_decided_text(result.request)
            await self.interactions.tell(sub.user_id, channel, text + " No grant was made.")
            return
        if result.counted:  # a vote towards a quorum: the grant comes only with the approval itself
            await self.interactions.tell(sub.user_id, channel, "Your approval was counted; the request needs more "
                                         "approvals, so no grant was made.")
            return
        if result.held:
            await self.interactions.tell(sub.user_id, channel, f"Approved: it runs {when(result.request.undo_until)} "
                                         f"unless you undo it on the card; grant `{grant.id}` ({views.grant_line(grant)}) "
                                         "is made then, not before.")
            return
        await self.interactions.tell(sub.user_id, channel, f"Approved, and remembered as grant `{grant.id}`: "
                                     f"{views.grant_line(grant)}\nSee or revoke grants with `/signoff grants`.")

    # -- revoke and list ------------------------------------------------------------------------

    async def revoke(self, body: dict[str, Any]) -> None:
        user, _ = user_of(body)
        action = (body.get("actions") or [{}])[0]
        grant_id = str(action.get("value") or "")
        channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
        grant = await self.grants.get(grant_id)
        if grant is None:
            await self.interactions.tell(user, channel, "There is no such grant. Nothing was changed.")
            return
        admins, members = self._rights()
        try:
            allowed = await self.grants.may_revoke(user, grant, admins=admins, members=members)
        except GroupsUnknown as exc:
            await self.interactions.tell(user, channel, groups_unknown_text(exc, "revoke"))
            return
        if not allowed:
            await self.interactions.tell(user, channel, f"You cannot revoke grant `{grant_id}`: {MAY_REVOKE} "
                                         "Nothing was changed.")
            return
        if await self.grants.revoke(grant_id, user):
            text = f"Revoked grant `{grant_id}`: matching calls ask again from now on."
        else:
            text = f"Grant `{grant_id}` was already revoked by <@{grant.revoked_by}>." if grant.revoked_by else \
                f"Grant `{grant_id}` was already revoked."
        await self.interactions.tell(user, channel, text)
        if self.home is not None and (body.get("view") or {}).get("type") == "home":
            await self.home.opened(user)  # republish: the grant leaves the list

    def _rights(self) -> tuple[tuple[str, ...], GroupMembers | None]:
        """The policy's grant admins, and how to list a user group's members."""
        gate = policy_gate(self.service)
        admins = gate.holder.policy.grant_admins if gate is not None and gate.holder.policy is not None else ()
        directory = self.service.directory
        return admins, directory.group_members if directory is not None else None

    async def mine(self, user: str, *, within: float | None = None) -> list[Grant]:
        """The grants `user` may see and revoke (bot.approvals.grants.Grants.manageable)."""
        admins, members = self._rights()
        return await self.grants.manageable(user, admins=admins,
                                            members=bounded(members, within) if within is not None else members)

    async def list_message(self, user: str) -> dict[str, Any]:
        grants = await self.mine(user, within=PRE_ACK_LOOKUP_SECONDS)  # answered in the command's ack
        return {"response_type": "ephemeral", "text": f"{len(grants)} standing grant(s) you may see",
                "blocks": views.grant_blocks(grants, title="Standing grants you may see", note=MAY_REVOKE)}

    # -- delegation ---------------------------------------------------------------------------------

    async def _zone(self, user: str) -> tzinfo:
        """The person's own time zone (Slack profile), so "until 2026-12-24" means their midnight.

        Bounded: the slash command's ack waits on this, so a slow or failing users.info means UTC.
        """
        if user not in self._zones:
            try:
                info = await asyncio.wait_for(self.client.users_info(user=user), _ZONE_TIMEOUT)
                self._zones[user] = ZoneInfo(str((info.get("user") or {}).get("tz") or "UTC"))
            except (SlackApiError, aiohttp.ClientError, TimeoutError, ValueError, ZoneInfoNotFoundError) as exc:
                log.info("no time zone for %s (%s): using UTC", user, exc)
                return UTC
        return self._zones[user]

    async def away(self, user: str, text: str) -> str:
        zone = await self._zone(user) if _UNTIL.search(text) else UTC  # users.info only when a date is given
        try:
            until, delegate = views.parse_away(text, self.clock.now(), zone)
        except ValueError as exc:
            return str(exc)
        if delegate == user:
            return "You cannot delegate to yourself."
        await self.grants.away(user, delegate, until)
        await self._refresh(user)
        till = f" until {slack_date(until, '{date_short_pretty} {time}')}" if until else " until you say `/signoff back`"
        return f"You are away{till}: requests that would go to you also go to <@{delegate}>, who may decide."

    async def back(self, user: str) -> str:
        ended = await self.grants.back(user)
        await self._refresh(user)
        return "Welcome back: your requests go only to you again." if ended else "You were not away."

    async def _refresh(self, user: str) -> None:
        if self.home is not None:
            await self.home.opened(user)

    async def away_submitted(self, body: dict[str, Any]) -> tuple[str | None, dict[str, str]]:
        user, _ = user_of(body)
        values = ((body.get("view") or {}).get("state") or {}).get("values") or {}
        date = ((values.get(views.AWAY_UNTIL) or {}).get(views.AWAY_UNTIL) or {}).get("selected_date")
        delegate = ((values.get(views.AWAY_TO) or {}).get(views.AWAY_TO) or {}).get("selected_user")
        try:
            until = views.parse_until(str(date), self.clock.now(), await self._zone(user))
        except ValueError as exc:
            return None, {views.AWAY_UNTIL: str(exc)}
        if not delegate or delegate == user:
            return None, {views.AWAY_TO: "Pick someone other than yourself."}
        await self.grants.away(user, str(delegate), until)
        await self._refresh(user)
        return user, {}

    async def home_blocks(self, user: str) -> list[dict[str, Any]]:
        """The Home tab's delegation control and (under a policy file, where grants apply) the grant list."""
        now = self.clock.now()
        mine = await self.grants.delegations_of([user])
        blocks = [{"type": "divider"}, *views.away_blocks(mine, now=now)]
        if policy_gate(self.service) is not None:
            blocks += views.grant_blocks(await self.mine(user), title="Standing grants you may see", note=MAY_REVOKE)
        return blocks


def register(app: AsyncApp, gi: GrantInteractions) -> None:
    """Call before the core listeners: the `/signoff` subcommands here must match first."""

    async def on_remember(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        try:
            await gi.open_remember(body)  # views.open straight from the listener: trigger_id lives 3 s
        except BadPayload as exc:
            user = (body.get("user") or {}).get("id")
            if user:
                await gi.interactions.tell(user, (body.get("channel") or {}).get("id"), f"{exc}. Nothing was changed.")

    async def on_remember_submit(ack: Any, body: dict[str, Any]) -> None:
        checked, errors = await gi.check_remember(body)
        if errors:
            await ack(response_action="errors", errors=errors)
            return
        await ack()
        await gi.finish_remember(*checked)

    async def on_revoke(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        await gi.revoke(body)

    async def on_away_click(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        user, _ = user_of(body)
        await gi._open(user, None, body.get("trigger_id"), views.away_modal())

    async def on_back_click(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        user, _ = user_of(body)
        await gi.interactions.tell(user, None, await gi.back(user))

    async def on_away_submit(ack: Any, body: dict[str, Any]) -> None:
        _, errors = await gi.away_submitted(body)
        if errors:
            await ack(response_action="errors", errors=errors)
        else:
            await ack()

    def sub(word: str) -> Any:
        async def matches(body: dict[str, Any]) -> bool:
            return str(body.get("text") or "").strip().lower().split(" ", 1)[0] == word

        return matches

    async def on_grants(ack: Any, command: dict[str, Any]) -> None:
        await ack(**await gi.list_message(str(command["user_id"])))

    async def on_away(ack: Any, command: dict[str, Any]) -> None:
        await ack(text=await gi.away(str(command["user_id"]), str(command.get("text") or "")),
                  response_type="ephemeral")

    async def on_back(ack: Any, command: dict[str, Any]) -> None:
        await ack(text=await gi.back(str(command["user_id"])), response_type="ephemeral")

    app.action(REMEMBER)(on_remember)
    app.view(views.REMEMBER_VIEW)(on_remember_submit)
    app.action(views.REVOKE)(on_revoke)
    app.action(views.AWAY)(on_away_click)
    app.action(views.BACK)(on_back_click)
    app.view(views.AWAY_VIEW)(on_away_submit)
    app.command("/signoff", matchers=[sub("grants")])(on_grants)
    app.command("/signoff", matchers=[sub("away")])(on_away)
    app.command("/signoff", matchers=[sub("back")])(on_back)


def _plain(text: str) -> str:
    """Modal errors are plain text: Slack's <@U1> and <!date^...|fallback> markup becomes @U1 / the fallback."""
    text = re.sub(r"<!date\^[^|>]*\|([^>]*)>", r"\1", text)
    return re.sub(r"<@([A-Z0-9]+)>", r"@\1", text)[:2000]
