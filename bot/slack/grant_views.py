"""Pure Block Kit and parsing for grants and delegation: the "Approve & remember" modal, the grant
list (App Home and `/signoff grants`), the away modal, and `/signoff away ...` text.

Agent text (parameter values) only ever appears in plain_text objects or escaped mrkdwn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from bot.domain.grants import ANY, DOMAIN, Delegation, Grant, Scope, agent_of, email_domain, run_of
from bot.domain.model import Request
from bot.slack.previews import clip, escape_mrkdwn, one_line, plain
from bot.slack.text import slack_date

REMEMBER_VIEW = "signoff_remember_view"
AWAY_VIEW = "signoff_away_view"
REVOKE = "signoff_revoke_grant"
AWAY = "signoff_away"
BACK = "signoff_back"
GENERALISE, SCOPE, DURATION = "generalise", "scope", "duration"
AWAY_UNTIL, AWAY_TO = "away_until", "away_to"
DURATIONS = {"1h": timedelta(hours=1), "1d": timedelta(days=1), "7d": timedelta(days=7), "forever": None}
DURATION_LABELS = {"1h": "1 hour", "1d": "1 day", "7d": "7 days", "forever": "Until revoked"}
GRANTS_SHOWN = 10
MAX_OPTIONS = 10  # Slack: checkboxes hold at most 10 options


def _option(text: str, value: str) -> dict[str, Any]:
    return {"text": plain(text, limit=75), "value": value}


def generalise_options(request: Request) -> list[dict[str, Any]]:
    options: list[dict[str, Any]] = []
    for name, value in request.action.params.items():
        if len(options) >= MAX_OPTIONS:
            break
        domain = email_domain(value)
        if domain is not None:
            options.append(_option(f"{clip(name, 30)}: any address at @{clip(domain, 30)}", f"{name}:{DOMAIN}"))
        elif isinstance(value, str):
            options.append(_option(f"{clip(name, 40)}: any text", f"{name}:{ANY}"))
    return options


def scope_options(request: Request) -> list[dict[str, Any]]:
    options = []
    if run_of(request.extra):
        options.append(_option("This agent run only", Scope.RUN.value))
    agent = agent_of(request.extra)  # the token that made the request, never its requested_by label
    if agent:
        options.append(_option(f"This agent ({one_line(agent)})", Scope.AGENT.value))
    options.append(_option("This channel", Scope.CHANNEL.value))
    options.append(_option("Everyone", Scope.EVERYONE.value))
    return options


def remember_modal(request: Request) -> dict[str, Any]:
    """Approve now, and remember: what to match, where, for how long."""
    scopes = scope_options(request)
    durations = [_option(DURATION_LABELS[k], k) for k in DURATIONS]
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": plain(
            f"Approve this {clip(request.action.name, 100)} call, and approve matching calls from now on "
            "without asking. By default only calls with exactly these parameters match.", limit=3000)},
    ]
    options = generalise_options(request)
    if options:
        blocks.append({"type": "input", "block_id": GENERALISE, "optional": True,
                       "label": plain("Also match (widen these fields)"),
                       "element": {"type": "checkboxes", "action_id": GENERALISE, "options": options}})
    blocks.append({"type": "input", "block_id": SCOPE, "label": plain("For"),
                   "element": {"type": "radio_buttons", "action_id": SCOPE, "options": scopes,
                               "initial_option": scopes[0]}})
    blocks.append({"type": "input", "block_id": DURATION, "label": plain("For how long"),
                   "element": {"type": "static_select", "action_id": DURATION, "options": durations,
                               "initial_option": durations[1]}})
    return {"type": "modal", "callback_id": REMEMBER_VIEW, "title": plain("Approve & remember"),
            "submit": plain("Approve"), "close": plain("Cancel"), "blocks": blocks}


@dataclass(frozen=True)
class RememberChoice:
    choices: dict[str, str]  # field -> ANY | DOMAIN
    scope: Scope
    duration: timedelta | None


def _selected(values: dict[str, Any], block: str) -> Any:
    return ((values.get(block) or {}).get(block) or {})


def parse_remember(request: Request, values: dict[str, Any]) -> tuple[RememberChoice | None, dict[str, str]]:
    """The choice in a submitted remember modal, or inline errors by block id."""
    choices: dict[str, str] = {}
    allowed = {o["value"] for o in generalise_options(request)}
    for option in _selected(values, GENERALISE).get("selected_options") or []:
        value = str(option.get("value"))
        if value not in allowed:
            return None, {GENERALISE: "That option does not belong to this request."}
        name, _, how = value.rpartition(":")
        choices[name] = how
    scope_value = (_selected(values, SCOPE).get("selected_option") or {}).get("value")
    if scope_value not in {o["value"] for o in scope_options(request)}:
        return None, {SCOPE: "Pick who the grant is for."}
    duration = (_selected(values, DURATION).get("selected_option") or {}).get("value")
    if duration not in DURATIONS:
        return None, {DURATION: "Pick how long the grant lasts."}
    return RememberChoice(choices, Scope(str(scope_value)), DURATIONS[str(duration)]), {}


def scope_value(request: Request, scope: Scope) -> str | None:
    return {Scope.RUN: run_of(request.extra), Scope.AGENT: agent_of(request.extra),
            Scope.CHANNEL: request.channel, Scope.EVERYONE: None}[scope]


def grant_line(grant: Grant) -> str:
    scope = {Scope.RUN: "run", Scope.AGENT: "agent", Scope.CHANNEL: "channel", Scope.EVERYONE: "everyone"}[grant.scope]
    where = scope + (f" {grant.scope_value}" if grant.scope_value else "")
    if grant.scope is Scope.CHANNEL and grant.scope_value:
        where = f"channel <#{grant.scope_value}>"
    until = f"until {slack_date(grant.expires_at, '{date_short_pretty} at {time}')}" if grant.expires_at \
        else "until revoked"
    return (f"`{escape_mrkdwn(clip(grant.id, 40))}` {escape_mrkdwn(clip(one_line(grant.describe()), 400))}\n"
            f"for {where} · {until} · by <@{grant.created_by}>")


def grant_blocks(grants: list[Grant], *, title: str = "Standing grants", note: str | None = None
                 ) -> list[dict[str, Any]]:
    """A header, `note` (who sees what), and one section per grant with a Revoke button (at most GRANTS_SHOWN)."""
    blocks: list[dict[str, Any]] = [{"type": "header", "text": plain(f"{title} ({len(grants)})")}]
    if note:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": note}]})
    if not grants:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": "No grants that you may see."}]})
    for grant in grants[:GRANTS_SHOWN]:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": clip(grant_line(grant), 3000)},
                       "accessory": {"type": "button", "action_id": REVOKE, "value": grant.id, "style": "danger",
                                     "text": plain("Revoke")}})
    if len(grants) > GRANTS_SHOWN:
        blocks.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": f"…and {len(grants) - GRANTS_SHOWN} more"}]})
    return blocks


def away_blocks(mine: list[Delegation], *, now: datetime) -> list[dict[str, Any]]:
    """The Home tab's delegation control: where you stand, and Away… / I'm back."""
    active = [d for d in mine if d.active(now)]
    if active:
        d = active[0]
        until = f" until {slack_date(d.until, '{date_short_pretty}')}" if d.until else ""
        text = f"🏖️ You are away{until}: your requests also go to <@{d.delegate}>."
        button = {"type": "button", "action_id": BACK, "value": "back", "text": plain("I'm back")}
    else:
        text = "You are not away. Going away? Your requests can also go to a delegate."
        button = {"type": "button", "action_id": AWAY, "value": "away", "text": plain("Away…")}
    return [{"type": "section", "text": {"type": "mrkdwn", "text": text}, "accessory": button}]


def away_modal() -> dict[str, Any]:
    return {"type": "modal", "callback_id": AWAY_VIEW, "title": plain("Away"), "submit": plain("Save"),
            "close": plain("Cancel"), "private_metadata": "{}", "blocks": [
                {"type": "input", "block_id": AWAY_UNTIL, "label": plain("Away until (back on this day)"),
                 "element": {"type": "datepicker", "action_id": AWAY_UNTIL}},
                {"type": "input", "block_id": AWAY_TO, "label": plain("Send my requests also to"),
                 "element": {"type": "users_select", "action_id": AWAY_TO}},
            ]}


_AWAY = re.compile(r"^away(?:\s+until\s+(?P<until>\S+))?\s+to\s+(?P<to>\S+)\s*$", re.IGNORECASE)
_USER = re.compile(r"^(?:<@(?P<esc>[UW][A-Z0-9]+)(?:\|[^>]*)?>|(?P<raw>[UW][A-Z0-9]+))$")


def parse_until(text: str, now: datetime, tz: tzinfo = UTC) -> datetime:
    """`2026-12-24` (back on that day: 00:00 in `tz`, the person's own zone) or an ISO time with a
    zone; must be in the future. Returned in UTC."""
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            at = datetime.fromisoformat(text).replace(tzinfo=tz)
        else:
            at = datetime.fromisoformat(text.replace("Z", "+00:00"))
            if at.tzinfo is None:
                raise ValueError("no time zone")
    except ValueError:
        raise ValueError(f"{text!r} is not a date like 2026-12-24") from None
    if at <= now:
        raise ValueError(f"{text} is not in the future")
    return at.astimezone(UTC)


def parse_away(text: str, now: datetime, tz: tzinfo = UTC) -> tuple[datetime | None, str]:
    """`away [until DATE] to @someone` -> (until, delegate user id); ValueError says what is wrong."""
    found = _AWAY.match(text.strip())
    if not found:
        raise ValueError("Usage: `/signoff away until 2026-12-24 to @bob`")
    who = _USER.match(found.group("to"))
    if who is None:
        raise ValueError(f"I cannot tell who {found.group('to')} is: mention them (Slack sends <@U…>) or give "
                         "their user id (U…), or use Away… on Signoff's Home tab")
    until = parse_until(found.group("until"), now, tz) if found.group("until") else None
    return until, who.group("esc") or who.group("raw")
