"""Request bodies of the agent API, validated with pydantic (untrusted input)."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from typing import Annotated, Any, Literal

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bot.api.suggestions_in import MAX_SUGGESTIONS, SuggestionIn, check_size
from bot.domain.batch import BATCH_ACTION, MAX_ITEMS, Item
from bot.domain.edits import shape_problem
from bot.domain.linear import MAX_DEPTH, nul_at, too_deep_at
from bot.domain.values import APPROVER_ID, CHANNEL_ID
from bot.domain.model import Action, Preview, Risk
from bot.domain.outcomes import ERROR_MAX, PARAMS_MAX, RESULT_MAX
from bot.errors import InvalidInput

MAX_PARAMS_BYTES = 256 * 1024
MAX_BODY_DEPTH = MAX_DEPTH + 4  # params (at depth 2) may nest MAX_DEPTH levels
MAX_PREVIEW_BYTES = 512 * 1024


def _approver_ids(value: list[str]) -> list[str]:
    for entry in value:
        if not APPROVER_ID.match(entry):
            raise ValueError(f"{entry[:40]!r} is not a Slack user id (U..., W...) or user group id (S...)")
    return value


# Who may decide: Slack user ids (U..., W...) and user group ids (S...).
Approvers = Annotated[list[str], Field(max_length=50), AfterValidator(_approver_ids)]


def body_hash(body: BaseModel) -> str:
    """What an Idempotency-Key is bound to: the validated body, canonically serialised."""
    return hashlib.sha256(json.dumps(body.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


@functools.lru_cache(maxsize=256)
def _shape_problem_of(text: bytes) -> str | None:
    return shape_problem(orjson.loads(text))


def _shape_problem(schema: Any) -> str | None:
    """`shape_problem`, its verdict kept by the schema's content (agents send the same few again and again)."""
    if not isinstance(schema, dict):
        return shape_problem(schema)
    try:
        text = orjson.dumps(schema)
    except TypeError:  # what orjson cannot write (an integer past 64 bits) is checked as it is
        return shape_problem(schema)
    return _shape_problem_of(text)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class ActionIn(_Strict):
    name: str = Field(min_length=1, max_length=200)
    params: dict[str, Any] = Field(default_factory=dict)
    params_schema: dict[str, Any] | None = None

    @field_validator("params")
    @classmethod
    def _params_size(cls, value: dict[str, Any]) -> dict[str, Any]:
        if len(json.dumps(value)) > MAX_PARAMS_BYTES:
            raise ValueError(f"must be at most {MAX_PARAMS_BYTES // 1024} KB as JSON")
        return value

    @field_validator("params_schema")
    @classmethod
    def _schema_valid(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            problem = _shape_problem(value)  # the meta-schema check costs more: bot/api/validation.py
            if problem:
                raise ValueError(f"is not a valid JSON Schema: {problem}")
            if value.get("type", "object") != "object":
                raise ValueError("must describe an object (type: object)")
        return value

    # params against params_schema: checked after parsing, at a bounded cost (bot/api/validation.py).


class EmailPreviewIn(_Strict):
    kind: Literal["email"]
    to: list[str] | str
    cc: list[str] | str = Field(default_factory=list)
    subject: str = Field(max_length=2000)
    body: str


class DiffPreviewIn(_Strict):
    kind: Literal["diff"]
    path: str | None = Field(default=None, max_length=1000)
    before: str | None = None
    after: str | None = None
    unified: str | None = None

    @model_validator(mode="after")
    def _has_content(self) -> DiffPreviewIn:
        if self.unified is None and (self.before is None or self.after is None):
            raise ValueError("a diff preview needs `unified`, or both `before` and `after`")
        return self


class TablePreviewIn(_Strict):
    kind: Literal["table"]
    columns: list[str] = Field(min_length=1, max_length=100)
    rows: list[list[Any] | dict[str, Any]]


class MarkdownPreviewIn(_Strict):
    kind: Literal["markdown"]
    text: str


class JsonPreviewIn(_Strict):
    kind: Literal["json"]
    value: Any


PreviewIn = Annotated[
    EmailPreviewIn | DiffPreviewIn | TablePreviewIn | MarkdownPreviewIn | JsonPreviewIn,
    Field(discriminator="kind"),
]


Decisions = Annotated[list[Literal["approve", "edit", "reject", "respond"]], Field(min_length=1, max_length=4)]


def _distinct_decisions(value: list[str] | None) -> list[str] | None:
    if value is not None and len(set(value)) != len(value):
        raise ValueError("must not repeat a decision")
    return value


class ItemIn(ActionIn):
    """One action of a batch (`items`): the action's fields, its own preview and offered decisions."""

    preview: PreviewIn | None = None
    # Which decisions this action offers on the card (bot/domain/choices.py); unset: approve, edit, reject.
    allowed_decisions: Decisions | None = None
    # The agent's id for the action (a tool call id): what its execution receipt names as `item`.
    key: str | None = Field(default=None, min_length=1, max_length=200)

    _decisions = field_validator("allowed_decisions")(_distinct_decisions)

    @field_validator("preview")
    @classmethod
    def _item_preview_size(cls, value: Any) -> Any:
        if value is not None and len(value.model_dump_json()) > MAX_PREVIEW_BYTES:
            raise ValueError(f"must be at most {MAX_PREVIEW_BYTES // 1024} KB as JSON")
        return value


class ApprovalIn(_Strict):
    action: ActionIn | None = None
    summary: str = Field(min_length=1, max_length=3000)
    context: str | None = Field(default=None, max_length=20000)
    preview: PreviewIn | None = None
    risk: Risk = Risk.HIGH
    channel: str | None = None
    approvers: Approvers = Field(default_factory=list)
    callback_url: str | None = Field(default=None, max_length=2000, pattern=r"^https?://")
    requested_by: str | None = Field(default=None, max_length=200)
    # Timing: checked and merged with the server's defaults by bot.api.timing_in.parse_timing.
    reminders: Any = None
    escalation: Any = None
    timeout: Any = None
    # Issue 12: quorum, separation of duties, typed confirmation, batches.
    quorum: int = Field(default=1, ge=1, le=50)
    requester_may_approve: bool | None = None  # default: false when the requester is a Slack user
    confirm: str | None = Field(default=None, min_length=1, max_length=200)
    requester_user: str | None = Field(default=None, pattern=r"^[UW][A-Z0-9]{1,39}$")
    items: list[ItemIn] | None = Field(default=None, min_length=1, max_length=MAX_ITEMS)
    # Claude's permission suggestions ("always allow Bash(npm test *)"): offered on the card
    # (bot/domain/suggestions.py); `session` names the agent's run/session for session-scoped grants.
    suggestions: Annotated[list[SuggestionIn] | None, AfterValidator(check_size)] = Field(
        default=None, max_length=MAX_SUGGESTIONS)
    session: str | None = Field(default=None, min_length=1, max_length=200)
    # What the preview was computed from (a content hash, an etag, a version): the decision carries it
    # back, so the agent side can re-check it before the call runs (bot/domain/outcomes.py, docs/receipts.md).
    state: str | None = Field(default=None, min_length=1, max_length=200)

    @model_validator(mode="wrap")
    @classmethod
    def _action_required(cls, data: Any, handler: Any) -> Any:
        """`action` is required unless `items` is given: reported beside every other problem."""
        missing = isinstance(data, dict) and "action" not in data and "items" not in data
        errors: list[Any] = []
        try:
            model = handler(data)
        except ValidationError as exc:
            errors = [{"type": e["type"], "loc": e["loc"], "input": e["input"], **({"ctx": e["ctx"]} if "ctx" in e else {})}
                      for e in exc.errors(include_url=False)]
            model = None
        if missing:
            errors.insert(0, {"type": "missing", "loc": ("action",), "input": data})
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        return model

    @model_validator(mode="after")
    def _action_or_items(self) -> ApprovalIn:
        if (self.action is None) == (self.items is None):
            raise ValueError("give either `action` (one action) or `items` (a batch), not both or neither")
        if self.items is not None:
            for name, given in (("preview", self.preview), ("confirm", self.confirm)):
                if given is not None:
                    raise ValueError(f"`{name}` is per action: a batch cannot have one (give each item its own "
                                     "preview; submit actions that need typed confirmation one at a time)")
            if self.quorum != 1:
                raise ValueError("a batch is decided by one person: quorum must be 1 (submit the actions one "
                                 "at a time to require more approvers)")
            if self.risk is Risk.CRITICAL:
                raise ValueError("critical actions need typed confirmation, one at a time: they cannot be batched")
            if self.suggestions:
                raise ValueError("`suggestions` belong to one action: a batch cannot have them")
            keys = [i.key for i in self.items if i.key is not None]
            if len(keys) != len(set(keys)):
                raise ValueError("each item's `key` must be unique in the batch (a receipt names its item by it)")
        return self
    # Which decisions the card offers (bot/domain/choices.py); unset: approve, edit, reject.
    allowed_decisions: Decisions | None = None

    _decisions = field_validator("allowed_decisions")(_distinct_decisions)

    @model_validator(mode="after")
    def _decisions_of_one_action(self) -> ApprovalIn:
        if self.allowed_decisions is not None and self.items is not None:
            raise ValueError("`allowed_decisions` is per action: a batch cannot have it (give it on each item)")
        return self

    @field_validator("channel")
    @classmethod
    def _channel_id(cls, value: str | None) -> str | None:
        if value is not None and not CHANNEL_ID.match(value):
            raise ValueError(f"{value[:40]!r} is not a Slack channel id (like C0123ABCD)")
        return value

    @field_validator("summary")
    @classmethod
    def _one_line(cls, value: str) -> str:
        value = re.sub(r"\s+", " ", value).strip()
        if not value:
            raise ValueError("must not be blank")
        return value

    @field_validator("preview")
    @classmethod
    def _preview_size(cls, value: Any) -> Any:
        if value is not None and len(value.model_dump_json()) > MAX_PREVIEW_BYTES:
            raise ValueError(f"must be at most {MAX_PREVIEW_BYTES // 1024} KB as JSON")
        return value

    def domain_action(self) -> Action:
        if self.action is None:
            return Action(BATCH_ACTION, {}, None)
        return Action(self.action.name, self.action.params, self.action.params_schema)

    def domain_items(self) -> tuple[Item, ...]:
        return tuple(
            Item(Action(i.name, i.params, i.params_schema),
                 Preview(i.preview.kind, i.preview.model_dump(exclude={"kind"})) if i.preview else None,
                 key=i.key, allowed=tuple(i.allowed_decisions) if i.allowed_decisions is not None else None)
            for i in self.items or ()
        )

    def confirm_text(self) -> str | None:
        """The string Approve asks to type: the given one; for a critical action, its name."""
        if self.confirm is not None:
            return self.confirm
        if self.risk is Risk.CRITICAL and self.action is not None:
            return self.action.name
        return None

    def domain_preview(self) -> Preview | None:
        if self.preview is None:
            return None
        data = self.preview.model_dump(exclude={"kind"})
        return Preview(self.preview.kind, data)


class CancelIn(_Strict):
    reason: str | None = Field(default=None, max_length=2000)


class OutcomeIn(_Strict):
    """An execution receipt: what ran after an approval (POST /api/v1/approvals/{id}/outcome)."""

    status: Literal["ran", "failed", "skipped"]
    params: dict[str, Any] | None = None  # the parameters actually used
    result: Any = None  # a short result: at most RESULT_MAX characters as JSON
    error: str | None = Field(default=None, max_length=ERROR_MAX)
    item: str | None = Field(default=None, min_length=1, max_length=200)  # a batch item's key

    @field_validator("result")
    @classmethod
    def _short_result(cls, value: Any) -> Any:
        if value is not None and len(orjson.dumps(value)) > RESULT_MAX:
            raise ValueError(f"must be at most {RESULT_MAX} characters as JSON (report a summary, not the output)")
        return value

    @field_validator("params")
    @classmethod
    def _bounded_params(cls, value: Any) -> Any:
        if value is not None and len(orjson.dumps(value)) > PARAMS_MAX:
            raise ValueError(f"must be at most {PARAMS_MAX} characters as JSON")
        return value


def parse_body(model: type[BaseModel], raw: bytes) -> Any:
    """Parse JSON `raw` into `model`, or raise InvalidInput naming every problem."""
    return validate(model, load_object(raw))


def load_object(raw: bytes) -> dict[str, Any]:
    """JSON `raw` as an object (empty: {}), its depth bounded; InvalidInput otherwise."""
    where: list[str] | None = None
    checked = False  # `where` already computed
    if not raw.strip():
        data: Any = {}
    else:
        data = _fast_loads(raw)
        if data is not _SLOW and isinstance(data, dict):
            where, checked = too_deep_at(data, MAX_BODY_DEPTH), True
            if where is not None:  # too deep: `json` may refuse it first (naming the body), as it always did
                data, checked = _SLOW, False
        if data is _SLOW:
            try:
                data = json.loads(raw, parse_constant=_no_constant)
                # "\ud800" parses to a lone surrogate, which no database (or UTF-8 answer) can hold.
                json.dumps(data, ensure_ascii=False).encode()
            except (UnicodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
                raise InvalidInput(f"body is not valid JSON: {exc}") from None
            except RecursionError:
                raise InvalidInput("body is not valid JSON: nested too deeply",
                                   details=[{"field": "body", "message": "nested too deeply"}]) from None
    if not isinstance(data, dict):
        raise InvalidInput("body must be a JSON object")
    if not checked:
        where = too_deep_at(data, MAX_BODY_DEPTH)
    if where is None and (not checked or b"\\u0000" in raw):  # JSON writes U+0000 only as that escape
        nul = nul_at(data)
        if nul is not None:
            field = ".".join(nul) or "body"
            message = "contains a NUL character (U+0000), which cannot be stored"
            raise InvalidInput(f"invalid request body: {field}: {message}", details=[{"field": field, "message": message}])
    if where is not None:
        # Checked here, before pydantic or jsonschema recurse into it (both would hit RecursionError).
        field = ".".join(where[:2]) or "body"
        raise InvalidInput(f"invalid request body: {field}: is nested more than {MAX_BODY_DEPTH} levels deep",
                           details=[{"field": field, "message": f"is nested more than {MAX_BODY_DEPTH} levels deep"}])
    return data


def validate(model: type[BaseModel], data: dict[str, Any]) -> Any:
    """`data` (from load_object) as `model`, or InvalidInput naming every problem."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        details = [_detail(e) for e in exc.errors(include_url=False)]
        summary = "; ".join(f"{d['field']}: {d['message']}" for d in details[:5])
        raise InvalidInput(f"invalid request body: {summary}", details=details) from None


_SLOW = object()
_LONG_NUMBER = re.compile(rb"\d{19}")


def _fast_loads(raw: bytes) -> Any:
    """`raw` decoded by orjson when that is exactly what the checks below accept, else `_SLOW`.

    orjson refuses everything the checks below refuse (NaN, Infinity, lone surrogates, bytes that are
    not UTF-8, nesting past 1,024 levels), so what it decodes needs no further check; whatever it
    refuses goes the slow way, which gives today's error (or accepts what only `json` reads: UTF-16,
    a BOM). A run of 19+ digits also goes the slow way: orjson reads integers past 64 bits as floats.
    """
    if _LONG_NUMBER.search(raw):
        return _SLOW
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _SLOW


def _no_constant(name: str) -> Any:
    # Python's json accepts NaN and Infinity; JSON does not, nor does PostgreSQL's json type.
    raise ValueError(f"{name} is not a JSON value")


def _detail(error: Any) -> dict[str, Any]:
    loc = [str(p) for p in error["loc"] if not str(p).endswith("PreviewIn")]
    field = ".".join(loc) or "body"
    message = error["msg"]
    if error["type"] == "extra_forbidden":
        message = "unknown field"
    elif message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    return {"field": field, "message": message}
