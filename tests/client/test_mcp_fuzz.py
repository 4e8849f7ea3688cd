"""Property: any JSON-RPC body or tool arguments sent to /mcp over HTTP, with a valid or an invalid token,
is answered without a 5xx and logs nothing at ERROR; a refused call (bad token, a JSON-RPC error) writes
nothing."""

from __future__ import annotations

import pytest

import asyncio
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.support.fuzz import FUZZ_SETTINGS, ErrorLog, in_thread
from tests.api.test_api_fuzz import json_values, rows
from tests.support.app import API_TOKEN, App

pytestmark = pytest.mark.fuzz

METHODS = ["initialize", "ping", "tools/list", "tools/call", "resources/list", "prompts/list",
           "notifications/initialized", "nope", ""]
TOOLS = ["request_approval", "ask_human", "permission_prompt", "nope"]
GOOD_ARGS = {
    "request_approval": {"action": "deploy", "params": {"env": "prod"}, "summary": "Deploy", "channel": "C1"},
    "ask_human": {"questions": [{"question": "Which?", "options": [{"label": "a"}, {"label": "b"}]}],
                  "channel": "C1"},
    "permission_prompt": {"tool_name": "Bash", "input": {"command": "ls"}},
    "nope": {},
}


@st.composite
def bodies(draw: st.DrawFn, token_ok: bool) -> Any:
    if draw(st.integers(0, 5)) == 0:
        return draw(st.one_of(json_values, st.binary(max_size=100)))
    method = draw(st.sampled_from(METHODS))
    well_formed = draw(st.integers(0, 3)) > 0  # mostly a valid envelope, so the tools themselves are reached
    body: dict[str, Any] = {"jsonrpc": "2.0" if well_formed else draw(st.sampled_from(["1.0", 2, None])),
                            "method": method,
                            "id": draw(st.integers(1, 10**6) if well_formed else st.one_of(st.text(max_size=5),
                                                                                          st.none()))}
    if method == "initialize":
        body["params"] = draw(st.one_of(json_values, st.just(
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "f", "version": "1"}})))
    elif method == "tools/call":
        tool = draw(st.sampled_from(TOOLS))
        args = dict(GOOD_ARGS[tool])
        for key, value in draw(st.lists(st.tuples(st.sampled_from([*args, "risk", "approvers", "timeout_seconds",
                                                                   "preview", "x"]), json_values), max_size=3)):
            args[key] = value
        if token_ok and tool == "permission_prompt":
            tool = "nope"  # it waits for a person (no timeout argument); its arguments are fuzzed unauthenticated
        if token_ok:
            args["timeout_seconds"] = 0.05  # a valid call is cancelled at once instead of waiting for a person
        body["params"] = {"name": tool, "arguments": args}
    else:
        body["params"] = draw(json_values)
    return body


async def post(app: App, body: Any, token: str) -> tuple[int, str]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    async with app.session.post(app.url + "/mcp", data=raw, headers=headers) as resp:
        return resp.status, await resp.text()


async def test_mcp_bodies_never_500_and_refusals_write_nothing(app: App) -> None:
    loop = asyncio.get_running_loop()
    seen: dict[int, int] = {}

    @FUZZ_SETTINGS
    @given(token_ok=st.booleans(), data=st.data())
    def check(call: Any, token_ok: bool, data: st.DataObject) -> None:
        body = data.draw(bodies(token_ok))
        before = call(rows(app))
        status, answer = call(post(app, body, API_TOKEN if token_ok else "not-the-token"))
        seen[status] = seen.get(status, 0) + 1
        assert status < 500, (body, answer[:500])
        if not token_ok:
            assert status == 401, (body, answer[:500])
        refused = not token_ok or status >= 400 or '"error":{"code"' in answer.replace(" ", "")
        if refused:
            assert call(rows(app)) == before, (body, answer[:500])

    with ErrorLog() as errors:
        await in_thread(loop, lambda call: check(call))
        assert errors.take() == []
    print(f"\nMCP fuzz: {sum(seen.values())} requests, answers by status: {dict(sorted(seen.items()))}")
    assert seen.get(401, 0) > 0 and seen.get(200, 0) > 0
