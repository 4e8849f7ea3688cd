"""Property: any body POSTed to the agent API is answered without a 5xx, and a refused one writes nothing."""

from __future__ import annotations

import pytest

import asyncio
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.support.fuzz import FUZZ_SETTINGS, ErrorLog, in_thread
from tests.support.app import App, approval_body

pytestmark = pytest.mark.fuzz

FIELDS = ["action", "name", "params", "params_schema", "summary", "context", "preview", "kind", "risk", "channel",
          "approvers", "callback_url", "requested_by", "reminders", "escalation", "timeout", "task", "agent",
          "questions", "options", "label", "question", "reason", "pattern", "type", "properties", "every",
          "levels", "after", "notify", "max", "outcome", "value", "to", "subject", "body", "unified", "text"]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40), st.sampled_from(["high", "low", "critical", "C1", "U1", "S1", "10m", "off", "object",
                                           "string", "^(a+)+$", "http://127.0.0.1/x", "email", "json", ""]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=8)), inner,
                                            max_size=5)),
    max_leaves=25,
)


def mutated(base: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """`base` with some fields replaced, removed or added: close enough to valid to reach deep code."""
    def apply(edits: list[tuple[str, int, Any]]) -> dict[str, Any]:
        body = json.loads(json.dumps(base))
        for path, op, value in edits:
            target, key = body, path
            if "." in path:
                outer, key = path.split(".", 1)
                if not isinstance(body.get(outer), dict):
                    continue
                target = body[outer]
            if op == 0:
                target.pop(key, None)
            else:
                target[key] = value
        return body
    keys = sorted(base) + [f"action.{k}" for k in ("name", "params", "params_schema")] + ["extra"]
    return st.lists(st.tuples(st.sampled_from(keys), st.integers(0, 2), json_values), max_size=4).map(apply)


BODIES = {
    "/api/v1/approvals": mutated(approval_body(callback_url=None)),
    "/api/v1/runs": mutated({"task": "tidy up", "channel": "C1", "requested_by": "bot"}),
    "/api/v1/questions": mutated({"questions": [{"question": "Which?", "options": [{"label": "a"}, {"label": "b"}]}],
                                  "channel": "C1"}),
}


async def rows(app: App) -> tuple[int, int]:
    """(requests, runs) stored. (The outbox is not counted: accepted requests keep adding to it.)"""
    assert app.signoff is not None
    async with app.signoff.store.engine.connect() as conn:
        requests = (await conn.exec_driver_sql("SELECT count(*) FROM requests")).scalar()
        runs = (await conn.exec_driver_sql("SELECT count(*) FROM runs")).scalar()
    return int(requests or 0), int(runs or 0)


async def test_api_bodies_never_500_and_refusals_write_nothing(app: App) -> None:
    loop = asyncio.get_running_loop()
    seen: dict[int, int] = {}
    raw_bodies = st.one_of(st.binary(max_size=200), json_values.map(lambda v: json.dumps(v).encode()))

    @FUZZ_SETTINGS
    @given(path=st.sampled_from(sorted(BODIES)), data=st.data())
    def check(call: Any, path: str, data: st.DataObject) -> None:
        if data.draw(st.integers(0, 4)) == 0:
            raw = data.draw(raw_bodies)
        else:
            raw = json.dumps(data.draw(BODIES[path])).encode()
        before = call(rows(app))
        status, answer = call(app.api("POST", path, data=raw, headers={"Content-Type": "application/json"}))
        seen[status] = seen.get(status, 0) + 1
        assert status < 500, (path, raw[:500], answer)
        if status >= 400:
            assert isinstance(answer, dict) and answer["error"]["message"], answer
            assert call(rows(app)) == before, (path, raw[:500], answer)

    with ErrorLog() as errors:
        await in_thread(loop, lambda call: check(call))
        assert errors.take() == []
    print(f"\nAPI fuzz: {sum(seen.values())} requests, answers by status: {dict(sorted(seen.items()))}")
    assert seen.get(201, 0) > 0 and sum(v for k, v in seen.items() if 400 <= k < 500) > 0  # both kinds reached
