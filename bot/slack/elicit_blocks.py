"""An MCP server's elicitation in Slack: its card, the form built from its schema, and reading the form.

Pure functions of domain values, built with slack_sdk's Block Kit models. Everything the server
wrote (message, titles, descriptions, option labels) goes into `plain_text`: an MCP server's text
cannot mention anyone or render a link dressed as Signoff's. The one link shown is a URL mode's
own URL, as itself, under a line saying it comes from the MCP server.

The form: one input per schema property, block id `f:<name>`, action id `value`:
a choice (enum / oneOf) is a static select; a multiple choice (an array of options) checkboxes
when it has at most CHECKBOXES_MAX options, else a multi-select (capped at its maxItems); an email,
URL or date its own input; a number or an integer a number input (decimals only for numbers); a
boolean a checkbox (unchecked is false); anything else a text input. What comes back is typed by the schema (`bot.domain.elicitation.coerce`)
and checked against it (`content_errors`); errors go back into the form, on the field's block.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock, Block, ButtonElement, CheckboxesElement, ContextBlock, DatePickerElement, EmailInputElement,
    HeaderBlock, InputBlock, NumberInputElement, Option, PlainTextInputElement, PlainTextObject, SectionBlock,
    StaticMultiSelectElement, StaticSelectElement, UrlInputElement,
)
from slack_sdk.models.views import View

from bot.domain.elicitation import choices, coerce, content_errors, is_multiple
from bot.domain.model import Request, Status
from bot.domain.values import is_user_id
from bot.slack.text import clip, one_line

OPEN = "signoff_elicit_open"
DECLINE = "signoff_elicit_decline"
DONE = "signoff_elicit_done"
FORM_VIEW = "signoff_elicit_form"
DECIDE_BLOCK = "decide"
FIELD_PREFIX = "f:"
VALUE = "value"
MESSAGE_SHOWN = 2900
LABEL_MAX = 2000
OPTION_TEXT_MAX = 75
INPUT_MAX = 3000
CHECKBOXES_MAX = 10  # Slack's checkboxes element holds at most 10 options


def _plain(text: str, limit: int) -> PlainTextObject:
    return PlainTextObject(text=clip(text, limit) or " ", emoji=False)


def _params(req: Request) -> dict[str, Any]:
    return req.action.params


def _fields(req: Request) -> list[tuple[str, dict[str, Any], bool]]:
    schema = _params(req).get("requested_schema") or {}
    required = set(schema.get("required") or [])
    return [(str(name), prop, name in required) for name, prop in (schema.get("properties") or {}).items()]


def _label(name: str, prop: dict[str, Any]) -> str:
    return str(prop.get("title") or name)


def _kind_text(prop: dict[str, Any]) -> str:
    options = choices(prop)
    if options is not None:
        listed = ", ".join(label for _, label in options[:10]) + (" ..." if len(options) > 10 else "")
        if not is_multiple(prop):
            return "one of " + listed
        least, most = prop.get("minItems"), prop.get("maxItems")
        counts = (f" (choose {least} to {most})" if least and most is not None
                  else f" (at least {least})" if least else f" (at most {most})" if most is not None else "")
        return "any of " + listed + counts
    kind = prop.get("type")
    return {"integer": "a whole number", "number": "a number", "boolean": "yes or no"}.get(
        str(kind), str(prop.get("format") or "text"))


def card(req: Request, *, now: datetime) -> dict[str, Any]:
    """The question's card: the message, what it asks, and Answer / Done / Decline while pending."""
    params = _params(req)
    url_mode = params.get("mode") == "url"
    title = "An MCP server asks you to open a link" if url_mode else "An MCP server asks for input"
    blocks: list[Block] = [
        HeaderBlock(text=_plain(title, 150)),
        SectionBlock(text=_plain(str(params.get("message", "")), MESSAGE_SHOWN)),
    ]
    who = [f"MCP server: {params['server']}" if params.get("server") else None,
           f"asked by {req.requested_by}" if req.requested_by else None, req.id]
    blocks.append(ContextBlock(elements=[_plain(" · ".join(w for w in who if w), 2000)]))
    if url_mode:
        url = str(params.get("url", "")).replace("&", "&amp;")
        blocks.append(SectionBlock(text={"type": "mrkdwn", "text": clip(
            f"Link from the MCP server (not from Signoff); open it only if you trust it:\n<{url}>", 3000)}))
    else:
        lines = [f"• {_label(n, p)}: {_kind_text(p)}{'' if needed else ' (optional)'}" for n, p, needed in _fields(req)]
        blocks.append(SectionBlock(text=_plain("It asks for:\n" + "\n".join(lines), 3000)))
    if req.status is Status.PENDING:
        first = (ButtonElement(text="Done", action_id=DONE, value=req.id, style="primary") if url_mode
                 else ButtonElement(text="Answer...", action_id=OPEN, value=req.id, style="primary"))
        blocks.append(ActionsBlock(block_id=DECIDE_BLOCK, elements=[
            first, ButtonElement(text="Decline", action_id=DECLINE, value=req.id, style="danger")]))
    else:
        blocks.extend(_ended(req))
    fallback = f"{title}: {one_line(str(params.get('message', '')))}"
    return {"text": clip(fallback, 300), "blocks": [b.to_dict() for b in blocks]}


def _ended(req: Request) -> list[Block]:
    decision = req.decision
    actor = decision.decided_by if decision is not None else None
    who = f"<@{actor.id}>" if actor is not None and is_user_id(actor.id) else "nobody"
    if req.status is Status.ANSWERED:
        content = (decision.params.get("content") if decision is not None else None) or {}
        text = f":white_check_mark: Answered by {who}"
        shown = [f"{_label(n, p)}: {_shown(p, content[n])}" for n, p, _ in _fields(req) if n in content]
        blocks: list[Block] = [SectionBlock(text={"type": "mrkdwn", "text": text})]
        if shown:
            blocks.append(SectionBlock(text=_plain("\n".join(shown), 3000)))
        return blocks
    if req.status is Status.REJECTED:
        return [SectionBlock(text={"type": "mrkdwn", "text": f":no_entry_sign: Declined by {who}"})]
    return [SectionBlock(text={"type": "mrkdwn",
                               "text": f":hourglass: Nobody answered in time ({req.status.value}): the MCP server "
                                       "was told it was cancelled"})]


def _shown(prop: dict[str, Any], value: Any) -> str:
    """An answered value as the person saw it: a choice as its label, a multiple choice as its chosen labels."""
    labels = dict(choices(prop) or [])
    if isinstance(value, list):
        return ", ".join(labels.get(str(v), str(v)) for v in value) or "(none)"
    return labels.get(value, str(value)) if isinstance(value, str) else str(value)


def form_modal(req: Request) -> dict[str, Any]:
    """The modal a person answers in, built from the requested schema."""
    blocks: list[Block] = [SectionBlock(text=_plain(str(_params(req).get("message", "")), MESSAGE_SHOWN))]
    for name, prop, needed in _fields(req):
        element = _element(prop)
        hint = _plain(str(prop["description"]), LABEL_MAX) if prop.get("description") else None
        optional = not needed or prop.get("type") == "boolean"  # an unchecked box is an answer: false
        blocks.append(InputBlock(block_id=f"{FIELD_PREFIX}{name}", label=_plain(_label(name, prop), LABEL_MAX),
                                 element=element, hint=hint, optional=optional))
    view = View(type="modal", callback_id=FORM_VIEW, title=_plain("Answer", 24), submit=_plain("Send", 24),
                close=_plain("Cancel", 24), blocks=blocks)
    return view.to_dict()


def _element(prop: dict[str, Any]) -> Any:
    default = prop.get("default")
    default = None if default == "" else default
    options = choices(prop)
    kind = prop.get("type")
    if options is not None:
        made = [Option(value=value, label=clip(label, OPTION_TEXT_MAX)) for value, label in options]
        if is_multiple(prop):
            chosen = [o for o, (v, _) in zip(made, options) if v in (default or [])] or None
            if len(made) <= CHECKBOXES_MAX:
                return CheckboxesElement(action_id=VALUE, options=made, initial_options=chosen)
            return StaticMultiSelectElement(action_id=VALUE, options=made, initial_options=chosen,
                                            max_selected_items=prop.get("maxItems") or None,
                                            placeholder=_plain("Choose", 150))
        initial = next((o for o, (v, _) in zip(made, options) if v == default), None)
        return StaticSelectElement(action_id=VALUE, options=made, initial_option=initial,
                                   placeholder=_plain("Choose", 150))
    if kind == "boolean":
        box = Option(value="true", label="Yes")
        return CheckboxesElement(action_id=VALUE, options=[box], initial_options=[box] if default is True else None)
    if kind in ("integer", "number"):
        return NumberInputElement(action_id=VALUE, is_decimal_allowed=kind == "number",
                                  initial_value=default, min_value=prop.get("minimum"), max_value=prop.get("maximum"))
    fmt = prop.get("format")
    if fmt == "email":
        return EmailInputElement(action_id=VALUE, initial_value=default)
    if fmt == "uri":
        return UrlInputElement(action_id=VALUE, initial_value=default)
    if fmt == "date":
        return DatePickerElement(action_id=VALUE, initial_date=default)
    longest = min(int(prop.get("maxLength") or INPUT_MAX), INPUT_MAX)
    least = prop.get("minLength")
    return PlainTextInputElement(action_id=VALUE, initial_value=default, multiline=longest > 150,
                                 max_length=longest, min_length=min(int(least), longest) if least else None,
                                 placeholder=_plain("YYYY-MM-DDTHH:MM:SSZ", 150) if fmt == "date-time" else None)


def _raw(prop: dict[str, Any], state: dict[str, Any]) -> Any:
    if "selected_option" in state:
        chosen = state.get("selected_option")
        return chosen.get("value") if isinstance(chosen, dict) else None
    if "selected_options" in state:
        picked = state.get("selected_options") or []
        if not is_multiple(prop):
            return bool(picked)  # the one checkbox of a boolean
        if not isinstance(picked, list):
            return picked  # coerce says what is wrong with it
        return [o.get("value") if isinstance(o, dict) else o for o in picked]
    if "selected_date" in state:
        return state.get("selected_date")
    return state.get(VALUE) if VALUE in state else state.get("value")


def read_form(req: Request, values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(content typed per the schema, errors by block id) from a submitted form; errors mean nothing is sent."""
    content: dict[str, Any] = {}
    errors: dict[str, str] = {}
    fields = _fields(req)
    for name, prop, _ in fields:
        block = f"{FIELD_PREFIX}{name}"
        state = (values.get(block) or {}).get(VALUE)
        if not isinstance(state, dict):
            if prop.get("type") == "boolean":
                content[name] = False
            continue
        raw = _raw(prop, state)
        if isinstance(raw, str) and len(raw) > INPUT_MAX:
            errors[block] = f"must be at most {INPUT_MAX} characters"
            continue
        try:
            value = coerce(prop, raw)
        except ValueError as exc:
            errors[block] = str(exc)
            continue
        if value is not None:
            content[name] = value
        elif prop.get("type") == "boolean":
            content[name] = False
    if not errors:
        schema = _params(req).get("requested_schema") or {}
        first = f"{FIELD_PREFIX}{fields[0][0]}" if fields else "f:"
        for field, why in content_errors(schema, content).items():
            errors[f"{FIELD_PREFIX}{field}" if field else first] = why
    return content, errors
