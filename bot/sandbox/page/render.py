"""The sandbox page's HTML, rendered on the server from the emulator's state for one person.

``pane()`` is what the script swaps in on every change: the channel (or App Home), the open thread and
the modal on top. Only messages and ephemeral messages that person could see in Slack are shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.sandbox.page import mrkdwn
from bot.sandbox.page.actions import Modals
from bot.sandbox.page.blockkit import Ctx, blocks_html, plain, text_html
from bot.sandbox.page.mrkdwn import esc
from bot.sandbox.server import SlackEmulator
from bot.sandbox.state import Message, ts_key


@dataclass(frozen=True)
class Where:
    """What the person looks at: who they are, which channel or Home, which thread."""

    user: str
    channel: str
    thread: str | None = None
    home: bool = False


def ctx_for(slack: SlackEmulator) -> Ctx:
    def names(ident: str) -> str:
        if ident in slack.users:
            return str(slack.users[ident]["name"])
        if ident in slack.usergroups:
            return str(slack.usergroups[ident]["handle"])
        if ident in slack.channels:
            return str(slack.channels[ident]["name"])
        return ident

    people = [(uid, str(u["name"])) for uid, u in slack.users.items() if not u.get("is_bot")]
    return Ctx(names, people)


def _time(ts: str) -> str:
    return datetime.fromtimestamp(ts_key(ts)[0], UTC).strftime("%H:%M")


def _author(slack: SlackEmulator, user: str) -> str:
    info = slack.users.get(user) or {}
    name = esc(str(info.get("real_name") or info.get("name") or user))
    badge = ' <span class="app">APP</span>' if info.get("is_bot") else ""
    return f'<span class="who">{name}</span>{badge}'


def message_html(slack: SlackEmulator, msg: Message, ctx: Ctx, *, in_thread: bool) -> str:
    body = blocks_html(msg.blocks, ctx) if msg.blocks else f'<div class="text">{mrkdwn.render(msg.text, ctx.names)}</div>'
    for att in msg.attachments or []:
        color = esc(str(att.get("color", "#ddd")))
        inner = blocks_html(att.get("blocks") or [], ctx) or mrkdwn.render(str(att.get("text", "")), ctx.names)
        body += f'<div class="attachment" style="border-color:{color if color.startswith("#") else "#ddd"}">{inner}</div>'
    edited = ' <span class="edited">(edited)</span>' if msg.update_count else ""
    replies = slack.channel_messages(msg.channel, thread_ts=msg.ts) if msg.thread_ts is None else []
    link = ""
    if replies and not in_thread:
        n = len(replies)
        link = (f'<button type="button" class="thread-link" data-open-thread="{esc(msg.ts)}">'
                f'{n} repl{"y" if n == 1 else "ies"}</button>')
    elif not in_thread and msg.thread_ts is None:
        link = f'<button type="button" class="thread-link quiet" data-open-thread="{esc(msg.ts)}">Reply in thread</button>'
    return (f'<article class="msg" data-channel="{esc(msg.channel)}" data-ts="{esc(msg.ts)}">'
            f'<header>{_author(slack, msg.user)} <span class="ts">{_time(msg.ts)}</span>{edited}</header>'
            f'<div class="body">{body}</div>{link}</article>')


SWITCH_HINT = ("In this sandbox, be someone else: pick another person under “You are” at the top of the page "
               "(Alice approves, Morgan is her manager).")


def ephemeral_html(slack: SlackEmulator, eph: dict[str, Any], ctx: Ctx) -> str:
    body = blocks_html(eph.get("blocks") or [], ctx) or mrkdwn.render(str(eph.get("text", "")), ctx.names)
    if "separation of duties" in str(eph.get("text", "")) + str(eph.get("blocks", "")):  # bot.domain.duties' refusal
        body += f'<p class="hint switch-person">{esc(SWITCH_HINT)}</p>'
    return (f'<article class="msg ephemeral" data-ts="{esc(str(eph.get("ts", "")))}">'
            f'<header>{_author(slack, slack.bot_user_id)} <span class="ts">{_time(str(eph.get("ts", "0")))}</span> '
            f'<span class="only-you">Only visible to you</span></header><div class="body">{body}</div></article>')


def _timeline(slack: SlackEmulator, where: Where, ctx: Ctx, messages: list[Message], thread: str | None) -> str:
    items: list[tuple[tuple[int, int], str]] = [
        (ts_key(m.ts), message_html(slack, m, ctx, in_thread=thread is not None)) for m in messages]
    for eph in slack.ephemerals:
        if eph.get("user") == where.user and eph.get("channel") == where.channel and (eph.get("thread_ts") or None) == thread:
            items.append((ts_key(str(eph.get("ts", "0"))), ephemeral_html(slack, eph, ctx)))
    items.sort(key=lambda item: item[0])
    return "".join(html for _, html in items) or '<p class="empty">No messages yet.</p>'


def pane(slack: SlackEmulator, modals: Modals, where: Where) -> dict[str, str]:
    """``{"main", "modal", "modal_key", "title"}`` for one person's view of the workspace."""
    modals.sync(slack)
    ctx = ctx_for(slack)
    if where.home:
        home = slack.home_views.get(where.user)
        inner = (f'<div class="home" data-view="{esc(home["id"])}">{blocks_html(home["blocks"], ctx)}</div>' if home
                 else '<p class="empty">Signoff has not published a Home tab for you yet.</p>')
        main, title = inner, "Home"
    else:
        name = ctx.names(where.channel)
        title = f"#{name}" if where.channel.startswith(("C", "G")) else f"DM · {name}"
        main = f'<section class="channel">{_timeline(slack, where, ctx, slack.channel_messages(where.channel), None)}</section>'
        parent = slack.messages.get((where.channel, where.thread)) if where.thread else None
        if parent is not None:
            replies = [parent, *slack.channel_messages(where.channel, thread_ts=parent.ts)]
            main += (f'<section class="thread" data-thread="{esc(parent.ts)}"><header class="thread-head">Thread '
                     f'<button type="button" class="close-thread" aria-label="Close thread">×</button></header>'
                     f'{_timeline(slack, where, ctx, replies, parent.ts)}</section>')
    modal, key = _modal(slack, modals, where.user, ctx)
    return {"main": main, "modal": modal, "modal_key": key, "title": title}


def _modal(slack: SlackEmulator, modals: Modals, user: str, ctx: Ctx) -> tuple[str, str]:
    view_id = modals.top(user)
    view = slack.views.get(view_id) if view_id else None
    if view is None:
        return "", ""
    errors = modals.errors.get(view["id"], {})
    submit = (f'<button type="submit" class="btn primary">{plain(view["submit"])}</button>'
              if view.get("submit") else "")
    close = plain(view.get("close")) if view.get("close") else "Cancel"
    html = (f'<form class="modal" data-view="{esc(view["id"])}" role="dialog" aria-modal="true">'
            f'<header>{text_html(view.get("title"), ctx)}</header>'
            f'<div class="modal-body">{blocks_html(view["blocks"], ctx, errors)}</div>'
            f'<footer><button type="button" class="btn close-modal">{close}</button>{submit}</footer></form>')
    return html, f'{view["id"]}:{view["hash"]}:{len(errors)}:{sorted(errors.items())}'


def nav(slack: SlackEmulator, where: Where) -> str:
    """The channel list: channels the person is in (or that are public), their DM with the app, Home."""
    links = []
    for cid, info in slack.channels.items():
        if info.get("private") and where.user not in info.get("members", []):
            continue
        links.append((cid, f"# {info['name']}"))
    links.append(("D" + where.user, "Signoff (DM)"))
    out = [f'<button type="button" class="nav{" on" if where.home else ""}" data-home="1">Home</button>']
    for cid, label in links:
        on = " on" if cid == where.channel and not where.home else ""
        out.append(f'<button type="button" class="nav{on}" data-channel="{esc(cid)}">{esc(label)}</button>')
    return "".join(out)
