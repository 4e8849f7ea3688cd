"""bot.slack.form.parse_body reads every body exactly as Bolt's parse_body does, fast path or not."""

from __future__ import annotations

import pytest

import json
import urllib.parse

from hypothesis import example, given, settings
from hypothesis import strategies as st
from slack_bolt.request.internals import parse_body as bolt_parse_body

from bot.slack import form

FORM = "application/x-www-form-urlencoded"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
payloads = st.dictionaries(st.text(), json_values, max_size=5)
quoting = st.sampled_from([
    lambda s: urllib.parse.quote(s, safe=""),
    lambda s: urllib.parse.quote_plus(s, safe=""),
    lambda s: urllib.parse.quote(s, safe="{}:,\"[]="),  # unescaped JSON punctuation, a literal "="
    lambda s: urllib.parse.quote_plus(s, safe="{}:,\"[]=%"),  # a literal "%": not always an escape
    lambda s: urllib.parse.quote(s, safe="").lower(),  # lower-case hex escapes
    lambda s: urllib.parse.quote(s, safe="", encoding="latin-1", errors="replace"),  # not UTF-8
])


@settings(max_examples=400, deadline=None)
@pytest.mark.property
@given(payloads, quoting, st.booleans())
def test_same_as_bolt(payload: dict, quote, ensure_ascii: bool) -> None:
    raw = "payload=" + quote(json.dumps(payload, ensure_ascii=ensure_ascii))
    try:
        expected = bolt_parse_body(raw, FORM)
    except ValueError:
        expected = ValueError
    try:
        got = form.parse_body(raw, FORM)
    except ValueError:
        got = ValueError
    assert got == expected


@settings(max_examples=200, deadline=None)
@pytest.mark.property
@given(st.text(max_size=60))
@example("NaN")  # both read a float NaN, which equals nothing, itself included
def test_any_text_same_as_bolt(raw: str) -> None:
    """Whatever a signed body holds (broken escapes, several fields, line breaks, not JSON)."""
    for body in (raw, "payload=" + raw):
        outcomes = []
        for parse in (bolt_parse_body, form.parse_body):
            try:
                outcomes.append(parse(body, FORM))
            except ValueError as exc:
                outcomes.append(type(exc))
        # repr tells NaN from NaN as equal, and everything else as == does (same types, same order)
        assert outcomes[0] == outcomes[1] or repr(outcomes[0]) == repr(outcomes[1]), body


def test_a_card_click_takes_the_fast_path() -> None:
    """The common shape is decoded by the C path (the standard parser is not called at all)."""
    body = {"type": "block_actions", "user": {"id": "U1", "name": "Zoë"},
            "actions": [{"action_id": "signoff_approve", "value": "apr_x"}],
            "message": {"text": "Send 50% & 100% = \"all\" + more <https://x.example/?a=1&b=2>"}}
    raw = "payload=" + urllib.parse.quote_plus(json.dumps(body, ensure_ascii=False))
    assert form._payload(raw[len("payload="):]) == body
    assert form.parse_body(raw, FORM) == bolt_parse_body(raw, FORM) == body


def test_bolt_request_keeps_the_raw_body_for_the_signature_check() -> None:
    raw = "payload=" + urllib.parse.quote(json.dumps({"type": "block_actions", "team": {"id": "T1"},
                                                     "user": {"id": "U1"}}))
    request = form.parsed_request(raw, "", {"content-type": FORM, "x-slack-signature": "v0=abc"})
    assert request.raw_body == raw
    assert request.body["user"] == {"id": "U1"}
    assert request.context.team_id == "T1" and request.context.user_id == "U1"
    assert request.headers["x-slack-signature"] == ["v0=abc"]
