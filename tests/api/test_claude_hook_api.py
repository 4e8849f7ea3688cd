"""POST /api/v1/hooks/claude-code over HTTP: every problem is a 200 deny in the event's shape (Claude Code
lets a call through on a non-2xx answer unless the hook says onFailure: block), and the options in the URL."""

from __future__ import annotations

from typing import Any

from tests.support.app import App

HOOK = "/api/v1/hooks/claude-code"


def bash(event: str = "PreToolUse", call_id: str | None = "toolu_api_1", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"session_id": "sess-api", "cwd": "/work", "hook_event_name": event, "tool_name": "Bash",
                            "tool_input": {"command": "rm -rf build"}, **extra}
    if call_id:
        body["tool_use_id"] = call_id
    return body


async def test_a_bad_token_is_a_deny_with_the_reason_in_the_events_shape(app: App) -> None:
    status, answer = await app.api("POST", HOOK + "?channel=C1", json=bash(), auth=False,
                                   headers={"Authorization": "Bearer wrong"})
    out = answer["hookSpecificOutput"]
    assert status == 200 and out["permissionDecision"] == "deny"
    assert "does not know the hook's bearer token" in out["permissionDecisionReason"]
    assert '"allowedEnvVars": ["SIGNOFF_TOKEN"]' in out["permissionDecisionReason"]  # Claude Code's own hook: its fix
    status, answer = await app.api("POST", HOOK, json=bash("PermissionRequest", None), auth=False)
    decision = answer["hookSpecificOutput"]["decision"]
    assert status == 200 and decision["behavior"] == "deny" and "carried no bearer token" in decision["message"]
    # `signoff hook` (its JSON carries what it saw locally) is told its own fix, not the HTTP hook's settings.
    status, answer = await app.api("POST", HOOK, json=bash(signoff_local={}), auth=False,
                                   headers={"Authorization": "Bearer wrong"})
    told = answer["hookSpecificOutput"]["permissionDecisionReason"]
    assert "SIGNOFF_TOKEN (or pass --token)" in told and "allowedEnvVars" not in told, told
    _, listing = await app.api("GET", "/api/v1/approvals")
    assert listing["items"] == []


async def test_bad_options_and_bad_input_are_denials_that_say_what_is_wrong(app: App) -> None:
    for query, body, expected in [
        ("?wait=forever", bash(), "wait must be a number of seconds"),
        ("?wait=5&wait=6", bash(), "given twice"),
        ("?colour=red", bash(), "unknown hook option 'colour'"),
        ("?on_timeout=maybe", bash(), "on_timeout must be one of"),
        ("", {"session_id": "s", "tool_name": "Bash"}, "tool_input: Field required"),
    ]:
        status, answer = await app.api("POST", HOOK + query, json=body)
        out = answer["hookSpecificOutput"]
        assert status == 200 and out["permissionDecision"] == "deny", (query, answer)
        assert expected in out["permissionDecisionReason"], (query, out)
    status, answer = await app.api("POST", HOOK, json=bash("Elicitation"))  # not an elicitation's input
    assert status == 200 and answer["hookSpecificOutput"] == {"hookEventName": "Elicitation", "action": "cancel"}
    assert "mcp_server_name: Field required" in answer["systemMessage"]


async def test_nobody_deciding_within_wait_is_a_deny_and_asking_again_finds_the_same_request(app: App) -> None:
    status, answer = await app.api("POST", HOOK + "?wait=0.2&channel=C1", json=bash())
    reason = answer["hookSpecificOutput"]["permissionDecisionReason"]
    assert status == 200 and "is still waiting for a decision" in reason
    _, listing = await app.api("GET", "/api/v1/approvals")
    [request] = listing["items"]
    assert request["summary"] == "Claude Code wants to run: rm -rf build" and request["channel"] == "C1"
    assert request["preview"]["kind"] == "markdown" and "rm -rf build" in request["preview"]["text"]
    await app.click(request["id"], "U1", user_name="alice")
    status, answer = await app.api("POST", HOOK + "?wait=5&channel=C1", json=bash())
    out = answer["hookSpecificOutput"]
    assert out["permissionDecision"] == "allow" and out["updatedInput"] == {"command": "rm -rf build"}
    assert "in Slack by alice" in out["permissionDecisionReason"]
    _, listing = await app.api("GET", "/api/v1/approvals")
    assert len(listing["items"]) == 1
    # `ask` hands the call to Claude Code's own prompt; a PermissionRequest's "ask" is no decision at all.
    _, answer = await app.api("POST", HOOK + "?wait=0&on_timeout=ask&channel=C1", json=bash(call_id="toolu_api_2"))
    assert answer["hookSpecificOutput"]["permissionDecision"] == "ask"
    _, answer = await app.api("POST", HOOK + "?wait=0&on_timeout=ask&channel=C1", json=bash("PermissionRequest", None))
    assert answer == {}


async def test_post_tool_use_failure_reports_the_failure_once_and_leaves_unknown_calls_alone(app: App) -> None:
    """The receipt over the HTTP hook: the request the call's key names gets `failed` with the error;
    a call Signoff never asked about, or one without an id, is answered `{}` and changes nothing."""
    status, answer = await app.api("POST", HOOK + "?wait=0.2&channel=C1", json=bash(call_id="toolu_api_fail"))
    assert status == 200 and "still waiting" in answer["hookSpecificOutput"]["permissionDecisionReason"]
    _, listing = await app.api("GET", "/api/v1/approvals")
    [request] = listing["items"]
    await app.click(request["id"], "U1", user_name="alice")
    status, answer = await app.api("POST", HOOK + "?wait=5&channel=C1", json=bash(call_id="toolu_api_fail"))
    assert answer["hookSpecificOutput"]["permissionDecision"] == "allow"
    assert "signoff" not in answer  # the HTTP hook's answer is Claude Code's alone (no signed request riding along)
    failure = bash("PostToolUseFailure", "toolu_api_fail", error="Exit code 1\nrm: cannot remove 'build'")
    for _ in range(2):  # a retried hook: the same report, recorded once
        status, answer = await app.api("POST", HOOK, json=failure)
        assert status == 200 and answer == {}
    _, body = await app.api("GET", f"/api/v1/approvals/{request['id']}")
    assert body["outcome_status"] == "failed" and "cannot remove 'build'" in body["outcome"]["error"], body
    assert body["outcome"]["params"] == {"command": "rm -rf build"}
    for unknown in (bash("PostToolUse", "toolu_never_asked", tool_response={"stdout": ""}), bash("PostToolUse", None)):
        status, answer = await app.api("POST", HOOK, json=unknown)
        assert status == 200 and answer == {}
    _, listing = await app.api("GET", "/api/v1/approvals")
    assert [i["id"] for i in listing["items"]] == [request["id"]]
    assert app.signoff is not None
    assert [e.type for e in await app.signoff.store.audit_events(request["id"])].count("run_failed") == 1
