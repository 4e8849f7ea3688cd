"""Suggestions from the decision record, in Slack (App Home and the weekly digest): the evidence, exactly
what accepting adds (the grant, allow or deny: tool, match, scope, expiry), and Accept / Dismiss. Pure
Block Kit.

Tool names and parameter globs come from agents: they appear only in plain_text objects (never parsed as
mrkdwn), so they cannot mention anyone or fake a link.
"""

from __future__ import annotations

from typing import Any

from bot.approvals.history import Offer
from bot.domain.grants import DENY, Grant, Scope
from bot.domain.values import CHANNEL_ID
from bot.slack.previews import clip, escape_mrkdwn, one_line, plain

ACCEPT = "signoff_history_accept"
DISMISS = "signoff_history_dismiss"
VALUE_MAX = 2000  # Slack's button value
HOME_TITLE = "Signoff could ask less"


def _where(grant: Grant) -> str:
    if grant.scope is Scope.CHANNEL and grant.scope_value and CHANNEL_ID.match(grant.scope_value):
        return f"in <#{grant.scope_value}>"
    return "for everyone"


def _how_long(days: int | None) -> str:
    return f"for {days} days" if days else "until revoked"


def offer_blocks(offer: Offer, *, grant_days: int | None, home: bool) -> list[dict[str, Any]]:
    """One suggestion: what people decided, what accepting adds, and its buttons (3 blocks)."""
    s = offer.suggestion
    evidence = {"type": "section", "text": plain(f"💡 {s.text()}", limit=3000)}
    grant = offer.grant
    if grant.effect == DENY:
        adds = [plain(f"Accept adds a deny: {grant.describe()}", limit=1900),
                {"type": "mrkdwn", "text": f"{_where(grant)} · {_how_long(grant_days)} · tier {offer.tier.value} · "
                                           "matching requests are rejected without asking, at every tier"}]
    else:
        adds = [plain(f"Accept adds a grant: {grant.describe()}", limit=1900),
                {"type": "mrkdwn", "text": f"{_where(grant)} · {_how_long(grant_days)} · tier {offer.tier.value} · "
                                           "never at the critical tier, deny rules still win"}]
    what: dict[str, Any] = {"type": "context", "elements": adds}
    buttons: list[dict[str, Any]] = []
    if len(s.key) <= VALUE_MAX:
        buttons.append({"type": "button", "action_id": ACCEPT, "text": plain("Accept"), "value": s.key,
                        "style": "danger" if grant.effect == DENY else "primary"})
        buttons.append({"type": "button", "action_id": DISMISS, "value": s.key,
                        "text": plain("Dismiss" if home else "Dismiss for me")})
    blocks = [evidence, what]
    if buttons:
        blocks.append({"type": "actions", "block_id": f"history:{s.key_hash[:32]}", "elements": buttons})
    return blocks


def home_blocks(offers: list[Offer], *, grant_days: int | None) -> list[dict[str, Any]]:
    """App Home's section (nothing when there is nothing to suggest)."""
    if not offers:
        return []
    blocks: list[dict[str, Any]] = [
        {"type": "divider"},
        {"type": "header", "text": plain(HOME_TITLE)},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "From what people decided: accepting is your "
                                          "decision, recorded with your name; Dismiss hides one for you."}]},
    ]
    for offer in offers:
        blocks += offer_blocks(offer, grant_days=grant_days, home=True)
    return blocks


def digest_blocks(offers: list[Offer], *, grant_days: int | None) -> list[dict[str, Any]]:
    """The weekly digest's part (approvers of the tool's tier may accept; anyone else is told why not)."""
    if not offers:
        return []
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": (
        f"*{HOME_TITLE}*: from this channel's decisions (approvers of each tool's tier may accept)")}}]
    for offer in offers:
        blocks += offer_blocks(offer, grant_days=grant_days, home=False)
    return blocks


def accepted_text(grant: Grant, made: bool, user: str, grant_days: int | None) -> str:
    line = (f"grant `{grant.id}`: {escape_mrkdwn(clip(one_line(grant.describe()), 400)).replace('`', 'ˋ')}, {_where(grant)}, "
            f"{_how_long(grant_days) if made else 'as made'}")
    if made and grant.effect == DENY:
        return (f"Accepted, as {line}. Matching requests are rejected without asking, at every tier. See or revoke "
                "it with `/signoff grants` or on the Home tab.")
    if made:
        return (f"Accepted, as {line}. Matching requests are approved without asking (never at the critical tier; "
                "deny rules still win). See or revoke it with `/signoff grants` or on the Home tab.")
    who = "You had" if grant.created_by == user else f"<@{grant.created_by}> had"
    return f"{who} already accepted this suggestion, as {line}. Nothing more was changed."
