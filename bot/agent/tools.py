"""Tools the agent runner can call: plain Python functions registered with a decorator.

    tools = Toolset()

    @tools.tool(risk=Risk.HIGH, preview=email_preview)
    async def send_email(ctx: ToolContext, to: str, subject: str, body: str) -> str:
        '''Send an email.

        Args:
            to: the recipient's address
        '''

The input JSON Schema comes from the type hints (str, int, float, bool, list[...], dict,
Literal[...], X | None, Annotated[T, "description"]); parameter descriptions come from
`Annotated` or the docstring's Args section, a str's `format` from `Annotated[str, EMAIL]`
(EMAIL, URI, DATE_TIME, DATE: a person's edit in Slack must match it). A parameter typed
`ToolContext` receives the run's context and is not part of the schema.

Risk decides the gate (low: allowed and audited; medium: allowed with an FYI in the thread;
high and critical: a person decides). Without an explicit risk, `read_only` means low,
`destructive` critical, anything else high. `idempotent` (default: `read_only`) says whether
an execution interrupted by a crash may simply be run again.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, overload

import jsonschema

from bot.domain.formats import KNOWN as KNOWN_FORMATS
from bot.domain.model import Preview, Risk
from bot.outbox.egress import EgressPolicy

MAX_RESULT_CHARS = 20_000

F = TypeVar("F", bound=Callable[..., Any])


class ToolError(Exception):
    """An expected failure of a tool; its message is what the model reads (as an error result)."""


@dataclass(frozen=True)
class ToolContext:
    """What a tool may use besides its input: the run's folders and identifiers."""

    workspace: Path
    email_outbox: Path
    run_id: str = ""
    tool_use_id: str = ""
    http_timeout: float = 30.0
    egress: EgressPolicy = field(default_factory=EgressPolicy)  # where URLs the model chose may lead


@dataclass(frozen=True)
class Format:
    """A str parameter's JSON Schema `format`: `Annotated[str, "the recipient", EMAIL]`.

    The model reads it in the tool's schema, and a person's edit in Slack is checked against it
    (bot/domain/formats.py says what each accepts)."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in KNOWN_FORMATS:
            raise ValueError(f"format {self.name!r} is not one of {', '.join(KNOWN_FORMATS)}")


EMAIL, URI, DATE_TIME, DATE = Format("email"), Format("uri"), Format("date-time"), Format("date")

PreviewFn = Callable[[ToolContext, dict[str, Any]], Preview | None]
SummaryFn = Callable[[dict[str, Any]], str]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    risk: Risk
    idempotent: bool
    fn: Callable[..., Any] | None = None
    read_only: bool = False
    destructive: bool = False
    preview: PreviewFn | None = None
    summary: SummaryFn | None = None
    context_param: str | None = None
    timeout: float = 120.0
    kind: str = "function"  # "question" for ask_human: answered by a person, never executed

    def definition(self) -> dict[str, Any]:
        """The tool as the Messages API declares it."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}

    def validate(self, params: Any) -> str | None:
        """None if `params` fit the input schema, else a short reason the model can act on."""
        if not isinstance(params, dict):
            return "the input must be a JSON object"
        validator = jsonschema.Draft202012Validator(self.input_schema)
        problems = sorted(validator.iter_errors(params), key=lambda e: list(e.absolute_path))
        if not problems:
            return None
        described = []
        for error in problems[:5]:
            where = ".".join(str(p) for p in error.absolute_path)
            described.append(f"{where}: {error.message}" if where else error.message)
        return "invalid input: " + "; ".join(described)

    def summarize(self, params: dict[str, Any]) -> str:
        if self.summary is not None:
            try:
                return self.summary(params)
            except Exception:  # a summary must never stop a request; fall back to the generic one
                pass
        shown = ", ".join(f"{k}={_short(v)}" for k, v in list(params.items())[:4])
        return f"{self.name}({shown})"

    def build_preview(self, ctx: ToolContext, params: dict[str, Any]) -> Preview | None:
        if self.preview is None:
            return None
        try:
            return self.preview(ctx, params)
        except Exception as exc:  # the card still shows the parameters; say why there is no preview
            return Preview("markdown", {"text": f"(no preview: {type(exc).__name__}: {exc})"})

    async def run(self, ctx: ToolContext, params: dict[str, Any]) -> str:
        """Call the function; its return value becomes the result text. ToolError passes through."""
        if self.fn is None:
            raise ToolError(f"{self.name} cannot be executed")
        kwargs = dict(params)
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        async with asyncio.timeout(self.timeout):
            if inspect.iscoroutinefunction(self.fn):
                value = await self.fn(**kwargs)
            else:  # plain functions do blocking I/O: off the event loop, which must keep acking Slack
                value = await asyncio.to_thread(self.fn, **kwargs)
                if inspect.isawaitable(value):
                    value = await value
        return result_text(value)


def result_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if not text:
        return "(no output)"
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n… {len(text) - MAX_RESULT_CHARS:,} more characters not shown"
    return text


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:59] + "…"


@dataclass
class Toolset:
    """An ordered registry of tools (the order is the order the model sees them in)."""

    tools: dict[str, Tool] = field(default_factory=dict)

    def add(self, tool: Tool) -> Tool:
        if tool.name in self.tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        if not re.fullmatch(r"[a-zA-Z0-9_-]{1,128}", tool.name):
            raise ValueError(f"tool name {tool.name!r} must match [a-zA-Z0-9_-]{{1,128}}")
        self.tools[tool.name] = tool
        return tool

    @overload
    def tool(self, fn: F) -> F: ...

    @overload
    def tool(
        self, fn: None = None, *, name: str | None = None, description: str | None = None, risk: Risk | None = None,
        read_only: bool = False, destructive: bool = False, idempotent: bool | None = None,
        preview: PreviewFn | None = None, summary: SummaryFn | None = None, schema: dict[str, Any] | None = None,
        timeout: float = 120.0,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        fn: F | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        risk: Risk | None = None,
        read_only: bool = False,
        destructive: bool = False,
        idempotent: bool | None = None,
        preview: PreviewFn | None = None,
        summary: SummaryFn | None = None,
        schema: dict[str, Any] | None = None,
        timeout: float = 120.0,
    ) -> F | Callable[[F], F]:
        """Register `fn` as a tool (usable bare, `@tools.tool`, or with options)."""

        def register(func: F) -> F:
            inferred, context_param = input_schema(func)
            self.add(Tool(
                name=name or func.__name__,
                description=description or _description(func),
                input_schema=schema or inferred,
                risk=risk or (Risk.CRITICAL if destructive else Risk.LOW if read_only else Risk.HIGH),
                idempotent=read_only if idempotent is None else idempotent,
                fn=func,
                read_only=read_only,
                destructive=destructive,
                preview=preview,
                summary=summary,
                context_param=context_param,
                timeout=timeout,
            ))
            return func

        return register(fn) if fn is not None else register

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools.values())

    def definitions(self) -> list[dict[str, Any]]:
        return [t.definition() for t in self.tools.values()]


# --------------------------------------------------------------------------- schema from hints


def input_schema(fn: Callable[..., Any]) -> tuple[dict[str, Any], str | None]:
    """(JSON Schema of `fn`'s parameters, the name of its ToolContext parameter if any)."""
    hints = typing.get_type_hints(fn, include_extras=True)
    docs = _arg_docs(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    context_param = None
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{fn.__name__}: *args/**kwargs cannot be described to the model")
        hint = hints.get(param.name, Any)
        if hint is ToolContext:
            context_param = param.name
            continue
        prop = _schema_for(hint, f"{fn.__name__}.{param.name}")
        if param.name in docs and "description" not in prop:
            prop["description"] = docs[param.name]
        if param.default is not inspect.Parameter.empty:
            if param.default is not None:
                prop["default"] = param.default
        else:
            required.append(param.name)
        properties[param.name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema, context_param


_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _schema_for(hint: Any, where: str) -> dict[str, Any]:
    origin, args = get_origin(hint), get_args(hint)
    if origin is typing.Annotated:
        prop = _schema_for(args[0], where)
        text = next((a for a in args[1:] if isinstance(a, str)), None)
        if text:
            prop["description"] = text
        fmt = next((a for a in args[1:] if isinstance(a, Format)), None)
        if fmt is not None:
            if prop.get("type") != "string":
                raise TypeError(f"{where}: a format applies to a str parameter")
            prop["format"] = fmt.name  # the edit form checks a person's edit against it
        return prop
    if hint in _SIMPLE:
        return {"type": _SIMPLE[hint]}
    if hint is Any:
        return {}
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _schema_for(options[0], where)  # X | None: optional, its default says so
        return {"anyOf": [_schema_for(a, where) for a in options]}
    if hint is list or origin is list:
        return {"type": "array", "items": _schema_for(args[0], where)} if args else {"type": "array"}
    if hint is dict or origin is dict:
        if len(args) == 2 and args[1] is not Any:
            return {"type": "object", "additionalProperties": _schema_for(args[1], where)}
        return {"type": "object"}
    raise TypeError(f"{where}: cannot describe type {hint!r} as JSON Schema")


def _description(fn: Callable[..., Any]) -> str:
    doc = inspect.getdoc(fn) or ""
    head = doc.split("\n\n", 1)[0].strip()
    return " ".join(head.split()) or fn.__name__.replace("_", " ")


def _arg_docs(fn: Callable[..., Any]) -> dict[str, str]:
    """`name: text` lines of a Google-style "Args:" section."""
    doc = inspect.getdoc(fn) or ""
    match = re.search(r"^Args:\s*\n((?:[ \t]+.*\n?)+)", doc, re.MULTILINE)
    if not match:
        return {}
    found: dict[str, str] = {}
    current = None
    for line in match.group(1).splitlines():
        item = re.match(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
        if item:
            current = item.group(1)
            found[current] = item.group(2).strip()
        elif current and line.strip():
            found[current] += " " + line.strip()
    return found

