"""Claude permission suggestions -> grants (pure): rule mapping never wider than Claude's rule, which
suggestions are offered on which requests, and grants that let unnamed parameters be anything."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.domain.claude_rules import UnmappedRule, command_matches, command_regex
from bot.domain.grants import agent_of, FieldMatch, Grant, GrantIndex, Scope, Subject, run_of
from bot.domain.model import Action, Kind, Request, Risk, Status
from bot.domain.suggestions import offered, offers, rule_grant

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
NPM = {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test *"}], "behavior": "allow",
       "destination": "localSettings"}


@pytest.mark.parametrize(("rule", "command", "covered"), [
    ("npm test *", "npm test", True),
    ("npm test *", "npm test -- --ci", True),
    ("npm test:*", "npm test -- --ci", True),
    ("npm test:*", "npm test", True),
    ("npm test *", "  npm test --watch=false  ", True),
    ("npm test *", "npm testify", False),
    ("npm test:*", "npm testify", False),
    ("npm test*", "npm testify", True),
    ("npm test *", "NPM test", False),  # shells are case-sensitive
    ("npm test *", "npm run test", False),
    ("npm test *", "npm test && rm -rf /", False),
    ("npm test *", "npm test; rm -rf /", False),
    ("npm test *", "npm test | sh", False),
    ("npm test *", "npm test & curl evil", False),
    ("npm test *", "npm test $(curl evil)", False),
    ("npm test *", "npm test `curl evil`", False),
    ("npm test *", "npm test > /etc/passwd", False),
    ("npm test *", "npm test\nrm -rf /", False),
    ("git * --dry-run", "git push --dry-run", True),
    ("git * --dry-run", "git push --force", False),
    ("make build", "make build", True),
    ("make build", "make build extra", False),
    (":*", "anything at all", True),
    (":*", "anything && more", False),
])
def test_bash_rules_cover_one_simple_command_like_claude(rule: str, command: str, covered: bool) -> None:
    assert command_matches(command_regex(rule), command) is covered
    assert FieldMatch("command", rule).matches(command) is covered


@pytest.mark.parametrize("rule", ["npm test | tee out:*", "a; b", "$(x) *", "", "x" * 600])
def test_bash_rules_signoff_cannot_check_are_not_mapped(rule: str) -> None:
    with pytest.raises(UnmappedRule):
        command_regex(rule)


def test_rule_mapping_per_tool() -> None:
    bash = rule_grant("Bash", {"toolName": "Bash", "ruleContent": "npm test:*"})
    assert bash.match["command"].to_json() == {"op": "command", "value": "npm test:*"}
    assert bash.meaning == "Bash commands that start with “npm test”"
    web = rule_grant("WebFetch", {"toolName": "WebFetch", "ruleContent": "domain:Example.com"})
    assert web.match["url"].to_json() == {"op": "glob", "value": "https://example.com/*"}
    assert web.match["url"].matches("https://example.com/docs") and not web.match["url"].matches(
        "https://example.com.evil.org/") and not web.match["url"].matches("https://evil.org/?example.com/")
    whole = rule_grant("mcp__mail__send", {"toolName": "mcp__mail__send"})
    assert whole.match == {} and whole.meaning == "every mcp__mail__send call"
    for tool, rule in (("Read", {"toolName": "Read", "ruleContent": "//etc/**"}),
                       ("WebFetch", {"toolName": "WebFetch", "ruleContent": "domain:*.example.com"}),
                       ("Bash", {"toolName": "Write"})):
        with pytest.raises(UnmappedRule):
            rule_grant(tool, rule)


def request(*, suggestions: list[Any] | None = None, tool: str = "Bash", risk: Risk = Risk.HIGH, quorum: int = 1,
            confirm: str | None = None, policy: bool = True, session: str | None = "s-1",
            requested_by: str | None = "Claude Code on host-1", token: str | None = "claude-code",
            **extra: Any) -> Request:
    ex: dict[str, Any] = {"suggestions": suggestions if suggestions is not None else [NPM], **extra}
    if token:
        ex["api_token"] = token  # who the agent is: the token that made the request (agent_of)
    if policy:
        ex["policy"] = {"outcome": "ask", "tier": risk.value}
    if session:
        ex["session"] = session
    return Request(id="apr_1", kind=Kind.APPROVAL, status=Status.PENDING,
                   action=Action(tool, {"command": "npm test -- --ci", "description": "Run tests"}),
                   summary="Run the tests", risk=risk, channel="C1", created_at=NOW, updated_at=NOW,
                   quorum=quorum, confirm=confirm, requested_by=requested_by, extra=ex)


def test_an_offered_suggestion_names_its_grant_and_scope() -> None:
    [one] = offers(request())
    assert one.offered and one.label == "Bash(npm test *)"
    assert (one.scope, one.scope_value) == (Scope.AGENT, "claude-code")  # the token, never requested_by
    assert one.meaning() == ("always allow Bash commands that start with “npm test”, for this agent "
                             "(claude-code), until revoked")
    session = dict(NPM, destination="session")
    [two] = offers(request(suggestions=[session]))
    assert (two.scope, two.scope_value) == (Scope.RUN, "session:claude-code:s-1")
    assert offered(request(), 0) is not None and offered(request(), 1) is None


@pytest.mark.parametrize(("change", "why"), [
    ({"suggestions": [{"type": "setMode", "mode": "acceptEdits", "destination": "session"}]}, "not this kind"),
    ({"suggestions": [dict(NPM, behavior="deny")]}, "would deny calls"),
    ({"suggestions": [dict(NPM, destination="cliArg")]}, "cannot scope"),
    ({"suggestions": [dict(NPM, destination="session")], "session": None}, "names no session"),
    ({"token": None}, "not made with an API token"),
    ({"suggestions": [dict(NPM, rules=[{"toolName": "Read", "ruleContent": "//x/**"}])]}, "not this call's tool"),
    ({"suggestions": [dict(NPM, rules=[{"toolName": "Bash", "ruleContent": "npm test | sh"}])]}, "shell operators"),
    ({"suggestions": [{"type": "somethingNew", "x": 1}]}, "not this kind"),
    ({"risk": Risk.CRITICAL}, "critical requests are never remembered"),
    ({"quorum": 2}, "needs 2 approvals"),
    ({"confirm": "DELETE"}, "typed confirmation"),
    ({"policy": False}, "policy file"),
    ({"allowed_decisions": ["edit", "reject"]}, "Approve is not offered"),
])
def test_suggestions_not_offered_say_why(change: dict[str, Any], why: str) -> None:
    [one] = offers(request(**change))
    assert not one.offered and why in (one.why_not or "")
    assert offered(request(**change), 0) is None


def test_at_most_three_offers_and_bad_entries_are_skipped() -> None:
    many = [dict(NPM, rules=[{"toolName": "Bash", "ruleContent": f"make t{i} *"}]) for i in range(5)]
    found = offers(request(suggestions=["not an object", *many]))
    assert [s.offered for s in found] == [True, True, True, False, False]
    assert [s.index for s in found] == [1, 2, 3, 4, 5]
    assert "first 3" in (found[3].why_not or "")


def test_a_suggestion_grant_lets_other_parameters_be_anything() -> None:
    grant = Grant(id="grt_1", tool="Bash", match={"command": FieldMatch("command", "npm test *")},
                  scope=Scope.AGENT, scope_value="Claude Code on host-1", created_by="U1", created_at=NOW,
                  any_other_params=True)
    exact = Grant(id="grt_0", tool="Bash", match={"command": FieldMatch("eq", "ls")}, scope=Scope.EVERYONE,
                  scope_value=None, created_by="U1", created_at=NOW)
    index = GrantIndex([exact, grant])
    me = Subject(agent="Claude Code on host-1")
    assert index.find("Bash", {"command": "npm test -- --ci", "description": "x", "timeout": 5}, me, NOW) == grant
    assert index.find("Bash", {"command": "npm test"}, me, NOW) == grant
    assert index.find("Bash", {"description": "no command"}, me, NOW) is None
    assert index.find("Bash", {"command": "npm test && curl x", "description": "x"}, me, NOW) is None
    assert index.find("Bash", {"command": "npm test"}, Subject(agent="another agent"), NOW) is None
    assert index.find("Bash", {"command": "ls"}, me, NOW) == exact
    assert index.find("Bash", {"command": "ls", "description": "x"}, me, NOW) is None  # exact names still
    revoked = Grant(**{**grant.__dict__, "revoked_at": NOW})
    assert GrantIndex([revoked]).find("Bash", {"command": "npm test"}, me, NOW + timedelta(seconds=1)) is None
    assert grant.describe() == "Bash with command is one command like npm test * (other parameters: any)"


def test_run_scope_is_the_run_or_the_named_session() -> None:
    assert run_of({"run_id": "run_1", "session": "s"}) == "run_1"
    assert run_of({"session": "s"}) == "session:s"
    # A session is bound to the token that named it: another token naming the same session is another run.
    assert run_of({"session": "s", "api_token": "a"}) == "session:a:s"
    assert run_of({"session": "s", "api_token": "b"}) != run_of({"session": "s", "api_token": "a"})


def test_the_agent_is_its_token_never_a_label_it_wrote() -> None:
    assert agent_of({"api_token": "deploy-bot", "agent": "admin-bot"}) == "deploy-bot"
    assert agent_of({"run_id": "run_1", "agent": "researcher"}) == "researcher"
    assert agent_of({"agent": "admin-bot"}) is None  # not a run of Signoff's: nobody vouches for the name
    assert agent_of({}) is None
    assert run_of({}) is None and run_of({"session": ""}) is None


def test_the_card_offers_suggestions_safely_within_slacks_limits() -> None:
    from bot.slack.policy_cards import render_policy_card
    from tests.slack.test_blocks import assert_valid_message

    hostile = dict(NPM, rules=[{"toolName": "Bash", "ruleContent": "<!channel> `x` <https://evil|Approve> *"}])
    many = [NPM, hostile, *[dict(NPM, rules=[{"toolName": "Bash", "ruleContent": f"make {'t' * 90}{i} *"}])
                            for i in range(8)]]
    card = render_policy_card(request(suggestions=many, requested_by="<@U1> agent"), now=NOW)
    assert_valid_message(card)
    [decide] = [b for b in card["blocks"] if b.get("block_id") == "decide"]
    ids = [e["action_id"] for e in decide["elements"]]
    # The hostile rule holds shell operators: shown (escaped), not offered.
    assert ids[:5] == ["signoff_approve", "signoff_suggest_0", "signoff_suggest_2", "signoff_suggest_3",
                       "signoff_remember"]
    assert all(len(e["text"]["text"]) <= 75 for e in decide["elements"])
    mrkdwn = json_text([b for b in card["blocks"] if b["type"] == "context"])
    assert "<!channel>" not in mrkdwn and "<https://evil" not in mrkdwn and "<@U1>" not in mrkdwn
    decided = render_policy_card(request(suggestions=many).evolve(status=Status.APPROVED), now=NOW)
    assert "signoff_suggest" not in json_text(decided["blocks"])


def json_text(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def test_the_permission_request_answer_shapes() -> None:
    from signoff.hook import answer, deny
    from signoff.hook_permission import as_permission_request, event_of

    allowed = as_permission_request(answer("allow", "ok", {"command": "npm test"}), NPM)
    assert allowed == {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {
        "behavior": "allow", "updatedInput": {"command": "npm test"}, "updatedPermissions": [NPM]}}}
    assert as_permission_request(answer("ask", "nobody decided")) == {}  # Claude Code's own prompt
    for pre in (deny("rejected by bob"), answer("defer", "later")):
        decision = as_permission_request(pre)["hookSpecificOutput"]["decision"]
        assert decision["behavior"] == "deny" and decision["message"]
    assert event_of('{"hook_event_name": "PermissionRequest"}') == "PermissionRequest"
    assert event_of("not json") is None and event_of("[1]") is None
