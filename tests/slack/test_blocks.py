"""The approval card and reject modal as data: valid Block Kit, inside Slack's limits, safe."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from bot.domain.model import Action, Actor, Change, Decision, Kind, Outcome, Preview, Request, Risk, Status, Via
from bot.slack import blocks as bk
from bot.slack.blocks import (
    APPROVE,
    EDIT,
    REJECT,
    REJECT_VIEW,
    approval_card,
    escape_mrkdwn,
    parse_reject_submission,
    reject_modal,
    text_length,
)
from bot.slack.previews import TEXT_ELEMENT_MAX, safe_markdown

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
EVIL = "<!channel> <@U123> <https://evil|Approve> <!subteam^S1> & <#C9>"
TOKENS = ("<!channel>", "<@U123>", "<https://evil", "<!subteam", "<#C9>")


def make_request(**changes: Any) -> Request:
    base: dict[str, Any] = {
        "id": "req_42",
        "kind": Kind.APPROVAL,
        "status": Status.PENDING,
        "action": Action("send_email", {"to": "bob@example.com", "amount": 30, "notify": True}),
        "summary": "Refund order #1234",
        "risk": Risk.HIGH,
        "channel": "C1",
        "created_at": NOW - timedelta(minutes=7),
        "updated_at": NOW,
        "requested_by": "billing-agent",
        "context": "The customer was charged twice.",
    }
    base.update(changes)
    return Request(**base)


def assert_valid_message(message: dict[str, Any]) -> None:
    """Valid for slack_sdk, plus the limits it does not check (SLACK_FACTS section 2)."""
    assert message["text"]
    blocks = message["blocks"]
    assert 1 <= len(blocks) <= 50
    for block in blocks:
        parsed = Block.parse(block)
        assert parsed is not None
        assert parsed.to_dict() == block  # validates recursively; equality: nothing was dropped
        for field in block.get("fields", []):
            assert len(field["text"]) <= 2000
        if block["type"] == "section" and "text" in block:
            assert len(block["text"]["text"]) <= 3000
        for element in rich_text_elements(block):
            assert 1 <= len(element["text"]) <= TEXT_ELEMENT_MAX  # Slack documents no limit; ours
    assert text_length(blocks) <= bk.TOTAL_TEXT_BUDGET


def rich_text_elements(node: Any) -> list[dict[str, Any]]:
    """Every rich_text `text` element under `node`."""
    if isinstance(node, list):
        return [e for item in node for e in rich_text_elements(item)]
    if not isinstance(node, dict):
        return []
    own = [node] if node.get("type") == "text" else []
    return own + rich_text_elements(node.get("elements", []))


def all_text(message: dict[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False)


def block_types(message: dict[str, Any]) -> list[str]:
    return [b["type"] for b in message["blocks"]]


# --------------------------------------------------------------------------- pending card


def test_pending_card_shows_request_and_buttons() -> None:
    card = approval_card(make_request(), now=NOW)
    assert_valid_message(card)
    assert card["text"] == "Approval needed: Refund order #1234"
    header = {"type": "header", "text": {"type": "plain_text", "text": "Refund order #1234", "emoji": False}}
    assert card["blocks"][0] == header
    context = card["blocks"][1]["elements"]
    assert context[0]["text"] == "🤖 billing-agent"
    assert context[1]["text"] == "🟠 *high* risk"
    unix = int((NOW - timedelta(minutes=7)).timestamp())
    assert context[2]["text"] == f"requested <!date^{unix}^{{ago}}|2025-03-01T11:53:00Z>"
    assert context[3]["text"] == "`send_email`"
    actions = card["blocks"][-1]
    assert actions["block_id"] == "decide"
    assert [(b["action_id"], b["text"]["text"], b.get("style"), b["value"]) for b in actions["elements"]] == [
        (APPROVE, "Approve", "primary", "req_42"),
        (EDIT, "Edit", None, "req_42"),
        (REJECT, "Reject", "danger", "req_42"),
    ]
    text = all_text(card)
    assert "to" in text and "bob@example.com" in text and ": 30" in text and ": true" in text
    assert "The customer was charged twice." in text


@pytest.mark.parametrize(
    ("risk", "emoji"), [(Risk.LOW, "🟢"), (Risk.MEDIUM, "🟡"), (Risk.HIGH, "🟠"), (Risk.CRITICAL, "🔴")]
)
def test_risk_emoji(risk: Risk, emoji: str) -> None:
    card = approval_card(make_request(risk=risk), now=NOW)
    assert card["blocks"][1]["elements"][1]["text"].startswith(emoji)


def test_no_edit_button_without_params_and_anonymous_requester() -> None:
    card = approval_card(make_request(action=Action("restart", {}), requested_by=None, context=None), now=NOW)
    assert_valid_message(card)
    assert [b["action_id"] for b in card["blocks"][-1]["elements"]] == [APPROVE, REJECT]
    assert card["blocks"][1]["elements"][0]["text"] == "🤖 an agent"


def test_notes_are_our_own_mrkdwn() -> None:
    card = approval_card(make_request(), now=NOW, notes=["Escalated to <@U1> (level 2 of 3)"])
    assert_valid_message(card)
    assert {"type": "mrkdwn", "text": "Escalated to <@U1> (level 2 of 3)"} in card["blocks"][2]["elements"]


# --------------------------------------------------------------------------- previews


def preview_card(kind: str, data: dict[str, Any], **changes: Any) -> dict[str, Any]:
    card = approval_card(make_request(preview=Preview(kind, data), **changes), now=NOW)
    assert_valid_message(card)
    return card


def test_email_preview_small() -> None:
    email = {
        "to": ["bob@example.com", "eve@example.com"],
        "cc": "ann@example.com",
        "subject": "Your refund",
        "body": "Hi Bob,\nDone.",
    }
    card = preview_card("email", email)
    text = all_text(card)
    assert '"To: "' in text and "bob@example.com, eve@example.com" in text
    assert '"Cc: "' in text and "ann@example.com" in text
    assert '"Subject: "' in text and "Your refund" in text
    quote = {"type": "rich_text_quote", "elements": [{"type": "text", "text": "Hi Bob,\nDone."}]}
    assert quote in card["blocks"][2]["elements"]


def test_email_preview_huge_body() -> None:
    body = "\n".join(f"line {i} of a very long email" for i in range(5000))
    card = preview_card("email", {"to": "bob@example.com", "subject": "s", "body": body})
    assert "more lines" in all_text(card)


def test_diff_preview_from_before_and_after() -> None:
    card = preview_card("diff", {"path": "app/config.yml", "before": "a: 1\nb: 2\n", "after": "a: 1\nb: 3\n"})
    text = all_text(card)
    assert "app/config.yml" in text and "+1 −1" in text
    assert "-b: 2" in text and "+b: 3" in text


def test_diff_preview_huge_unified() -> None:
    unified = "--- a/x\n+++ b/x\n@@ -1,10000 +1,10000 @@\n" + "\n".join(f"+added line {i}" for i in range(10_000))
    card = preview_card("diff", {"unified": unified})
    text = all_text(card)
    assert "+10000 −0" in text
    assert "more lines" in text and "+added line 0" in text and "+added line 9999" not in text


def test_table_preview_small_is_aligned() -> None:
    data = {"columns": ["id", "name"], "rows": [[1, "Alice"], {"id": 22, "name": "Bob"}]}
    card = preview_card("table", data)
    pre = next(e for e in card["blocks"][2]["elements"] if e["type"] == "rich_text_preformatted")
    assert pre["elements"][0]["text"] == "id | name\n---+------\n1  | Alice\n22 | Bob"


def test_table_preview_huge() -> None:
    rows = [[i, f"user{i}@example.com", i * 3.5] for i in range(5000)]
    card = preview_card("table", {"columns": ["id", "email", "score"], "rows": rows})
    text = all_text(card)
    assert "5,000 rows × 3 columns" in text and "more rows" in text


def test_markdown_preview_small_neutralises_links() -> None:
    text = "# Plan\nSee [the dashboard](https://evil.example/x) and <b>bold</b> & co."
    card = preview_card("markdown", {"text": text})
    md = card["blocks"][2]
    assert md["type"] == "markdown"
    assert md["text"] == "# Plan\nSee the dashboard (https://evil.example/x) and &lt;b&gt;bold&lt;/b&gt; &amp; co."


def test_markdown_rewrites_images_references_and_nested_links() -> None:
    text = "[![logo](https://img/x.png)](https://evil/y)\n[Approve][1]\n\n[1]: https://evil/z\n[odd] (x)"
    out = safe_markdown(text)
    assert "](" not in out and "]:" not in out
    for url in ("https://img/x.png", "https://evil/y", "https://evil/z"):
        assert url in out


def test_markdown_preview_huge() -> None:
    text = "\n\n".join(f"Paragraph {i}: " + "lorem ipsum " * 40 for i in range(110))  # ~50 KB
    assert len(text) > 50_000
    card = preview_card("markdown", {"text": text})
    md = next(b for b in card["blocks"] if b["type"] == "markdown")
    assert len(md["text"]) <= 12_000 and "more characters" in md["text"]


def test_json_preview_small_and_huge() -> None:
    card = preview_card("json", {"value": {"b": 1, "a": [1, 2]}})
    pre = card["blocks"][2]["elements"][0]
    assert pre["type"] == "rich_text_preformatted"
    assert pre["elements"][0]["text"] == '{\n  "b": 1,\n  "a": [\n    1,\n    2\n  ]\n}'  # key order kept
    huge = preview_card("json", {"value": [{"id": i, "tags": ["x", "y"]} for i in range(3000)]})
    assert "more lines" in all_text(huge)


def test_unknown_preview_kind_is_shown_as_json() -> None:
    card = preview_card("weird", {"k": "v"})
    assert '\\"k\\": \\"v\\"' in all_text(card)


# --------------------------------------------------------------------------- sizes


def test_huge_summary_is_cut_in_the_header_and_shown_below() -> None:
    summary = "word " * 1000
    card = approval_card(make_request(summary=summary), now=NOW)
    assert_valid_message(card)
    assert len(card["blocks"][0]["text"]["text"]) == 150 and card["blocks"][0]["text"]["text"].endswith("…")
    assert "more characters" in all_text(card)
    assert len(card["text"]) < 400


def test_hundred_params() -> None:
    params = {f"param_{i}": "v" * 500 for i in range(100)}
    card = approval_card(make_request(action=Action("bulk", params)), now=NOW)
    assert_valid_message(card)
    assert "more parameters" in all_text(card) and "more characters" in all_text(card)


def test_everything_huge_at_once_stays_within_budget() -> None:
    decision = Decision(
        Outcome.APPROVED,
        {},
        tuple(Change(f"f{i}", "a" * 1000, "b" * 1000) for i in range(40)),
        "c" * 5000,
        Actor("U1"),
        NOW,
        Via.MODAL,
    )
    req = make_request(
        summary="s" * 5000,
        context="r" * 20_000,
        action=Action("bulk", {f"p{i}": "v" * 3000 for i in range(100)}),
        preview=Preview("diff", {"unified": "\n".join("+x" * 200 for _ in range(10_000))}),
        status=Status.APPROVED,
        decision=decision,
    )
    card = approval_card(req, now=NOW, notes=["n" * 3000] * 12)
    assert_valid_message(card)
    text = all_text(card)
    for marker in ("more characters", "more lines", "more parameters", "more changes"):
        assert marker in text


# --------------------------------------------------------------------------- untrusted text


def test_malicious_agent_text_never_becomes_a_token() -> None:
    req = make_request(
        summary=EVIL,
        context=EVIL,
        requested_by=EVIL,
        action=Action(EVIL, {EVIL: EVIL, "n": [EVIL]}),
        preview=Preview("email", {"to": EVIL, "cc": [EVIL], "subject": EVIL, "body": EVIL}),
    )
    cards = [approval_card(req, now=NOW)]
    for kind, data in (
        ("diff", {"path": EVIL, "before": EVIL, "after": "x"}),
        ("table", {"columns": [EVIL], "rows": [[EVIL], {EVIL: EVIL}]}),
        ("markdown", {"text": EVIL + " [Approve](https://evil)"}),
        ("json", {"value": {EVIL: EVIL}}),
    ):
        cards.append(approval_card(req.evolve(preview=Preview(kind, data)), now=NOW))
    changes = (Change(EVIL, EVIL, EVIL),)
    rejected = Decision(Outcome.REJECTED, {}, changes, EVIL, Actor("api-client", EVIL), NOW, Via.API)
    cards.append(approval_card(req.evolve(status=Status.REJECTED, decision=rejected), now=NOW))
    cards.append(reject_modal(req))
    for card in cards:
        dumped = all_text(card)
        for token in TOKENS:
            assert token not in dumped
    assert cards[0]["text"].startswith("Approval needed: &lt;!channel&gt;")


def test_escape_mrkdwn() -> None:
    assert escape_mrkdwn("a & <b> <!here>") == "a &amp; &lt;b&gt; &lt;!here&gt;"


# --------------------------------------------------------------------------- decided cards


DECIDERS = [
    (Outcome.APPROVED, Status.APPROVED, Actor("U777", "ann"), Via.BUTTON, "✅ *Approved* by <@U777>"),
    (Outcome.REJECTED, Status.REJECTED, Actor("U778"), Via.MODAL, "❌ *Rejected* by <@U778>"),
    (Outcome.EXPIRED, Status.EXPIRED, None, Via.TIMEOUT, "⌛ *Expired* automatically"),
    (Outcome.CANCELLED, Status.CANCELLED, Actor("ops", "Ops pipeline"), Via.API, "🚫 *Cancelled* by Ops pipeline"),
    (Outcome.APPROVED, Status.APPROVED, None, Via.POLICY, "✅ *Approved* by policy"),
]


@pytest.mark.parametrize(("outcome", "status", "actor", "via", "line"), DECIDERS)
def test_decided_card_names_the_decider_and_has_no_buttons(
    outcome: Outcome, status: Status, actor: Actor | None, via: Via, line: str
) -> None:
    decision = Decision(outcome, {}, (), "not now <!here>", actor, NOW, via)
    card = approval_card(make_request(status=status, decision=decision), now=NOW)
    assert_valid_message(card)
    assert "actions" not in block_types(card)
    label = outcome.value.capitalize()
    assert card["text"] == f"{label}: Refund order #1234"
    section = next(b for b in card["blocks"] if b["type"] == "section")["text"]["text"]
    assert section.startswith(line)
    assert f"<!date^{int(NOW.timestamp())}^" in section
    assert "not now <\u200b!here>" in all_text(card)


def test_approved_with_edits_lists_the_changes() -> None:
    changes = (Change("amount", 30, 25), Change("note", None, "partial"))
    decision = Decision(Outcome.APPROVED, {"amount": 25}, changes, None, Actor("U1"), NOW, Via.MODAL)
    card = approval_card(make_request(status=Status.APPROVED, decision=decision), now=NOW)
    assert_valid_message(card)
    section = next(b for b in card["blocks"] if b["type"] == "section")["text"]["text"]
    assert section.endswith(" · with edits")
    text = all_text(card)
    assert ": 30 → 25" in text and ": (none) → partial" in text


def test_final_status_without_decision_still_hides_buttons() -> None:
    card = approval_card(make_request(status=Status.EXPIRED), now=NOW)
    assert_valid_message(card)
    assert "actions" not in block_types(card) and card["text"].startswith("Expired: ")


# --------------------------------------------------------------------------- reject modal


def test_reject_modal() -> None:
    view = reject_modal(make_request(version=4))
    assert View(**view).to_dict() == view
    assert view["callback_id"] == REJECT_VIEW
    labels = (view["title"]["text"], view["submit"]["text"], view["close"]["text"])
    assert labels == ("Reject request", "Reject", "Cancel")
    assert json.loads(view["private_metadata"]) == {"request_id": "req_42", "version": 4}
    reason = view["blocks"][-1]
    assert reason["block_id"] == "reason" and reason["optional"] is True
    element = reason["element"]
    assert element["action_id"] == "value" and element["max_length"] == 2000 and element["multiline"]


@pytest.mark.parametrize(("value", "expected"), [("  too risky \n", "too risky"), ("   ", None), (None, None)])
def test_parse_reject_submission(value: str | None, expected: str | None) -> None:
    assert parse_reject_submission({"reason": {"value": {"type": "plain_text_input", "value": value}}}) == expected
    assert parse_reject_submission({}) is None
