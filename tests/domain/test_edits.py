"""Parameter edits: schema inference, validation messages, changes, and the edit modal round trip."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from bot.domain.edits import check_schema, compute_changes, effective_schema, validate_params
from bot.domain.model import Action, Change, Kind, Request, Risk, Status
from bot.slack.blocks import EDIT_VIEW, edit_modal, parse_edit_submission

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "subject": {
            "type": "string",
            "title": "Subject line",
            "description": "Shown to the customer",
            "maxLength": 120,
        },
        "body": {"type": "string", "maxLength": 5000},
        "retries": {"type": "integer", "minimum": 0, "maximum": 5},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        "urgent": {"type": "boolean"},
        "tone": {"enum": ["formal", "casual", "pirate"]},
        "headers": {"type": "object"},
        "cc": {"type": "array", "items": {"type": "string"}},
        "note": {"type": "string"},
    },
    "required": ["subject", "body", "retries", "tone"],
    "additionalProperties": False,
}

PARAMS: dict[str, Any] = {
    "subject": "Your refund",
    "body": "Hello,\nyour refund of 30 EUR is on its way.\nRegards",
    "retries": 2,
    "ratio": 0.25,
    "urgent": False,
    "tone": "formal",
    "headers": {"X-Ticket": "T-1"},
    "cc": ["a@example.com"],
}


def make_request(params: dict[str, Any] | None = None, schema: dict[str, Any] | None = SCHEMA) -> Request:
    return Request(
        id="req_edit",
        kind=Kind.APPROVAL,
        status=Status.PENDING,
        action=Action("send_email", dict(PARAMS if params is None else params), schema),
        summary="Send the refund email",
        risk=Risk.HIGH,
        channel="C1",
        created_at=NOW,
        updated_at=NOW,
        version=3,
    )


def assert_valid_view(view: dict[str, Any]) -> None:
    """slack_sdk's checks, plus the input limits it does not check (verified: it accepts them)."""
    assert View(**view).to_dict() == view
    assert len(view["blocks"]) <= 100
    for block in view["blocks"]:
        parsed = Block.parse(block)
        assert parsed is not None
        assert parsed.to_dict() == block  # nothing silently dropped by the SDK
        element = block.get("element", {})
        for option in element.get("options", []):
            assert len(option["value"]) <= 150 and 1 <= len(option["text"]["text"]) <= 75
        if element.get("type") == "checkboxes":
            assert len(element["options"]) <= 10
        if element.get("type") == "plain_text_input":
            assert len(element.get("initial_value", "")) <= element.get("max_length", 3000) <= 3000
            assert element.get("min_length", 0) <= element.get("max_length", 3000)
        if element.get("type") == "number_input" and "min_value" in element and "max_value" in element:
            assert float(element["min_value"]) <= float(element["max_value"])


def unchanged_state(view: dict[str, Any]) -> dict[str, Any]:
    """What Slack sends back in `view.state.values` when the person changes nothing."""
    values: dict[str, Any] = {}
    for block in view["blocks"]:
        if block["type"] != "input":
            continue
        el = block["element"]
        kind = el["type"]
        if kind in ("plain_text_input", "number_input"):
            state = {"type": kind, "value": el.get("initial_value")}
        elif kind == "checkboxes":
            state = {"type": kind, "selected_options": el.get("initial_options", [])}
        else:
            state = {"type": kind, "selected_option": el.get("initial_option")}
        values[block["block_id"]] = {el["action_id"]: state}
    return values


def inputs(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}


# --------------------------------------------------------------------------- schema


def test_inferred_schema_types_each_param_and_requires_all() -> None:
    action = Action("t", {"s": "x", "flag": True, "n": 3, "f": 1.5, "none": None, "l": [1], "d": {"a": 1}})
    schema = effective_schema(action)
    assert schema["properties"] == {
        "s": {"type": "string"},
        "flag": {"type": "boolean"},  # not integer, although bool is an int in Python
        "n": {"type": "integer"},
        "f": {"type": "number"},
        "none": {},
        "l": {"type": "array"},
        "d": {"type": "object"},
    }
    assert schema["required"] == ["s", "flag", "n", "f", "none", "l", "d"]
    assert check_schema(schema) is None


def test_given_schema_is_used_as_is() -> None:
    assert effective_schema(Action("t", {}, SCHEMA)) is SCHEMA


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"type": "strng"}, "not valid JSON Schema"),
        ({"type": "object", "properties": {"a": {"minimum": "zero"}}}, "not valid JSON Schema"),
        ({"type": "string"}, "must describe an object"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_check_schema_rejects_bad_schemas(schema: Any, fragment: str) -> None:
    problem = check_schema(schema)
    assert problem is not None and fragment in problem


def test_check_schema_accepts_a_good_schema() -> None:
    assert check_schema(SCHEMA) is None


# --------------------------------------------------------------------------- validation


def test_validate_params_gives_one_short_message_per_field() -> None:
    bad = {**PARAMS, "retries": 9, "tone": "shouty", "ratio": "high", "extra": 1}
    del bad["subject"]
    assert validate_params(SCHEMA, bad) == {
        "retries": "must be at most 5",
        "tone": "must be one of: formal, casual, pirate",
        "ratio": "must be a number",
        "subject": "is required",
        "extra": "is not an allowed field",
    }


def test_validate_params_type_and_nested_messages() -> None:
    cfg = {"type": "object", "properties": {"depth": {"maximum": 3}}}
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "cfg": cfg}}
    errors = validate_params(schema, {"n": 1.5, "cfg": {"depth": 4}})
    assert errors == {"n": "must be an integer", "cfg": "depth must be at most 3"}
    assert validate_params(schema, {"n": 1}) == {}


def test_validate_params_reports_a_bad_schema_at_the_root() -> None:
    assert list(validate_params({"type": 12}, {})) == [""]


def test_remote_refs_are_an_error_not_a_download() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.invalid/schema.json"}}}
    errors = validate_params(schema, {"a": 1})
    assert "" in errors and "refers to" in errors[""]


# --------------------------------------------------------------------------- changes


def test_compute_changes_lists_exactly_the_changed_fields_in_order() -> None:
    before = {"a": 1, "b": "x", "c": [1, 2], "d": True, "e": 1.0}
    after = {"e": 1, "b": "y", "c": [1, 2], "d": 1, "f": "new"}
    assert compute_changes(before, after) == (
        Change("a", 1, None),  # removed
        Change("b", "x", "y"),
        Change("d", True, 1),  # a flag that became a number is a change
        Change("f", None, "new"),  # added
    )
    assert compute_changes(PARAMS, dict(PARAMS)) == ()


# --------------------------------------------------------------------------- edit modal


def test_edit_modal_has_one_fitting_input_per_property() -> None:
    view = edit_modal(make_request())
    assert_valid_view(view)
    assert view["callback_id"] == EDIT_VIEW
    assert view["title"]["text"] == "Edit and approve" and view["submit"]["text"] == "Approve"
    assert json.loads(view["private_metadata"]) == {"request_id": "req_edit", "version": 3}
    blocks = inputs(view)
    assert list(blocks) == [f"p:{name}" for name in SCHEMA["properties"]]

    subject = blocks["p:subject"]
    assert subject["label"]["text"] == "Subject line" and subject["hint"]["text"] == "Shown to the customer"
    assert subject["element"] == {
        "type": "plain_text_input",
        "action_id": "value",
        "multiline": False,
        "initial_value": "Your refund",
        "max_length": 120,
    }
    assert subject["optional"] is False
    body = blocks["p:body"]["element"]
    assert body["multiline"] is True and "max_length" not in body  # 5000 is more than Slack's 3000
    retries = blocks["p:retries"]["element"]
    assert retries == {
        "type": "number_input",
        "action_id": "value",
        "is_decimal_allowed": False,
        "initial_value": "2",
        "min_value": "0",
        "max_value": "5",
    }
    ratio = blocks["p:ratio"]["element"]
    assert ratio["is_decimal_allowed"] is True and ratio["initial_value"] == "0.25"
    assert blocks["p:ratio"]["optional"] is True
    urgent = blocks["p:urgent"]
    assert urgent["element"]["type"] == "checkboxes" and "initial_options" not in urgent["element"]
    assert urgent["optional"] is True
    tone = blocks["p:tone"]["element"]
    assert tone["type"] == "static_select"
    assert [o["value"] for o in tone["options"]] == ['"formal"', '"casual"', '"pirate"']
    assert tone["initial_option"]["value"] == '"formal"'
    assert json.loads(blocks["p:headers"]["element"]["initial_value"]) == {"X-Ticket": "T-1"}
    assert json.loads(blocks["p:cc"]["element"]["initial_value"]) == ["a@example.com"]
    assert "initial_value" not in blocks["p:note"]["element"] and blocks["p:note"]["optional"] is True


def test_unchanged_submission_round_trips_to_identical_params() -> None:
    req = make_request()
    params, errors = parse_edit_submission(req, unchanged_state(edit_modal(req)))
    assert errors == {}
    assert params == PARAMS and list(params) == list(PARAMS)
    assert compute_changes(PARAMS, params) == ()


def test_round_trip_of_an_inferred_schema() -> None:
    original = {
        "to": "a@b.c", "n": 3, "f": 2.0, "flag": True, "tags": ["x"], "meta": {"k": None}, "none": None, "empty": "",
    }  # fmt: skip
    req = make_request(original, schema=None)
    view = edit_modal(req)
    assert_valid_view(view)
    params, errors = parse_edit_submission(req, unchanged_state(view))
    assert errors == {} and params == original
    assert isinstance(params["f"], float)


def test_edits_are_converted_per_type() -> None:
    req = make_request()
    state = unchanged_state(edit_modal(req))
    state["p:retries"]["value"]["value"] = "4"
    state["p:ratio"]["value"]["value"] = "0.5"
    state["p:urgent"]["value"]["selected_options"] = [{"value": "true", "text": {"type": "plain_text", "text": "Yes"}}]
    state["p:tone"]["value"]["selected_option"] = {"value": '"pirate"'}
    state["p:cc"]["value"]["value"] = '["b@example.com", "c@example.com"]'
    state["p:headers"]["value"]["value"] = None  # cleared an optional field: removed
    state["p:note"]["value"]["value"] = "Thanks!"
    params, errors = parse_edit_submission(req, state)
    assert errors == {}
    assert compute_changes(PARAMS, params) == (
        Change("retries", 2, 4),
        Change("ratio", 0.25, 0.5),
        Change("urgent", False, True),
        Change("tone", "formal", "pirate"),
        Change("headers", {"X-Ticket": "T-1"}, None),
        Change("cc", ["a@example.com"], ["b@example.com", "c@example.com"]),
        Change("note", None, "Thanks!"),
    )


@pytest.mark.parametrize(
    ("block", "state", "message"),
    [
        ("p:retries", {"value": "9"}, "must be at most 5"),
        ("p:retries", {"value": "-1"}, "must be at least 0"),
        ("p:headers", {"value": "{not json"}, "not valid JSON"),
        ("p:tone", {"selected_option": {"value": '"shouty"'}}, "must be one of: formal, casual, pirate"),
        ("p:subject", {"value": None}, "is required"),
        ("p:cc", {"value": '[1, "x"]'}, "0 must be a string"),
    ],
)
def test_errors_are_keyed_by_input_block(block: str, state: dict[str, Any], message: str) -> None:
    req = make_request()
    values = unchanged_state(edit_modal(req))
    values[block]["value"].update(state)
    _, errors = parse_edit_submission(req, values)
    assert list(errors) == [block]
    assert message in errors[block]


def test_root_errors_go_to_the_first_input() -> None:
    schema = {**SCHEMA, "minProperties": 20}
    req = make_request(schema=schema)
    _, errors = parse_edit_submission(req, unchanged_state(edit_modal(req)))
    assert errors == {"p:subject": "must have at least 20 fields"}


def test_long_strings_are_kept_as_is_and_noted() -> None:
    long_body = "x" * 4000
    req = make_request({**PARAMS, "body": long_body})
    view = edit_modal(req)
    assert_valid_view(view)
    assert "p:body" not in inputs(view)
    notes = [e["text"] for b in view["blocks"] if b["type"] == "context" for e in b["elements"]]
    assert "body: too long to edit in Slack (4,000 characters); kept as is" in notes
    params, errors = parse_edit_submission(req, unchanged_state(view))
    assert errors == {} and params["body"] == long_body


def test_unselectable_enums_fall_back_to_json() -> None:
    schema = {"type": "object", "properties": {"big": {"enum": list(range(150))}, "long": {"enum": ["y" * 200, "n"]}}}
    req = make_request({"big": 7, "long": "n"}, schema)
    view = edit_modal(req)
    assert_valid_view(view)
    blocks = inputs(view)
    big = blocks["p:big"]["element"]
    assert big["type"] == "plain_text_input" and big["initial_value"] == "7"
    assert blocks["p:long"]["element"]["initial_value"] == '"n"'
    params, errors = parse_edit_submission(req, unchanged_state(view))
    assert errors == {} and params == {"big": 7, "long": "n"}


def test_many_properties_fall_back_to_one_json_area() -> None:
    params = {f"p{i}": i for i in range(120)}
    req = make_request(params, schema=None)
    view = edit_modal(req)
    assert_valid_view(view)
    assert list(inputs(view)) == ["p:__all__"]
    values = unchanged_state(view)
    assert parse_edit_submission(req, values) == (params, {})
    values["p:__all__"]["value"]["value"] = json.dumps({**params, "p3": "three"})
    _, errors = parse_edit_submission(req, values)
    assert errors == {"p:__all__": "p3: must be an integer"}
    values["p:__all__"]["value"]["value"] = "[1, 2]"
    assert parse_edit_submission(req, values)[1] == {"p:__all__": "must be a JSON object"}


def test_agent_text_in_the_modal_is_neutralised() -> None:
    prop = {"type": "string", "title": "<!channel> title", "description": "<@U123> hint"}
    schema = {"type": "object", "properties": {"x": prop}}
    req = make_request({"x": "<https://evil|Approve>"}, schema)
    view = edit_modal(req)
    assert_valid_view(view)
    dumped = json.dumps(view, ensure_ascii=False)
    assert "<!channel>" not in dumped and "<@U123>" not in dumped
    # The value itself is what the person edits: it must round-trip exactly.
    params, errors = parse_edit_submission(req, unchanged_state(view))
    assert errors == {} and params == {"x": "<https://evil|Approve>"}
