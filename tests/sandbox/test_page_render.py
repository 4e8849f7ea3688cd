"""The sandbox page renders the bot's Block Kit and mrkdwn as HTML, and never agent text as markup;
what a form holds becomes Slack's ``state.values``."""

from __future__ import annotations

from bot.sandbox.page import mrkdwn
from bot.sandbox.page.blockkit import Ctx, blocks_html
from bot.sandbox.page.state_values import state_values

NAMES = {"U1": "alice", "S1": "ops", "C1": "approvals"}
CTX = Ctx(lambda i: NAMES.get(i, i), [("U1", "alice"), ("U2", "bob")])


def test_mrkdwn_basics() -> None:
    html = mrkdwn.render("*bold* _it_ ~gone~ `co*de*` <https://e.x/a?b=1&amp;c=2|a link> <@U1> <!subteam^S1> "
                         "<#C1> <!here> <!date^0^{date_num} {time}|then>\n&gt; quoted\n```\n*raw*\n```", CTX.names)
    assert "<strong>bold</strong>" in html and "<em>it</em>" in html and "<del>gone</del>" in html
    assert "<code>co*de*</code>" in html
    assert '<a href="https://e.x/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer">a link</a>' in html
    assert html.count('class="mention"') == 4 and "@alice" in html and "@ops" in html and "#approvals" in html
    assert "<time>1970-01-01 00:00</time>" in html
    assert "<blockquote>quoted</blockquote>" in html and "<pre>*raw*</pre>" in html


def test_agent_text_never_becomes_markup() -> None:
    html = mrkdwn.render("&lt;script&gt;alert(1)&lt;/script&gt; <javascript:alert(1)|click> \"x\" <img src=x>",
                         CTX.names)
    assert "<script" not in html and "<img" not in html and "href" not in html
    assert "&lt;script&gt;" in html and "&quot;x&quot;" in html
    blocks = [{"type": "section", "text": {"type": "plain_text", "text": "<b onmouseover=x>hi</b>"}},
              {"type": "rich_text", "elements": [{"type": "rich_text_section", "elements": [
                  {"type": "link", "url": "javascript:alert(1)", "text": "<i>x</i>"}]}]}]
    out = blocks_html(blocks, CTX)
    assert "<b " not in out and "<i>" not in out and "javascript:" not in out


def test_every_block_the_bot_uses_renders() -> None:
    button = {"type": "button", "action_id": "go", "value": "r1", "style": "primary",
              "text": {"type": "plain_text", "text": "Approve"}}
    option = {"text": {"type": "plain_text", "text": "One"}, "value": "1"}
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": "Title"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "*x*"},
         "fields": [{"type": "mrkdwn", "text": "a"}, {"type": "plain_text", "text": "b"}]},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "ctx"}]},
        {"type": "divider"},
        {"type": "actions", "block_id": "decide", "elements": [button, {**button, "style": "danger"}]},
        {"type": "input", "block_id": "p1", "label": {"type": "plain_text", "text": "Subject"},
         "element": {"type": "plain_text_input", "action_id": "v", "initial_value": "hello", "multiline": True}},
        {"type": "input", "block_id": "p2", "label": {"type": "plain_text", "text": "N"}, "optional": True,
         "element": {"type": "number_input", "action_id": "v", "is_decimal_allowed": False}},
        {"type": "input", "block_id": "p3", "label": {"type": "plain_text", "text": "Pick"},
         "element": {"type": "static_select", "action_id": "v", "options": [option], "initial_option": option}},
        {"type": "input", "block_id": "p4", "label": {"type": "plain_text", "text": "Flags"},
         "element": {"type": "checkboxes", "action_id": "v", "options": [option]}},
        {"type": "input", "block_id": "p5", "label": {"type": "plain_text", "text": "Who"},
         "element": {"type": "users_select", "action_id": "v"}},
        {"type": "markdown", "text": "**md**"},
    ]
    html = blocks_html(blocks, CTX, {"p1": "too long"})
    for expected in ('class="blk header">Title', 'class="btn primary"', 'class="btn danger"', "<textarea",
                     'type="number"', "<select", 'type="checkbox"', '<option value="U2">bob</option>', "too long",
                     "(optional)", 'data-action="go"', 'data-block="decide"', 'data-value="r1"'):
        assert expected in html, expected
    assert "unknown" not in html


def test_state_values_rebuild_slacks_shapes() -> None:
    option = {"text": {"type": "mrkdwn", "text": "*One*"}, "value": "1"}
    blocks = [
        {"type": "input", "block_id": "a", "element": {"type": "plain_text_input", "action_id": "v"}},
        {"type": "input", "block_id": "b", "element": {"type": "checkboxes", "action_id": "v", "options": [option]}},
        {"type": "input", "block_id": "c", "element": {"type": "static_select", "action_id": "v", "options": [option]}},
        {"type": "input", "block_id": "d", "element": {"type": "users_select", "action_id": "v"}},
        {"type": "actions", "block_id": "e", "elements": [{"type": "button", "action_id": "go"}]},
    ]
    values = state_values(blocks, {"a": {"v": "hi"}, "b": {"v": ["1"]}, "c": {"v": ""}, "d": {"v": "U2"}})
    assert values == {
        "a": {"v": {"type": "plain_text_input", "value": "hi"}},
        "b": {"v": {"type": "checkboxes", "selected_options": [option]}},
        "c": {"v": {"type": "static_select", "selected_option": None}},
        "d": {"v": {"type": "users_select", "selected_user": "U2"}},
    }
