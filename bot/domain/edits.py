"""Parameter edits: the schema an action's parameters follow, validation, and what changed.

Pure functions of domain values. JSON Schema work goes through `jsonschema`, with a
registry that knows only the published meta-schemas: a `$ref` to a remote URL is an
error here, never a network fetch (jsonschema's default would try to download it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.validators import validator_for
from jsonschema_specifications import REGISTRY as _META_SCHEMAS
from referencing.exceptions import Unresolvable

from bot.domain.linear import MAX_DEPTH, MAX_SCHEMA_NODES, budget, count_nodes, linear, pattern_problem, too_deep
from bot.domain.model import Action, Change

ROOT = ""  # the key `validate_params` uses for an error about the parameters as a whole

_MESSAGE_MAX = 200  # a validation message is read in a modal, next to one field

_FORMAT_TEXT = {
    "email": "must be an email address, like name@example.com",
    "uri": "must be a full URL, like https://example.com/page",
    "date-time": "must be a date and time, like 2026-12-05T14:30:00Z",
    "date": "must be a date, like 2026-12-05",
}

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object",
    "array": "a list",
    "null": "empty (null)",
}


def effective_schema(action: Action) -> dict[str, Any]:
    """The action's `params_schema`, or one inferred from its current parameters.

    The inferred schema types each present parameter by its current value and requires
    all of them, so an edit can change values but not drop or retype a parameter.
    """
    if action.params_schema is not None:
        return action.params_schema
    return {
        "type": "object",
        "properties": {name: _infer(value) for name, value in action.params.items()},
        "required": list(action.params),
    }


def _infer(value: Any) -> dict[str, Any]:
    # bool is a subclass of int: test it first or every flag becomes an integer.
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list | tuple):
        return {"type": "array"}
    if isinstance(value, dict):
        return {"type": "object"}
    return {}


def check_schema(schema: Any) -> str | None:
    """None if `schema` is a usable parameters schema, else a one-line reason.

    Used at submit time to reject a bad `params_schema` before anything is stored.
    Besides being valid JSON Schema it must describe an object, since parameters are one.
    Checking it against the meta-schema costs about 0.3 ms per node (a 5,000-node schema: 1.5 s).
    """
    problem = _size_problem(schema)
    if problem is not None:
        return problem
    try:
        validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        return f"params_schema is not valid JSON Schema: {exc.message}" + (f" (at {where})" if where else "")
    return _type_problem(schema)


def shape_problem(schema: Any) -> str | None:
    """`check_schema`'s cheap part (no meta-schema): size, nesting, patterns, type object."""
    return _size_problem(schema) or _type_problem(schema)


def _size_problem(schema: Any) -> str | None:
    if not isinstance(schema, dict):
        return "params_schema must be a JSON object"
    if too_deep(schema):
        return f"params_schema is nested more than {MAX_DEPTH} levels deep"
    if count_nodes(schema, MAX_SCHEMA_NODES) > MAX_SCHEMA_NODES:  # bounds the meta-schema check below
        return f"params_schema has more than {MAX_SCHEMA_NODES} objects, lists and values"
    problem = pattern_problem(schema)  # before jsonschema compiles any of them
    if problem is not None:
        return f"params_schema: {problem}"
    return None


def _type_problem(schema: dict[str, Any]) -> str | None:
    declared = schema.get("type", "object")
    types = declared if isinstance(declared, list) else [declared]
    if "object" not in types:
        return "params_schema must describe an object (type: object)"
    return None


def validate_params(schema: dict[str, Any], params: dict[str, Any], *, steps: int | None = None,
                    seconds: float | None = None, schema_checked: bool = False,
                    validator: Any = None) -> dict[str, str]:
    """Check `params` against `schema`; return {top-level field (ROOT for the whole): message}.

    Only the first problem per field is kept: a person fixes one thing at a time. With `steps`, the
    check stops after that many (bot/domain/linear.budget) and raises BudgetExceeded. `validator`:
    `params_validator(schema)` made earlier (a caller that sees the same schema again keeps it).
    """
    if not schema_checked:
        problem = check_schema(schema)
        if problem is not None:
            return {ROOT: problem}
    if steps is None:
        return _validate(schema, params, validator)
    with budget(steps, seconds):
        return _validate(schema, params, validator)


def params_validator(schema: dict[str, Any]) -> Any:
    """The validator `validate_params` checks params against `schema` with (for a schema `check_schema` passed)."""
    cls = linear(validator_for(schema, default=jsonschema.Draft202012Validator))
    return cls(schema, registry=_META_SCHEMAS, format_checker=cls.FORMAT_CHECKER)


def _validate(schema: dict[str, Any], params: dict[str, Any], validator: Any = None) -> dict[str, str]:
    if too_deep(params):
        return {ROOT: f"is nested more than {MAX_DEPTH} levels deep"}
    validator = validator if validator is not None else params_validator(schema)
    errors: dict[str, str] = {}
    try:
        for error in validator.iter_errors(params):  # BudgetExceeded goes through: the caller's to answer
            for field, message in _describe(error):
                errors.setdefault(field, _clip(message))
    except Unresolvable as exc:
        errors.setdefault(ROOT, f"the schema refers to something it does not contain: {exc}")
    return errors


def _describe(error: ValidationError) -> Iterable[tuple[str, str]]:
    """(field, message) pairs for one jsonschema error."""
    path = list(error.absolute_path)
    if not path:
        yield from _describe_root(error)
        return
    field, rest = str(path[0]), path[1:]
    message = _message(error)
    if rest:
        message = f"{'.'.join(str(p) for p in rest)} {message}"
    yield field, message


def _describe_root(error: ValidationError) -> Iterable[tuple[str, str]]:
    instance = error.instance
    required: Any = error.validator_value
    if error.validator == "required" and isinstance(instance, dict):
        # One error per missing name; key each to that name so the form marks the right input.
        for name in required:
            if name not in instance:
                yield str(name), "is required"
        return
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        schema: Any = error.schema
        allowed = set(schema.get("properties", {}))
        for name in instance:
            if name not in allowed:
                yield str(name), "is not an allowed field"
        return
    yield ROOT, _message(error)


def _message(error: ValidationError) -> str:
    """A short sentence (no subject: the form shows it next to the field)."""
    v: Any = error.validator
    value: Any = error.validator_value
    simple = {
        "maximum": f"must be at most {value}",
        "minimum": f"must be at least {value}",
        "exclusiveMaximum": f"must be less than {value}",
        "exclusiveMinimum": f"must be greater than {value}",
        "maxLength": f"must be at most {value} characters",
        "minLength": "must not be empty" if value == 1 else f"must be at least {value} characters",
        "maxItems": f"must have at most {value} items",
        "minItems": f"must have at least {value} items",
        "uniqueItems": "must not contain duplicates",
        "multipleOf": f"must be a multiple of {value}",
        "pattern": f"must match the pattern {value}",
        "format": _FORMAT_TEXT.get(str(value), f"must be a valid {value}"),
        "const": f"must be {_show(value)}",
        "maxProperties": f"must have at most {value} fields",
        "minProperties": f"must have at least {value} fields",
    }
    if v in simple:
        return simple[str(v)]
    if v == "enum":
        return "must be one of: " + ", ".join(_show(x) for x in value)
    if v == "type":
        types = value if isinstance(value, list) else [value]
        return "must be " + " or ".join(_TYPE_NAMES.get(t, str(t)) for t in types)
    if v == "required":
        missing = [n for n in value if isinstance(error.instance, dict) and n not in error.instance]
        return f"needs {', '.join(map(str, missing))}" if missing else "is incomplete"
    if v in ("anyOf", "oneOf") and error.context:
        return _message(jsonschema.exceptions.best_match(error.context))
    return error.message


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _clip(message: str) -> str:
    return message if len(message) <= _MESSAGE_MAX else message[: _MESSAGE_MAX - 1] + "…"


def compute_changes(before: dict[str, Any], after: dict[str, Any]) -> tuple[Change, ...]:
    """One Change per top-level key whose value differs, in `before` order then new keys.

    An added key has before=None, a removed key after=None. Equality is JSON equality:
    1 == 1.0, but True != 1 (Python would say they are equal).
    """
    changes = [
        Change(field=key, before=before[key], after=after.get(key))
        for key in before
        if key not in after or not json_equal(before[key], after[key])
    ]
    changes += [Change(field=key, before=None, after=after[key]) for key in after if key not in before]
    return tuple(changes)


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON sees it: booleans are not numbers; 1 and 1.0 are the same number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b
