"""manifest.yml against the code: URLs, limits, and every scope and event the code relies on.

The code is scanned as text: Web API calls as `<anything>.<api_method>(` (e.g. `client.users_info(`)
and as dotted method-name string literals (`self.call("chat.postMessage", ...)`, `api_call("...")`);
Bolt listeners as `app.event("...")` / `app.event({"type": ...})` / `app.message(...)`. A new call or
listener whose scope or event subscription the manifest lacks fails here, and so does a call to a
method this file has no scope mapping for (add it to METHOD_SCOPES).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from slack_sdk.web.async_client import AsyncWebClient

ROOT = Path(__file__).resolve().parents[2]
MANIFEST_PATH = ROOT / "manifest.yml"
EVENTS_PATH = "/slack/events"

# Web API method -> bot scopes it needs (all of them). Channel-based methods list the scope for every
# conversation type Signoff works in (public and private channels, DMs, group DMs for history).
_HISTORY = frozenset({"channels:history", "groups:history", "im:history", "mpim:history"})
_CHANNEL_READ = frozenset({"channels:read", "groups:read"})
METHOD_SCOPES: dict[str, frozenset[str]] = {
    "auth.test": frozenset(),
    "apps.connections.open": frozenset(),  # the app-level token's connections:write, not a bot scope
    "chat.postMessage": frozenset({"chat:write"}),
    "chat.update": frozenset({"chat:write"}),
    "chat.postEphemeral": frozenset({"chat:write"}),
    "chat.delete": frozenset({"chat:write"}),
    "chat.scheduleMessage": frozenset({"chat:write"}),
    "chat.deleteScheduledMessage": frozenset({"chat:write"}),
    "chat.getPermalink": frozenset(),
    "chat.unfurl": frozenset({"links:write"}),
    "views.open": frozenset(),  # views.* need a trigger_id or the user's Home tab, no scope
    "views.push": frozenset(),
    "views.update": frozenset(),
    "views.publish": frozenset(),
    "users.info": frozenset({"users:read"}),
    "users.list": frozenset({"users:read"}),
    "users.lookupByEmail": frozenset({"users:read", "users:read.email"}),
    "users.profile.get": frozenset({"users.profile:read"}),
    "users.conversations": _CHANNEL_READ,
    "usergroups.list": frozenset({"usergroups:read"}),
    "usergroups.users.list": frozenset({"usergroups:read"}),
    "conversations.history": _HISTORY,
    "conversations.replies": _HISTORY,
    "conversations.info": _CHANNEL_READ,
    "conversations.members": _CHANNEL_READ,
    "conversations.list": _CHANNEL_READ,
    "conversations.open": frozenset({"im:write"}),
    "conversations.join": frozenset({"channels:join"}),
    "reactions.add": frozenset({"reactions:write"}),
    "reactions.remove": frozenset({"reactions:write"}),
    "reactions.get": frozenset({"reactions:read"}),
    "pins.add": frozenset({"pins:write"}),
    "files.upload.v2": frozenset({"files:write"}),  # slack_sdk helper files_upload_v2
    "files.getUploadURLExternal": frozenset({"files:write"}),
    "files.completeUploadExternal": frozenset({"files:write"}),
    "team.info": frozenset({"team:read"}),
    "bots.info": frozenset({"users:read"}),
}

# Event subscription -> the scope Slack requires before it lets the app subscribe.
EVENT_SCOPES: dict[str, frozenset[str]] = {
    "app_home_opened": frozenset(),
    "app_mention": frozenset({"app_mentions:read"}),
    "message.channels": frozenset({"channels:history"}),
    "message.groups": frozenset({"groups:history"}),
    "message.im": frozenset({"im:history"}),
    "message.mpim": frozenset({"mpim:history"}),
    "reaction_added": frozenset({"reactions:read"}),
    "member_joined_channel": _CHANNEL_READ,
}
# A Bolt `message` listener (app.message or app.event("message")) must hear these conversation types.
MESSAGE_SUBSCRIPTIONS = frozenset({"message.channels", "message.groups", "message.im"})

_API_METHODS = frozenset(name for name, value in vars(AsyncWebClient).items()
                         if callable(value) and not name.startswith("_"))
_SNAKE_CALL = re.compile(r"\.([a-z]+_[A-Za-z0-9_]+)\s*\(")
_DOTTED_LITERAL = re.compile(r"""["']([a-z]+(?:\.[A-Za-z0-9]+)+)["']""")
_LISTENER = re.compile(r"\b(?:app|bolt)\.(event|message)\(\s*")
_STRING = re.compile(r"""(?:["'])([\w.]+)["']""")
_DICT_TYPE = re.compile(r"""\{[^}]*["']type["']\s*:\s*["']([\w.]+)["']""")


def manifest() -> dict[str, Any]:
    return yaml.safe_load(MANIFEST_PATH.read_text())


def bot_sources() -> dict[str, str]:
    """The bot's code; bot/sandbox is Slack's side (the emulator answers those methods, never calls them)."""
    sandbox = ROOT / "bot" / "sandbox"
    return {str(p.relative_to(ROOT)): p.read_text() for p in sorted((ROOT / "bot").rglob("*.py"))
            if sandbox not in p.parents}


def api_methods_in(source: str) -> set[str]:
    """Web API methods (dotted names) that `source` calls, directly or by name."""
    found = {m.replace("_", ".") for m in _SNAKE_CALL.findall(source) if m in _API_METHODS}
    found |= {m for m in _DOTTED_LITERAL.findall(source) if m.replace(".", "_") in _API_METHODS}
    return found


def events_in(source: str) -> tuple[set[str], list[str]]:
    """(event subscriptions the Bolt listeners in `source` need, listener calls that could not be read)."""
    events: set[str] = set()
    unreadable: list[str] = []
    for match in _LISTENER.finditer(source):
        kind, rest = match.group(1), source[match.end():match.end() + 200]
        if kind == "message":  # app.message(keyword) listens to every message event it receives
            events |= MESSAGE_SUBSCRIPTIONS
            continue
        literal = _STRING.match(rest) or _DICT_TYPE.match(rest)
        if literal is None:
            unreadable.append(source[match.start():match.end() + 40].splitlines()[0])
            continue
        name = literal.group(1)
        events |= set(MESSAGE_SUBSCRIPTIONS) if name == "message" else {name}
    return events, unreadable


def missing_scopes(methods: set[str], granted: set[str]) -> dict[str, set[str]]:
    unmapped = sorted(m for m in methods if m not in METHOD_SCOPES)
    assert not unmapped, f"no scope mapping for Web API method(s) {unmapped}: add them to METHOD_SCOPES"
    return {m: set(METHOD_SCOPES[m]) - granted for m in sorted(methods) if METHOD_SCOPES[m] - granted}


def bot_scopes(m: dict[str, Any]) -> set[str]:
    return set(m["oauth_config"]["scopes"]["bot"])


def bot_events(m: dict[str, Any]) -> set[str]:
    return set(m["settings"]["event_subscriptions"]["bot_events"])


# -- the manifest itself -------------------------------------------------------


def test_manifest_is_version_1_and_http_mode() -> None:
    m = manifest()
    assert m["_metadata"] == {"major_version": 1, "minor_version": 1}
    s = m["settings"]
    assert s["socket_mode_enabled"] is False
    assert s["token_rotation_enabled"] is False
    assert s["org_deploy_enabled"] is False
    assert s["interactivity"]["is_enabled"] is True


def test_every_request_url_is_the_one_slack_endpoint() -> None:
    m = manifest()
    urls = [m["settings"]["event_subscriptions"]["request_url"], m["settings"]["interactivity"]["request_url"]]
    urls += [c["url"] for c in m["features"]["slash_commands"]]
    assert len(urls) == 3
    for url in urls:
        assert url.startswith("https://") and url.endswith(EVENTS_PATH), url
    assert len({u.split("/")[2] for u in urls}) == 1, "all URLs must point at the same host"


def test_names_and_command_fit_slack_limits() -> None:
    m = manifest()
    info = m["display_information"]
    assert info["name"] == "Signoff" and len(info["name"]) <= 35
    assert 0 < len(info["description"]) <= 140
    if "long_description" in info:
        assert 174 <= len(info["long_description"]) <= 4000
    bot = m["features"]["bot_user"]
    assert bot["display_name"] == "signoff" and bot["always_online"] is True
    assert re.fullmatch(r"[a-z0-9._-]{1,80}", bot["display_name"])
    commands = m["features"]["slash_commands"]
    assert [c["command"] for c in commands] == ["/signoff"]
    for c in commands:
        assert len(c["command"]) <= 32 and c["command"].startswith("/")
        assert 0 < len(c["description"]) <= 2000
        assert len(c.get("usage_hint", "")) <= 1000
        assert c["should_escape"] is True  # `away ... to @bob` is parsed from <@U..|bob>
    home = m["features"]["app_home"]
    assert home["home_tab_enabled"] is True and home["messages_tab_enabled"] is True


def test_every_subscribed_event_has_its_scope() -> None:
    m = manifest()
    granted = bot_scopes(m)
    for event in bot_events(m):
        assert event in EVENT_SCOPES, f"no scope mapping for event {event}: add it to EVENT_SCOPES"
        assert EVENT_SCOPES[event] <= granted, f"{event} needs {sorted(EVENT_SCOPES[event] - granted)}"
    assert "chat:write" in granted or "chat:write.public" not in granted  # .public requires chat:write


# -- the manifest against the code ---------------------------------------------


def test_every_web_api_method_the_code_calls_has_its_scope() -> None:
    granted = bot_scopes(manifest())
    calls = {path: api_methods_in(text) for path, text in bot_sources().items()}
    missing = {path: gaps for path, methods in calls.items() if (gaps := missing_scopes(methods, granted))}
    assert not missing, f"manifest.yml lacks scopes for Web API calls: {missing}"


# Scopes no Web API method or event implies, each asked for on purpose.
DELIBERATE_SCOPES = {
    "commands": "the /signoff slash command",
    "chat:write.public": "cards in public channels the bot was not invited to (see manifest.yml)",
}


def test_the_manifest_asks_for_exactly_the_scopes_the_code_needs() -> None:
    """No scope the code does not use: each one is a permission an admin must grant, and a reason to
    hesitate; a scope no code needs is a question the README cannot answer."""
    m = manifest()
    called = set().union(*(api_methods_in(text) for text in bot_sources().values()))
    needed = set().union(*(METHOD_SCOPES[method] for method in called))
    needed |= set().union(*(EVENT_SCOPES[event] for event in bot_events(m)))
    assert bot_scopes(m) == needed | DELIBERATE_SCOPES.keys()


def test_every_event_a_listener_waits_for_is_subscribed() -> None:
    subscribed = bot_events(manifest())
    for path, text in bot_sources().items():
        events, unreadable = events_in(text)
        assert not unreadable, f"{path}: pass the event name as a literal so this test can check it: {unreadable}"
        assert events <= subscribed, f"{path} listens to {sorted(events - subscribed)}, not in manifest.yml"


def test_every_slash_command_the_code_handles_is_declared() -> None:
    declared = {c["command"] for c in manifest()["features"]["slash_commands"]}
    handled = {c for text in bot_sources().values() for c in re.findall(r"""\.command\(\s*["'](/[\w-]+)["']""", text)}
    assert handled and handled <= declared


# -- the scanner finds what it must (so the checks above cannot pass vacuously) --


def test_scanner_sees_the_calls_the_code_makes_today() -> None:
    found = set().union(*(api_methods_in(t) for t in bot_sources().values()))
    assert {"chat.postMessage", "chat.update", "chat.postEphemeral", "views.open", "usergroups.users.list",
            "conversations.history"} <= found


@pytest.mark.parametrize(
    ("snippet", "method", "scope"),
    [
        ("await self.client.users_lookupByEmail(email=e)", "users.lookupByEmail", "users:read.email"),
        ('await self.call("reactions.add", 1, name="eyes")', "reactions.add", "reactions:write"),
        ('await client.api_call("pins.add", json={})', "pins.add", "pins:write"),
    ],
)
def test_a_new_call_without_its_scope_is_reported(snippet: str, method: str, scope: str) -> None:
    methods = api_methods_in(snippet)
    assert methods == {method}
    assert missing_scopes(methods, bot_scopes(manifest())) == {method: {scope}}


def test_an_unmapped_method_is_reported() -> None:
    with pytest.raises(AssertionError, match="admin.users.list"):
        missing_scopes(api_methods_in("await client.admin_users_list(team_id=t)"), bot_scopes(manifest()))


@pytest.mark.parametrize(
    ("snippet", "events"),
    [
        ('app.event("reaction_added")(on_reaction)', {"reaction_added"}),
        ("@app.event('app_home_opened')\nasync def home(): ...", {"app_home_opened"}),
        ('bolt.event({"type": "message", "subtype": "message_changed"})(f)', set(MESSAGE_SUBSCRIPTIONS)),
        ("app.message(re.compile('approve'))(f)", set(MESSAGE_SUBSCRIPTIONS)),
    ],
)
def test_listeners_are_read(snippet: str, events: set[str]) -> None:
    assert events_in(snippet) == (events, [])


def test_an_unsubscribed_listener_and_a_non_literal_event_are_reported() -> None:
    events, _ = events_in('app.event("reaction_added")(f)')
    assert events - bot_events(manifest()) == {"reaction_added"}
    _, unreadable = events_in("app.event(HOME_EVENT)(f)")
    assert unreadable == ["app.event(HOME_EVENT)(f)"]
