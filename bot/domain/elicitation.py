"""An MCP server's elicitation, asked in Slack as a Signoff question: its rules, pure.

An elicitation is a request of kind `question` whose action is `elicitation`, with params
- form mode: {"mode": "form", "message", "requested_schema", "server"?}
- URL mode:  {"mode": "url", "message", "url", "elicitation_id"?, "server"?}

`requested_schema` is MCP's flat form: an object of top-level properties, each a string (with
`format`, lengths), a number, an integer, a boolean, a single choice (a string with `enum`, legacy
`enumNames`, or titled `oneOf` of {const, title}) or a multiple choice (an `array` whose `items`
hold `enum` or titled `anyOf` of {const, title}, with `minItems` / `maxItems`; its answer is the list
of chosen values). Anything else is refused with the name of the property and why (nothing is
stored): a form that cannot be shown whole must not be answered in part.

How it ends, as the MCP server reads it (`result_of`):
- answered (a person submitted the form, or clicked Done on a URL) -> `accept`, with `content`
  typed per the schema (form mode) and checked against it with `jsonschema`;
- rejected (a person clicked Decline) -> `decline`;
- expired or cancelled (nobody answered in time, or the asker gave up) -> `cancel`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import jsonschema
from jsonschema import FormatChecker

ELICITATION = "elicitation"
MODES = ("form", "url")
FIELDS_MAX = 20  # a modal holds 100 blocks; a form this long is no longer a quick question
CHOICES_MAX = 100  # a static_select's options
CHOICE_VALUE_MAX = 150  # a Slack option's value
MESSAGE_MAX = 2000
TITLE_MAX = 200
URL_MAX = 2000
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
TYPES = ("string", "number", "integer", "boolean", "array")
FORMATS = ("email", "uri", "date", "date-time")
_URL = re.compile(r"^https?://[^\s<>|\"`]+$")
_KEYS = {
    "string": {"type", "title", "description", "default", "enum", "enumNames", "oneOf", "format", "minLength",
               "maxLength"},
    "number": {"type", "title", "description", "default", "minimum", "maximum"},
    "integer": {"type", "title", "description", "default", "minimum", "maximum"},
    "boolean": {"type", "title", "description", "default"},
    "array": {"type", "title", "description", "default", "items", "minItems", "maxItems", "uniqueItems"},
}


class SchemaProblem(ValueError):
    """The requested schema (or URL) cannot be asked as a form; the message names the property."""


def check_form(schema: object) -> dict[str, Any]:
    """`schema` if it is a flat form this module can ask; SchemaProblem naming what is not."""
    if not isinstance(schema, dict):
        raise SchemaProblem("requested_schema must be a JSON object")
    if schema.get("type", "object") != "object":
        raise SchemaProblem("requested_schema must have type \"object\"")
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        raise SchemaProblem("requested_schema.properties must be an object with at least one property")
    if len(props) > FIELDS_MAX:
        raise SchemaProblem(f"requested_schema has {len(props)} properties; at most {FIELDS_MAX} can be asked")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise SchemaProblem("requested_schema.required must be a list of property names")
    unknown = [r for r in required if r not in props]
    if unknown:
        raise SchemaProblem(f"requested_schema.required names {unknown[0]!r}, which is not a property")
    for name, prop in props.items():
        _check_property(str(name), prop)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise SchemaProblem(f"requested_schema is not valid JSON Schema: {exc.message[:200]}") from None
    return schema


def _check_property(name: str, prop: object) -> None:
    where = f"requested_schema.properties.{name[:64]}"
    if not NAME.match(name):
        raise SchemaProblem(f"{where}: a property name must be 1-64 letters, digits, '_', '.' or '-'")
    if not isinstance(prop, dict):
        raise SchemaProblem(f"{where} must be an object")
    kind = prop.get("type")
    if kind not in TYPES:
        raise SchemaProblem(f"{where}: type {kind!r} cannot be asked (a form holds {', '.join(TYPES)})")
    extra = sorted(set(prop) - _KEYS[str(kind)])
    if extra:
        raise SchemaProblem(f"{where}: {extra[0]!r} is not supported for a {kind}")
    for key in ("title", "description"):
        if key in prop and (not isinstance(prop[key], str) or len(prop[key]) > TITLE_MAX * 10):
            raise SchemaProblem(f"{where}.{key} must be a string of at most {TITLE_MAX * 10} characters")
    if kind == "array":
        _check_multiple(where, prop)
    if kind in ("string", "array"):
        try:
            labels = choices(prop)
        except SchemaProblem as exc:
            raise SchemaProblem(f"{where}: {exc}") from None
        if labels is not None:
            if not labels or len(labels) > CHOICES_MAX:
                raise SchemaProblem(f"{where}: a choice needs 1 to {CHOICES_MAX} options")
            if any(len(v) > CHOICE_VALUE_MAX for v, _ in labels):
                raise SchemaProblem(f"{where}: an option's value may be at most {CHOICE_VALUE_MAX} characters")
            if len({v for v, _ in labels}) != len(labels):
                raise SchemaProblem(f"{where}: the options must be different from each other")
    if kind == "string":
        if "format" in prop and prop["format"] not in FORMATS:
            raise SchemaProblem(f"{where}: format {prop['format']!r} is not one of {', '.join(FORMATS)}")
    if "default" in prop:
        try:
            fits = prop["default"] is not None and (coerce(prop, prop["default"]) == prop["default"]
                                                    or prop["default"] == ("" if kind == "string" else []))
        except ValueError:
            fits = False
        offered = [v for v, _ in choices(prop) or []]
        given = prop["default"] if kind == "array" and isinstance(prop["default"], list) else [prop["default"]]
        if not fits or (offered and any(v not in offered for v in given)):
            if kind == "array":
                raise SchemaProblem(f"{where}.default must be a list of the options, each once")
            raise SchemaProblem(f"{where}.default is not a {kind}" + (" among the options" if fits else ""))


def _check_multiple(where: str, prop: Mapping[str, Any]) -> None:
    """A multiple choice: `items` with options, and item counts a person can meet."""
    items = prop.get("items")
    if (not isinstance(items, dict) or set(items) - {"type"} not in ({"enum"}, {"anyOf"})
            or items.get("type", "string") != "string"):
        raise SchemaProblem(f"{where}: an array can be asked only as a multiple choice: items must hold "
                            "\"enum\" (strings) or \"anyOf\" of {\"const\", \"title\"} options")
    least, most = prop.get("minItems", 0), prop.get("maxItems")
    for key, value in (("minItems", least), ("maxItems", most)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise SchemaProblem(f"{where}.{key} must be a whole number of at least 0")
    options = len(items.get("enum") or items.get("anyOf") or [])
    if most is not None and least > most:
        raise SchemaProblem(f"{where}: minItems ({least}) is more than maxItems ({most})")
    if least > options:
        raise SchemaProblem(f"{where}: minItems ({least}) is more than the {options} options")


def is_multiple(prop: Mapping[str, Any]) -> bool:
    """Whether a property is a multiple choice (its answer a list of option values)."""
    return prop.get("type") == "array"


def choices(prop: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """A choice's options as (value, label), or None if it has none; SchemaProblem if malformed."""
    if is_multiple(prop):
        items = prop.get("items")
        if not isinstance(items, dict):
            raise SchemaProblem("items must be an object holding the options")
        if "anyOf" in items:
            return _titled(items["anyOf"], "anyOf")
        return choices({"enum": items.get("enum")})
    if "enum" in prop:
        values, names = prop["enum"], prop.get("enumNames")
        if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
            raise SchemaProblem("enum must be a list of non-empty strings")
        if names is not None and (not isinstance(names, list) or len(names) != len(values)
                                  or not all(isinstance(n, str) and n for n in names)):
            raise SchemaProblem("enumNames must be a list of strings, one per enum value")
        return list(zip(values, names or values))
    if "oneOf" in prop:
        return _titled(prop["oneOf"], "oneOf")
    return None


def _titled(options: object, key: str) -> list[tuple[str, str]]:
    if not isinstance(options, list) or not all(
            isinstance(o, dict) and isinstance(o.get("const"), str) and o["const"]
            and isinstance(o.get("title", ""), str) for o in options):
        raise SchemaProblem(f"{key} must be a list of {{\"const\": value, \"title\": label}} options")
    return [(o["const"], str(o.get("title") or o["const"])) for o in options]


def coerce(prop: Mapping[str, Any], raw: object) -> Any:
    """`raw` (what a form gave: text, a bool, or a value already typed) as the property's type; None when
    empty. ValueError saying what was expected."""
    kind = prop.get("type")
    if raw is None or raw == "" or raw == []:
        return None
    if kind == "array":
        if not isinstance(raw, (list, tuple)) or not all(isinstance(v, str) for v in raw):
            raise ValueError("must be a list of the options")
        return list(dict.fromkeys(raw))
    if kind == "boolean":
        if isinstance(raw, bool):
            return raw
        raise ValueError("must be true or false")
    if kind == "string":
        if not isinstance(raw, str):
            raise ValueError("must be text")
        return raw
    if isinstance(raw, bool):
        raise ValueError(f"must be {'a whole number' if kind == 'integer' else 'a number'}")
    if kind == "integer":
        if isinstance(raw, int):
            return raw
        if isinstance(raw, float) and raw.is_integer():
            return int(raw)
        try:
            return int(str(raw).strip())
        except ValueError:
            raise ValueError("must be a whole number") from None
    if isinstance(raw, (int, float)):
        value = float(raw) if isinstance(raw, float) else raw
    else:
        try:
            value = float(str(raw).strip())
        except ValueError:
            raise ValueError("must be a number") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number")
    return int(value) if isinstance(value, float) and value.is_integer() and "." not in str(raw) else value


def content_errors(schema: Mapping[str, Any], content: Mapping[str, Any]) -> dict[str, str]:
    """Why `content` does not fit the schema, by property name ("" for the form as a whole); {} if it does."""
    errors: dict[str, str] = {}
    validator = jsonschema.Draft202012Validator(dict(schema), format_checker=FormatChecker())
    for error in validator.iter_errors(dict(content)):
        if error.validator == "required":
            missing = str(error.message).split("'")[1] if "'" in error.message else ""
            errors.setdefault(missing, "is required")
            continue
        field = str(error.path[0]) if error.path else ""
        errors.setdefault(field, _said(error))
    return errors


def _said(error: jsonschema.ValidationError) -> str:
    kind, expected = error.validator, error.validator_value
    if kind == "format":
        return f"must be a valid {expected}"
    if kind in ("minimum", "maximum"):
        return f"must be {'at least' if kind == 'minimum' else 'at most'} {expected}"
    if kind in ("minLength", "maxLength"):
        return f"must be {'at least' if kind == 'minLength' else 'at most'} {expected} characters"
    if kind in ("minItems", "maxItems"):
        return f"choose {'at least' if kind == 'minItems' else 'at most'} {expected}"
    if kind == "uniqueItems":
        return "choose each option once"
    if kind in ("enum", "oneOf", "anyOf", "const"):
        return "must be one of the options"
    if kind == "type":
        return f"must be {'a whole number' if expected == 'integer' else 'a ' + str(expected)}"
    return str(error.message)[:200]


def check_url(url: object) -> str:
    """A URL mode's link, if it is one a person may be shown (http(s), no spaces or Slack markup)."""
    if not isinstance(url, str) or len(url) > URL_MAX or not _URL.match(url):
        raise SchemaProblem(f"url must be an http(s) URL of at most {URL_MAX} characters, without spaces or <>|")
    return url


def params(*, mode: str, message: str, schema: object = None, url: object = None,
           elicitation_id: str | None = None, server: str | None = None) -> dict[str, Any]:
    """The request's params for an elicitation; SchemaProblem if it cannot be asked."""
    if mode not in MODES:
        raise SchemaProblem(f"mode must be one of {', '.join(MODES)}, not {str(mode)[:40]!r}")
    if not isinstance(message, str) or not message.strip() or len(message) > MESSAGE_MAX:
        raise SchemaProblem(f"message must be a non-empty string of at most {MESSAGE_MAX} characters")
    out: dict[str, Any] = {"mode": mode, "message": message}
    if mode == "form":
        out["requested_schema"] = check_form(schema)
    else:
        out["url"] = check_url(url)
        if elicitation_id:
            out["elicitation_id"] = str(elicitation_id)[:200]
    if server:
        out["server"] = str(server)[:200]
    return out


def is_elicitation(action_name: str, params_: Mapping[str, Any]) -> bool:
    return action_name == ELICITATION and params_.get("mode") in MODES


def result_of(status: str, decision_params: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What the MCP server gets: {"action": accept|decline|cancel, "content"?}; None while pending."""
    if status == "pending":
        return None
    if status == "answered":
        content = (decision_params or {}).get("content")
        return {"action": "accept", "content": dict(content)} if isinstance(content, dict) else {"action": "accept"}
    if status == "rejected":
        return {"action": "decline"}
    return {"action": "cancel"}
