"""Invisible characters an agent sends (bidi overrides, zero-width spaces, other format controls) reach
every card, modal and Home tab as visible markers (`⟨U+202E⟩`), never as themselves."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from bot.sandbox.signed import plain_input
from tests.support.app import App
from tests.approvals.test_home import valid_view
from tests.slack.test_blocks import assert_valid_message

SPOOF = "invoice\u202efdp.exe"  # shows as "invoiceexe.pdf" in a right-to-left override
SHOWN = "invoice⟨U+202E⟩fdp.exe"
SCHEMA = {"type": "object", "properties": {"file": {"type": "string"}, "to": {"type": "string"}}}


def hidden(tree: Any) -> list[str]:
    """Every string in `tree` holding an invisible character (the ZWSP that breaks a `<@` token aside)."""
    found: list[str] = []
    text = json.dumps(tree, ensure_ascii=False)
    for i, char in enumerate(text):
        if unicodedata.category(char) == "Cf" and not (char == "\u200b" and text[i - 1] == "<"):
            found.append(text[max(0, i - 20):i + 20])
    return found


async def submit(app: App) -> dict[str, Any]:
    return await app.submit(
        summary=f"Send {SPOOF} to the customer", context="Checked\u200b\u200b it twice\u2066 (really)\u2069",
        requested_by="billing-agent\u200e", approvers=["U1"],
        action={"name": "send_file", "params": {"file": SPOOF, "to": "a@example.com"}, "params_schema": SCHEMA},
        preview={"kind": "diff", "path": f"docs/{SPOOF}", "before": "pay: no\n", "after": "pay: yes\ufeff\n"})


async def test_the_card_the_modal_and_home_show_markers_and_an_untouched_edit_keeps_the_exact_value(
        app: App) -> None:
    req = await submit(app)
    card = await app.card(req["id"])
    message = {"text": card.text, "blocks": card.blocks}
    assert hidden(message) == []
    shown = json.dumps(message, ensure_ascii=False)
    assert SHOWN in shown and "Checked⟨U+200B×2⟩ it twice⟨U+2066⟩ (really)⟨U+2069⟩" in shown
    assert "billing-agent⟨U+200E⟩" in shown and "pay: yes⟨U+FEFF⟩" in shown and f"docs/{SHOWN}" in shown
    assert_valid_message(message)

    await app.click(req["id"], "U1", action="signoff_edit", user_name="alice")
    [opened] = await app.slack.wait_for("views.open")
    view = opened.args["view"]
    assert hidden(view) == [] and valid_view(view)
    [file_input] = [b["element"] for b in view["blocks"] if b.get("block_id") == "p:file"]
    assert file_input["initial_value"] == SHOWN
    # Submitted as shown: the marker stands for the character, so the value is exactly the agent's.
    resp = await app.slack_client.view_submission(
        user="U1", user_name="alice", callback_id="signoff_edit", private_metadata=view["private_metadata"],
        values={"p:file": {"value": plain_input(SHOWN)}})
    assert resp.status == 200, resp.text
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert body["status"] == "approved" and body["decision"]["params"]["file"] == SPOOF
    assert body["decision"].get("changes") in (None, [])

    await app.slack_client.event({"type": "app_home_opened", "user": "U1", "channel": "DU1", "tab": "home"})
    [published] = await app.slack.wait_for("views.publish")
    assert hidden(published.args["view"]) == []


async def test_deleting_a_marker_in_the_edit_form_removes_the_character(app: App) -> None:
    req = await submit(app)
    await app.click(req["id"], "U1", action="signoff_edit", user_name="alice")
    [opened] = await app.slack.wait_for("views.open")
    resp = await app.slack_client.view_submission(
        user="U1", user_name="alice", callback_id="signoff_edit",
        private_metadata=opened.args["view"]["private_metadata"],
        values={"p:file": {"value": plain_input("invoicefdp.exe")}})
    assert resp.status == 200, resp.text
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert body["decision"]["params"]["file"] == "invoicefdp.exe"
