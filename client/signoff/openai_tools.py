"""The run's context as Signoff uses it in an OpenAI Agents SDK run, and the wrapper of gated tools.

- `RUN_KEY`: the run's id, which each policy check sends as its `session` (grants "for this run").
- `EDITS_KEY`: a person's edited parameters, by call id (the SDK's `ToolContext` pattern); a gated tool
  runs with them (`carrying_edits`), validated by its own schema, and says how each call ended (the
  execution receipt).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Mapping
from typing import Any

from signoff.errors import SignoffError
from signoff.openai_runs import EDITS_KEY, RUN_KEY

log = logging.getLogger("signoff.openai")


def approved_args(ctx: Any) -> dict[str, Any] | None:
    """The parameters a person approved for this call, when they edited them (else None).

    `ctx`: the SDK's `ToolContext` (a tool taking `ctx: ToolContext[...]` as its first parameter):
    read from its run context by `ctx.tool_call_id`. Gated tools (`Approvals.tool`) apply them
    themselves; this is for tools that read them by hand."""
    edits = _edits_of(getattr(ctx, "context", None))
    found = edits.get(str(getattr(ctx, "tool_call_id", ""))) if edits else None
    return dict(found) if isinstance(found, Mapping) else None


def _edits_of(context: Any) -> Mapping[str, Any] | None:
    if isinstance(context, Mapping):
        found = context.get(EDITS_KEY)
    else:
        found = getattr(context, EDITS_KEY, None)
    return found if isinstance(found, Mapping) else None


def run_of(context: Any) -> str | None:
    """The run id a run's context names (`RUN_KEY`), or None."""
    found = context.get(RUN_KEY) if isinstance(context, Mapping) else getattr(context, RUN_KEY, None)
    return found if isinstance(found, str) and found else None


def with_run(context: Any, run_id: str) -> Any:
    """The run's context naming the run: a mapping (or None) as a new dict with `RUN_KEY`, an object
    with that attribute where it takes one (else as it is: its policy checks then name no run)."""
    if context is None or isinstance(context, Mapping):
        return {**(context or {}), RUN_KEY: run_id}
    try:
        setattr(context, RUN_KEY, run_id)
    except AttributeError:
        log.info("the run's context (%s) cannot name the run: grants for this run do not apply to it",
                 type(context).__name__)
    return context


def with_edits(context: Any, edits: Mapping[str, dict[str, Any]]) -> Any:
    """The run's context carrying `edits` (merged with any an earlier turn left)."""
    merged = {**(_edits_of(context) or {}), **edits}
    if context is None or isinstance(context, Mapping):
        return {**(context or {}), EDITS_KEY: merged}
    try:
        setattr(context, EDITS_KEY, merged)
    except AttributeError as exc:
        raise SignoffError(f"a person edited a call, and the run's context ({type(context).__name__}) cannot carry "
                           f"the edits: use a dict context, or give it a `{EDITS_KEY}` attribute") from exc
    return context


def carrying_edits(func: Callable[..., Any], options: Mapping[str, Any],
                   ran: Callable[[Any, Any, BaseException | None], None]) -> Callable[..., Any]:
    """`func`, run with the parameters a person approved when they edited them (read from the run's
    context by the call's id: the SDK's `ToolContext` pattern), validated by the same schema the SDK
    builds from `func`. Everything else is `func`'s own: its schema, its docstring, sync or async (the
    SDK runs a sync tool in a thread), and whether it takes the context itself. `ran(ctx, result, error)`
    hears how each call ended (the execution receipt), before the SDK sees it."""
    from agents.function_schema import function_schema
    from agents.tool_context import ToolContext

    schema = function_schema(func, docstring_style=options.get("docstring_style"),
                             name_override=options.get("name_override"),
                             use_docstring_info=options.get("use_docstring_info", True),
                             strict_json_schema=options.get("strict_mode", True))
    takes_context = schema.takes_context

    def arguments(ctx: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        edited = approved_args(ctx)
        if edited is not None:
            args_list, kwargs = schema.to_call_args(schema.params_pydantic_model(**edited))
            args = tuple(args_list)
        return ((ctx, *args) if takes_context else args), kwargs

    wrapper: Callable[..., Any]
    if inspect.iscoroutinefunction(func):
        async def run_async(ctx: Any, *args: Any, **kwargs: Any) -> Any:
            call_args, call_kwargs = arguments(ctx, args, kwargs)
            try:
                result = await func(*call_args, **call_kwargs)
            except Exception as exc:
                ran(ctx, None, exc)
                raise
            ran(ctx, result, None)
            return result

        wrapper = run_async
    else:
        def run_sync(ctx: Any, *args: Any, **kwargs: Any) -> Any:
            call_args, call_kwargs = arguments(ctx, args, kwargs)
            try:
                result = func(*call_args, **call_kwargs)
            except Exception as exc:
                ran(ctx, None, exc)
                raise
            ran(ctx, result, None)
            return result

        wrapper = run_sync
    functools.update_wrapper(wrapper, func)
    if not takes_context:  # the SDK hands the ToolContext to a first parameter annotated with it
        signature = inspect.signature(func)
        first = inspect.Parameter("signoff_tool_context", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=ToolContext)
        setattr(wrapper, "__signature__", signature.replace(parameters=[first, *signature.parameters.values()]))
        wrapper.__annotations__ = {"signoff_tool_context": ToolContext, **getattr(func, "__annotations__", {})}
    return wrapper
