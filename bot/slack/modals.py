"""The Reject and Edit-and-approve modals, and turning their submissions back into values.

The edit form is planned once from the action's effective schema (`_plan`) and the same plan
drives both the view and the parsing of its submission, so the two cannot drift apart.

An initial value shows invisible characters as markers (`⟨U+202E⟩`, `⟨U+200B×3⟩`, and a literal `⟨`
as `⟨U+27E8⟩`: `bot.slack.text.editable`), so a person never approves one unknowingly. What a text or
JSON input submits is read back with `from_editable`: each such marker becomes the characters it
names, so an untouched field keeps its exact value, a deleted marker removes its character and a
typed one adds it; any other text is taken as typed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from bot.domain.edits import ROOT, effective_schema, json_equal, validate_params
from bot.domain.linear import EDIT_SECONDS, EDIT_STEPS, BudgetExceeded
from bot.domain.model import Request
from bot.slack.previews import clip, plain
from bot.slack.text import editable, from_editable, visible

REJECT_VIEW = "signoff_reject"
RESPOND_VIEW = "signoff_respond"
EDIT_VIEW = "signoff_edit"
REASON_BLOCK = "reason"
VALUE_ACTION = "value"
ALL_FIELD = "__all__"

MODAL_MAX_BLOCKS = 100
MODAL_FIELDS_MAX = 95  # inputs; leaves room for the summary and notes in 100 blocks
INPUT_TEXT_MAX = 3000  # a plain_text_input holds at most 3000 characters
BLOCK_ID_MAX = 255
LABEL_MAX = 2000
HINT_MAX = 2000
OPTION_TEXT_MAX = 75
OPTION_VALUE_MAX = 150
OPTIONS_MAX = 100
REASON_MAX = 2000
SHORT_TEXT_MAX = 80  # longer strings get a multiline box
MODAL_SUMMARY_MAX = 500


@dataclass(frozen=True)
class _Field:
    """One parameter in the edit form. `kind` decides its input and how its value is read."""

    name: str
    kind: str  # text | number | integer | boolean | select | json | all | kept
    schema: dict[str, Any]
    required: bool
    whole: bool = False  # the one JSON area holding every parameter

    @property
    def block_id(self) -> str:
        return f"p:{self.name}"


# --------------------------------------------------------------------------- reject


def reject_modal(req: Request) -> dict[str, Any]:
    """The "Reject request" modal: the summary and an optional reason for the agent."""
    element = {
        "type": "plain_text_input",
        "action_id": VALUE_ACTION,
        "multiline": True,
        "max_length": REASON_MAX,
        "placeholder": {"type": "plain_text", "text": "Why not? The agent receives this reason."},
    }
    return _modal(
        req,
        callback_id=REJECT_VIEW,
        title="Reject request",
        submit="Reject",
        blocks=[
            _summary(req),
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "optional": True,
                "label": _label("Reason"),
                "element": element,
            },
        ],
    )


def parse_reject_submission(state_values: dict[str, Any]) -> str | None:
    """The reason typed in the reject modal, stripped; None when left empty."""
    value = state_values.get(REASON_BLOCK, {}).get(VALUE_ACTION, {}).get("value")
    return value.strip() or None if isinstance(value, str) else None


def respond_modal(req: Request) -> dict[str, Any]:
    """"Reply instead": the person's answer goes back in place of the action, which does not run."""
    element = {
        "type": "plain_text_input",
        "action_id": VALUE_ACTION,
        "multiline": True,
        "max_length": REASON_MAX,
        "placeholder": {"type": "plain_text", "text": "The agent receives this answer instead of running the action."},
    }
    return _modal(
        req,
        callback_id=RESPOND_VIEW,
        title="Reply instead",
        submit="Send reply",
        blocks=[
            _summary(req),
            {"type": "input", "block_id": REASON_BLOCK, "label": _label("Your reply"), "element": element},
        ],
    )


def parse_respond_submission(state_values: dict[str, Any]) -> str | None:
    """The reply typed in the respond modal, stripped; None when blank (a required field: an error)."""
    return parse_reject_submission(state_values)


# --------------------------------------------------------------------------- edit


def edit_modal(req: Request) -> dict[str, Any]:
    """The "Edit and approve" modal: one input per top-level parameter of the effective schema."""
    fields, unlisted = _plan(req)
    intro = f"Your changes are checked against the parameters of {req.action.name} before it runs."
    blocks = [_summary(req), _context(intro)]
    for field in fields:
        blocks.append(_field_block(field, req.action.params))
    if unlisted:
        names = ", ".join(unlisted)
        blocks.append(_context(clip(f"Not in the form, kept as they are: {names}", 1000)))
    blocks = blocks[:MODAL_MAX_BLOCKS]
    return _modal(req, callback_id=EDIT_VIEW, title="Edit and approve", submit="Approve", blocks=blocks)


def parse_edit_submission(req: Request, state_values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(new params, errors keyed by input block id) from a view_submission's `state.values`.

    Parameters the form could not show keep their value; an empty optional input removes its
    parameter. Errors use block ids because `response_action: errors` is keyed by them.
    """
    fields, _ = _plan(req)
    params = dict(req.action.params)
    errors: dict[str, str] = {}
    for field in fields:
        if field.kind == "kept" or field.block_id not in state_values:
            continue
        state = state_values[field.block_id].get(VALUE_ACTION, {})
        try:
            _apply(field, state, params)
        except _InputError as exc:
            errors[field.block_id] = str(exc)
    if errors:
        return params, errors
    try:  # on the event loop, inside a Slack ack: bounded (a person's values may hit a costly schema path)
        problems = validate_params(effective_schema(req.action), params, steps=EDIT_STEPS, seconds=EDIT_SECONDS)
    except BudgetExceeded:
        problems = {ROOT: "these values take too long to check against the action's schema; approve or "
                          "reject without editing"}
    return params, _errors_by_block(problems, fields)


class _InputError(ValueError):
    """An input that cannot be turned into a value (bad JSON, not a number, missing)."""


# --------------------------------------------------------------------------- planning


def _plan(req: Request) -> tuple[list[_Field], list[str]]:
    """The form's fields, and the names of parameters the schema does not list."""
    schema = effective_schema(req.action)
    params = req.action.params
    given = schema.get("properties")
    properties: dict[str, Any] = given if isinstance(given, dict) else {}
    required = set(schema.get("required") or []) if isinstance(schema.get("required"), list) else set()
    too_many = len(properties) > MODAL_FIELDS_MAX
    bad_name = any(len(f"p:{name}") > BLOCK_ID_MAX for name in properties)
    if (not properties and params) or too_many or bad_name:
        kind = "all" if _fits(_as_json(params)) else "kept"
        return [_Field(ALL_FIELD, kind, schema, True, whole=True)], []
    fields = [
        _Field(name, _kind(prop, params.get(name)), prop if isinstance(prop, dict) else {}, name in required)
        for name, prop in properties.items()
    ]
    return fields, [str(name) for name in params if name not in properties]


def _kind(prop: Any, value: Any) -> str:
    if not isinstance(prop, dict):
        return _json_kind(value)
    if "enum" in prop:
        return "select" if _selectable(prop["enum"]) else _json_kind(value)
    declared = prop.get("type")
    if declared == "string" and (value is None or isinstance(value, str)):
        return "text" if value is None or len(editable(value)) <= INPUT_TEXT_MAX else "kept"
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if declared in ("integer", "number") and (value is None or is_number):
        # An integer field holding 2.5 gets a decimal box: rounding it silently would be an edit.
        fractional = isinstance(value, float) and not value.is_integer()
        return "number" if fractional else str(declared)
    if declared == "boolean" and (value is None or isinstance(value, bool)):
        return "boolean"
    return _json_kind(value)


def _json_kind(value: Any) -> str:
    return "json" if _fits(_as_json(value)) else "kept"


def _selectable(options: Any) -> bool:
    return (
        isinstance(options, list)
        and 0 < len(options) <= OPTIONS_MAX
        and all(len(json.dumps(v)) <= OPTION_VALUE_MAX for v in options)
    )


def _as_json(value: Any) -> str:
    """`value` as the JSON a person edits: invisible characters as markers (`editable`)."""
    text = editable(json.dumps(value, indent=2, ensure_ascii=False))
    return text if len(text) <= INPUT_TEXT_MAX else editable(json.dumps(value, ensure_ascii=False))


def _fits(text: str) -> bool:
    return len(text) <= INPUT_TEXT_MAX


# --------------------------------------------------------------------------- rendering


def _field_block(field: _Field, params: dict[str, Any]) -> dict[str, Any]:
    value = params if field.whole else params.get(field.name)
    if field.kind == "kept":
        size = len(value) if isinstance(value, str) else len(_as_json(value))
        name = "The parameters are" if field.whole else f"{field.name}:"
        return _context(f"{name} too long to edit in Slack ({size:,} characters); kept as is")
    label = field.schema.get("title") if isinstance(field.schema.get("title"), str) else None
    block: dict[str, Any] = {
        "type": "input",
        "block_id": field.block_id,
        "label": _label(label or ("All parameters (JSON)" if field.kind == "all" else field.name)),
        "element": _ELEMENTS[field.kind](field, value, field.whole or field.name in params),
        # Checkboxes are always optional: a required checkbox would force the person to tick it.
        "optional": field.kind == "boolean" or not field.required,
    }
    description = field.schema.get("description")
    if isinstance(description, str) and description.strip():
        block["hint"] = plain(description, limit=HINT_MAX)
    return block


def _text_element(field: _Field, value: Any, present: bool) -> dict[str, Any]:
    schema = field.schema
    text = value if isinstance(value, str) else ""
    max_length = schema.get("maxLength") if isinstance(schema.get("maxLength"), int) else None
    min_length = schema.get("minLength") if isinstance(schema.get("minLength"), int) else None
    long_box = max_length is not None and max_length > 200 and "format" not in schema
    element: dict[str, Any] = {
        "type": "plain_text_input",
        "action_id": VALUE_ACTION,
        "multiline": len(text) > SHORT_TEXT_MAX or "\n" in text or long_box,
    }
    shown = editable(text)  # a person never approves an invisible character unknowingly
    if shown:
        element["initial_value"] = shown
    # Limits only when the current value satisfies them: Slack may refuse a view whose
    # initial value breaks its own limits, and the schema check reports it on submit anyway.
    if max_length is not None and 1 <= max_length <= INPUT_TEXT_MAX and len(shown) <= max_length:
        element["max_length"] = max_length
    if min_length is not None and 1 <= min_length <= min(INPUT_TEXT_MAX, max_length or INPUT_TEXT_MAX):
        if not shown or len(shown) >= min_length:
            element["min_length"] = min_length
    return element


def _number_element(field: _Field, value: Any, present: bool) -> dict[str, Any]:
    decimal = field.kind == "number"
    element: dict[str, Any] = {"type": "number_input", "action_id": VALUE_ACTION, "is_decimal_allowed": decimal}
    if isinstance(value, int | float) and not isinstance(value, bool):
        element["initial_value"] = _number_text(value, decimal)
    for bound, key in (("minimum", "min_value"), ("maximum", "max_value")):
        limit = field.schema.get(bound)
        if not isinstance(limit, int | float) or isinstance(limit, bool):
            continue
        usable = decimal or float(limit).is_integer()
        if usable and _within(value, bound, limit):
            element[key] = _number_text(limit, decimal)
    return element


def _within(value: Any, bound: str, limit: float) -> bool:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return True
    return value >= limit if bound == "minimum" else value <= limit


def _number_text(value: float, decimal: bool) -> str:
    """A number as Slack's number input accepts it: no exponent, no ".0" for integers."""
    if not decimal:
        return str(int(value))
    return format(Decimal(repr(value)), "f")


def _boolean_element(field: _Field, value: Any, present: bool) -> dict[str, Any]:
    option = {"text": {"type": "plain_text", "text": "Yes"}, "value": "true"}
    element: dict[str, Any] = {"type": "checkboxes", "action_id": VALUE_ACTION, "options": [option]}
    if value is True:
        element["initial_options"] = [option]
    return element


def _option(value: Any) -> dict[str, Any]:
    text = value if isinstance(value, str) and value else json.dumps(value, ensure_ascii=False)
    return {"text": plain(text, limit=OPTION_TEXT_MAX), "value": json.dumps(value)}


def _select_element(field: _Field, value: Any, present: bool) -> dict[str, Any]:
    options = [_option(v) for v in field.schema["enum"]]
    element: dict[str, Any] = {
        "type": "static_select",
        "action_id": VALUE_ACTION,
        "options": options,
        "placeholder": {"type": "plain_text", "text": "Choose"},
    }
    chosen = [o for v, o in zip(field.schema["enum"], options, strict=True) if present and json_equal(v, value)]
    if chosen:
        element["initial_option"] = chosen[0]
    return element


def _json_element(field: _Field, value: Any, present: bool) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "plain_text_input", "action_id": VALUE_ACTION, "multiline": True}
    if present:
        element["initial_value"] = _as_json(value)
    return element


_ELEMENTS = {
    "text": _text_element,
    "integer": _number_element,
    "number": _number_element,
    "boolean": _boolean_element,
    "select": _select_element,
    "json": _json_element,
    "all": _json_element,
}


# --------------------------------------------------------------------------- parsing


def _apply(field: _Field, state: dict[str, Any], params: dict[str, Any]) -> None:
    """Write the value read from one input into `params` (or remove it); raise _InputError."""
    if field.kind == "all":
        new = _parse_json(state.get("value"))
        if not isinstance(new, dict):
            raise _InputError("must be a JSON object")
        params.clear()
        params.update(new)
        return
    if field.kind == "boolean":
        checked = any(o.get("value") == "true" for o in state.get("selected_options") or [])
        if field.name in params or checked:
            params[field.name] = checked
        return
    raw = _raw(field, state)
    old = params.get(field.name)
    if raw is None or raw == "":
        if field.kind == "text" and old == "":
            return  # Slack sends an empty box as null; the parameter was "" and still is
        if field.required:
            raise _InputError("is required")
        params.pop(field.name, None)
        return
    new = _READERS[field.kind](raw)
    # Keep the original when it is the same JSON value (3.0 stays 3.0, not 3).
    if field.name not in params or not json_equal(old, new):
        params[field.name] = new


def _raw(field: _Field, state: dict[str, Any]) -> str | None:
    if field.kind == "select":
        selected = state.get("selected_option")
        return selected.get("value") if isinstance(selected, dict) else None
    value = state.get("value")
    return value if isinstance(value, str) else None


def _parse_json(raw: Any) -> Any:
    if not isinstance(raw, str) or not raw.strip():
        raise _InputError("is required")
    try:
        return json.loads(from_editable(raw))
    except json.JSONDecodeError as exc:
        raise _InputError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None


def _parse_integer(raw: str) -> int | float:
    try:
        return int(raw.strip())
    except ValueError:
        number = _parse_number(raw)
        return int(number) if number.is_integer() else number  # 2.5 stays, the schema says why


def _parse_number(raw: str) -> float:
    try:
        number = float(raw.strip())
    except ValueError:
        raise _InputError("must be a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise _InputError("must be a number")
    return number


def _parse_decimal(raw: str) -> int | float:
    text = raw.strip()
    if text.lstrip("+-").isdigit():
        return int(text)
    return _parse_number(text)


_READERS = {
    "text": from_editable,  # the markers the form showed (or the person typed) back into characters
    "integer": _parse_integer,
    "number": _parse_decimal,
    "select": _parse_json,
    "json": _parse_json,
}


def _errors_by_block(errors: dict[str, str], fields: list[_Field]) -> dict[str, str]:
    """Re-key field errors to input block ids; the rest go to the first input, named."""
    inputs = {f.name: f.block_id for f in fields if f.kind != "kept"}
    first = next(iter(inputs.values()), ROOT)
    by_block: dict[str, str] = {}
    for name, message in errors.items():
        if name in inputs:
            by_block[inputs[name]] = message
        else:
            text = message if name == ROOT else f"{name}: {message}"
            by_block[first] = f"{by_block[first]}; {text}" if first in by_block else text
    return {block: clip(visible(message), 300) for block, message in by_block.items()}


# --------------------------------------------------------------------------- shared


def _modal(req: Request, *, callback_id: str, title: str, submit: str, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": callback_id,
        "title": {"type": "plain_text", "text": title},
        "submit": {"type": "plain_text", "text": submit},
        "close": {"type": "plain_text", "text": "Cancel"},
        "private_metadata": json.dumps({"request_id": req.id, "version": req.version}),
        "blocks": blocks,
    }


def _summary(req: Request) -> dict[str, Any]:
    return {"type": "section", "text": plain(req.summary, limit=MODAL_SUMMARY_MAX)}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [plain(text, limit=2000)]}


def _label(text: str) -> dict[str, Any]:
    return plain(text, limit=LABEL_MAX)
