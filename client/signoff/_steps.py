"""Control flow written once, run by a blocking driver or by an asyncio one.

A step function is a generator: it yields `Call`s (a method to call on one of the driver's objects:
"client", "graph", "driver") and receives each call's result, or its exception thrown in at the
`yield`, then returns its value. `run` makes the calls as they are; `arun` awaits the ones that
return awaitables. So the LangGraph resumer decides everything in one place (signoff.langgraph_resume)
and its blocking and asyncio forms differ only in the objects they hand in (a `SignoffClient` or an
`AsyncSignoffClient`, a graph's `invoke` or its `ainvoke`) and in how they wait.
"""

from __future__ import annotations

import inspect
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    on: str
    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


Steps = Generator[Call, Any, T]


def call(on: str, method: str, *args: Any, **kwargs: Any) -> Call:
    return Call(on, method, args, kwargs)


def run(steps: Steps[T], targets: Mapping[str, Any]) -> T:
    """Drive `steps` to their end, making each call as it is."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            wanted = steps.throw(error) if error is not None else steps.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            result, error = getattr(targets[wanted.on], wanted.method)(*wanted.args, **wanted.kwargs), None
        except Exception as exc:  # handed to the step that asked, which may handle it
            result, error = None, exc


async def arun(steps: Steps[T], targets: Mapping[str, Any]) -> T:
    """Drive `steps` to their end, awaiting each call that returns an awaitable."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            wanted = steps.throw(error) if error is not None else steps.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            result = getattr(targets[wanted.on], wanted.method)(*wanted.args, **wanted.kwargs)
            if inspect.isawaitable(result):
                result = await result
            error = None
        except Exception as exc:
            result, error = None, exc
