"""`@require_approval`: a function that runs only once a person approved the call, with their edits.

The call's arguments are the proposal; their JSON Schema comes from the type hints (so Slack's Edit
form offers typed fields and checks edits against them); the function then runs with the approved
parameters, validated and converted back to the hinted types. A rejection raises `Rejected` and the
function never runs. Works on plain and `async def` functions.

After it ran, what ran is reported to Signoff (an execution receipt: `ran` with the parameters used and
a short result, or `failed` with the error, which is then raised as before); `report=False` turns that
off. A report that cannot be delivered is logged, never raised: the function already ran.

`state`, a function of the arguments returning what the preview is computed from (a content hash, an
etag, a version), binds the approval to it: it is sent with the request, computed again (with the
approved arguments) just before the function runs, and when it changed the function does not run:
the old request is reported `skipped` and the person is asked again with a new preview, saying so
(at most MAX_ASKS times, then `StateChanged`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast, get_type_hints

from pydantic import BaseModel, ConfigDict, create_model
from pydantic_core import to_jsonable_python

from signoff.client import AsyncSignoffClient, SignoffClient
from signoff.errors import SignoffError, StateChanged
from signoff.models import Decision

F = TypeVar("F", bound=Callable[..., Any])
Summary = str | Callable[..., str] | None
PreviewFn = Callable[..., Mapping[str, Any] | None] | None
StateFn = Callable[..., str | None] | None
MAX_ASKS = 3


def changed_note(request_id: str) -> str:
    """The context line of a request asked again because the state its approval was made on changed."""
    return (f"Asked again: what the preview was computed from changed since it was approved ({request_id}). "
            "This is the new preview.")


def skipped_error(before: str | None, now: str | None) -> str:
    return f"not run: the state it was approved on changed ({before} -> {now}); asked again"


def params_schema(fn: Callable[..., Any]) -> tuple[type[BaseModel], dict[str, Any]]:
    """A pydantic model of `fn`'s parameters and its JSON Schema (titles dropped: Slack shows the names)."""
    signature = inspect.signature(fn)
    hints = get_type_hints(fn)
    fields: dict[str, Any] = {}
    for name, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(f"@require_approval: {fn.__qualname__} takes *args, **kwargs or positional-only "
                            f"parameters ({name}); name every parameter so a person can review it")
        default = ... if param.default is param.empty else param.default
        fields[name] = (hints.get(name, Any), default)
    model = create_model(f"{fn.__name__}_params", __config__=ConfigDict(extra="forbid"), **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    schema["additionalProperties"] = False
    return model, schema


def require_approval(*, risk: str | None = None, summary: Summary = None, preview: PreviewFn = None,
                     channel: str | None = None, approvers: list[str] | None = None, action: str | None = None,
                     timeout: float | None = None, client: SignoffClient | AsyncSignoffClient | None = None,
                     state: StateFn = None, report: bool = True) -> Callable[[F], F]:
    """Gate a function behind a person's approval in Slack.

    `summary` is a string (`str.format`-ed with the arguments, e.g. "Refund {amount} to {customer}") or a
    function of the arguments; `preview` a function of the arguments returning a preview mapping
    (`{"kind": "email", ...}`). `client` defaults to one built from SIGNOFF_URL / SIGNOFF_TOKEN for each
    call. The idempotency key is new per call: calling twice asks twice. `state` and `report`: see the
    module docstring.
    """

    def decorate(fn: F) -> F:
        model, schema = params_schema(fn)
        name = action or fn.__name__
        signature = inspect.signature(fn)

        def proposal(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[dict[str, Any], str, Any]:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            params = cast(dict[str, Any], to_jsonable_python(dict(bound.arguments)))
            if summary is None:
                text = f"Run {name}"
            elif callable(summary):
                text = summary(**bound.arguments)
            else:
                text = summary.format(**bound.arguments)
            shown = preview(**bound.arguments) if preview is not None else None
            return params, text, shown

        def state_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
            if state is None:
                return None
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return state(**bound.arguments)

        def run_with(decided: dict[str, Any]) -> dict[str, Any]:
            # Edits arrive as JSON; the model checks them and turns them back into the hinted types.
            validated = model.model_validate(decided)
            return {field: getattr(validated, field) for field in signature.parameters}

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                params, text, shown = proposal(args, kwargs)
                if client is not None and not isinstance(client, AsyncSignoffClient):
                    raise SignoffError(f"{fn.__qualname__} is async: give @require_approval an AsyncSignoffClient")
                async with contextlib.AsyncExitStack() as stack:
                    chosen = client if client is not None else await stack.enter_async_context(AsyncSignoffClient())
                    note: str | None = None
                    for _ in range(MAX_ASKS):
                        decision = await chosen.request_approval(
                            name, params, summary=text, preview=shown, risk=risk, params_schema=schema,
                            channel=channel, approvers=approvers, timeout=timeout, context=note,
                            state=state_of(args, kwargs))
                        arguments = run_with(decision.params)
                        now = state(**arguments) if state is not None else None
                        if now == decision.state:
                            break
                        await chosen.report_quietly(decision.request_id, "skipped",
                                                    error=skipped_error(decision.state, now))
                        note = changed_note(decision.request_id)
                        params, text, shown = proposal(args, kwargs)  # the new preview, of the world as it is now
                    else:
                        raise StateChanged(f"{fn.__qualname__}: the state kept changing after each approval; "
                                           "nothing ran", request_id=decision.request_id)
                    try:
                        result = await fn(**arguments)
                    except Exception as exc:
                        if report:
                            await chosen.report_quietly(decision.request_id, "failed", params=decision.params,
                                                        error=f"{type(exc).__name__}: {exc}")
                        raise
                    if report:
                        await chosen.report_quietly(decision.request_id, "ran", params=decision.params, result=result)
                return result

            async_wrapper.params_schema = schema  # type: ignore[attr-defined]
            return cast(F, async_wrapper)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            params, text, shown = proposal(args, kwargs)
            if client is not None and not isinstance(client, SignoffClient):
                raise SignoffError(f"{fn.__qualname__} is not async: give @require_approval a SignoffClient")
            with contextlib.ExitStack() as stack:
                chosen = client if client is not None else stack.enter_context(SignoffClient())
                note: str | None = None
                for _ in range(MAX_ASKS):
                    decision = chosen.request_approval(
                        name, params, summary=text, preview=shown, risk=risk, params_schema=schema,
                        channel=channel, approvers=approvers, timeout=timeout, context=note,
                        state=state_of(args, kwargs))
                    arguments = run_with(decision.params)
                    now = state(**arguments) if state is not None else None
                    if now == decision.state:
                        break
                    chosen.report_quietly(decision.request_id, "skipped", error=skipped_error(decision.state, now))
                    note = changed_note(decision.request_id)
                    params, text, shown = proposal(args, kwargs)  # the new preview, of the world as it is now
                else:
                    raise StateChanged(f"{fn.__qualname__}: the state kept changing after each approval; nothing ran",
                                       request_id=decision.request_id)
                try:
                    result = fn(**arguments)
                except Exception as exc:
                    if report:
                        chosen.report_quietly(decision.request_id, "failed", params=decision.params,
                                              error=f"{type(exc).__name__}: {exc}")
                    raise
                if report:
                    chosen.report_quietly(decision.request_id, "ran", params=decision.params, result=result)
                return result

        wrapper.params_schema = schema  # type: ignore[attr-defined]
        return cast(F, wrapper)

    return decorate
