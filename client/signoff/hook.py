"""`signoff hook claude-code`: Claude Code's PreToolUse (or PermissionRequest) command hook, for
machines whose Claude Code cannot reach the server with an HTTP hook itself.

Reads the hook's JSON on stdin, adds what only this machine can see (`signoff_local`: the diff of
the call against the file on disk, how many tool calls the turn holds, a PermissionRequest's call
id, this host's name), forwards it to the server's `POST /api/v1/hooks/claude-code` (the endpoint
Claude Code's HTTP hook calls, so both kinds follow the same rules: `signoff.claude_hook`), prints
the server's answer on stdout, and ALWAYS exits 0.

Invariants:
- Fails closed. The CLI ignores a hook that crashes, exits 1 or prints non-JSON and lets the call
  through (even with `"onFailure": "block"`, plain-text stdout proceeds), so every error (server
  down, bad token, bad input, a bug) becomes a printed `deny` with a reason.
- Starts fast: runs on most tool calls of a session. The standard library only (a plain socket, no
  httpx or pydantic), and nothing imported that the call does not use.
- Answers within `--wait` seconds plus the time to reach the server (keep `--wait` below the
  hook's `timeout` in settings.json: a hook that times out does not block the call unless
  `"onFailure": "block"`). An unreachable server is retried for a few seconds, then denied.
- The transcript and files are read bounded (`signoff._files`): a regular file only, within a
  time limit; one that cannot be read counts as "cannot tell", which asks and never defers.
- Nothing runs on an answer it cannot check: an allow must come with the signed request it was
  decided on (the endpoint adds it for a command hook), its Ed25519 signature valid
  (`signoff.signatures`: SIGNOFF_PUBLIC_KEY, else the server's key fetched once) and its key this
  call's. Checked only for an allow, and imported only then.
- Approvals bound to the file (`signoff.hook_state`): Write/Edit/MultiEdit send the file's SHA-256 as
  the request's `state`; on an approval the file is read again, and if it changed the request is
  reported `skipped` and the person asked again with the new preview (at most MAX_ASKS times).
- As an Elicitation hook it forwards the MCP server's request for input; the server asks it in Slack
  and answers accept / decline / cancel (signoff.claude_elicit). What it prints is rebuilt from the
  signed question the server sends with its answer, once that signature checks as an allow's does and
  the question is the one asked under this elicitation's key: an `accept` without it is refused. Any
  error is `cancel` with its reason.
- As a PostToolUse / PostToolUseFailure hook it forwards the call to the endpoint, which reports what
  ran to the request that allowed it; it prints `{}` whatever happens (the call already ran).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

import signoff.claude_hook as rules
from signoff.claude_hook import STILL_WAITING as STILL_WAITING
from signoff.claude_hook import answer as answer
from signoff.claude_hook import deny as deny
from signoff.claude_hook import request_key as request_key

RETRY_PAUSE = 0.25
MARGIN = 10.0  # past --wait, what reaching the server and its answer may take


class _Options:
    def __init__(self, hook: rules.Options, url: str | None, token: str | None) -> None:
        self.hook, self.url, self.token = hook, url, token


def parse_options(argv: Sequence[str]) -> _Options:
    """`--wait S --on-timeout deny|ask|defer --channel C --approvers U1,U2 --risk R --url U --token T`."""
    values = {"--wait": str(rules.DEFAULT_WAIT), "--on-timeout": "deny",
              "--channel": os.environ.get("SIGNOFF_CHANNEL") or "",
              "--approvers": os.environ.get("SIGNOFF_APPROVERS", ""), "--risk": "", "--url": "", "--token": ""}
    args = list(argv)
    while args:
        name = args.pop(0)
        name, eq, given = name.partition("=")
        if name not in values:
            raise ValueError(f"bad hook options: unknown option {name!r}")
        if not eq:
            if not args:
                raise ValueError(f"bad hook options: {name} needs a value")
            given = args.pop(0)
        values[name] = given
    query = {"wait": values["--wait"], "on_timeout": values["--on-timeout"]}
    if values["--risk"]:  # only when asked: otherwise the policy's tier for the tool holds
        query["risk"] = values["--risk"]
    if values["--channel"]:
        query["channel"] = values["--channel"]
    if values["--approvers"]:
        query["approvers"] = values["--approvers"]
    try:
        options = rules.options_from(query.items())
    except ValueError as exc:
        raise ValueError(f"bad hook options: {str(exc).replace('on_timeout', '--on-timeout')}") from None
    return _Options(options, values["--url"] or None, values["--token"] or None)


def local_facts(call: rules.HookCall, options: rules.Options) -> dict[str, Any]:
    """What this machine sees of the call that the server cannot (`signoff_local`)."""
    import socket

    import signoff.claude_tools as claude_tools

    # The state is read before the preview is made: a change in between makes the approval look stale
    # (asks again), never current.
    state = claude_tools.file_state(call.tool_name, call.tool_input, call.cwd)
    facts: dict[str, Any] = {"host": socket.gethostname(),
                             "preview": claude_tools.preview(call.tool_name, call.tool_input, call.cwd)}
    if state is not None:
        facts["state"] = state
    counting = options.on_timeout == "defer" and not call.asking
    finding = call.asking and not call.tool_use_id
    if counting or finding:
        import signoff.claude_transcript as claude_transcript

        if counting:
            facts["calls_in_turn"] = claude_transcript.calls_in_turn(call.transcript_path, call.tool_use_id)
        if finding:
            facts["call_id"] = claude_transcript.call_id_of(call.transcript_path, call.tool_name, call.tool_input)
    return facts


def _server(url: str | None, token: str | None) -> tuple[str, str | None]:
    chosen = (url or os.environ.get("SIGNOFF_URL") or "").strip().rstrip("/")
    if not chosen:
        raise ValueError("no Signoff server: pass --url or set SIGNOFF_URL (like http://127.0.0.1:3000)")
    if not chosen.startswith(("http://", "https://")):
        raise ValueError(f"SIGNOFF_URL must start with http:// or https://, not {chosen[:40]!r}")
    return chosen, token or os.environ.get("SIGNOFF_TOKEN") or None


def _exchange(parts: Any, target: str, body: bytes | None, headers: dict[str, str],
              timeout: float) -> tuple[int, bytes]:
    """One HTTP/1.1 POST (GET when `body` is None) on its own connection: (status, body). On a plain socket,
    not http.client: its import (the email package) costs more than the rest of the hook; ssl is imported
    only for https."""
    import socket

    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    method = "GET" if body is None else "POST"
    body = body or b""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {parts.netloc.rpartition('@')[2]}", "Connection: close",
             f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in headers.items())]
    with socket.create_connection((host, port), timeout=timeout) as raw:
        conn: Any = raw
        if parts.scheme == "https":
            import ssl

            conn = ssl.create_default_context().wrap_socket(raw, server_hostname=host)
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    head, _, rest = b"".join(chunks).partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(status_line.split(" ", 2)[1])
    except (IndexError, ValueError):
        raise OSError(f"not an HTTP answer: {status_line[:80]!r}") from None
    fields = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    if fields.get("transfer-encoding", "").lower() == "chunked":
        rest = _unchunk(rest)
    elif "content-length" in fields and len(rest) < int(fields["content-length"]):
        raise OSError("the answer was cut short")
    return status, rest


def _unchunk(data: bytes) -> bytes:
    out: list[bytes] = []
    while True:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            return b"".join(out)
        out.append(data[:size])
        data = data[size + 2:]


def forward(options: _Options, data: dict[str, Any]) -> dict[str, Any]:
    """POST the hook's JSON to the server's hook endpoint; its answer. Raises SignoffError when there is none."""
    from urllib.parse import urlencode, urlsplit

    from signoff.errors import SignoffRequestError, SignoffUnavailable

    base, token = _server(options.url, options.token)
    parts = urlsplit(base)
    hook = options.hook
    query: dict[str, str] = {"wait": f"{hook.wait:g}", "on_timeout": hook.on_timeout}
    if hook.risk:
        query["risk"] = hook.risk
    if hook.channel:
        query["channel"] = hook.channel
    if hook.approvers:
        query["approvers"] = ",".join(hook.approvers)
    target = f"{parts.path}/api/v1/hooks/claude-code?{urlencode(query)}"
    body = json.dumps(data).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "signoff-hook"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    started = time.monotonic()
    retry_for = min(10.0, max(1.0, hook.wait / 4))
    while True:
        try:
            status, raw = _exchange(parts, target, body, headers, hook.wait + MARGIN)
        except (OSError, ValueError) as exc:
            if time.monotonic() - started + RETRY_PAUSE < retry_for and not isinstance(exc, TimeoutError):
                time.sleep(RETRY_PAUSE)  # a server restarting: bounded, paced retries (the key makes them safe)
                continue
            raise SignoffUnavailable(f"cannot reach the Signoff server at {base}: {exc}") from None
        try:
            answered = json.loads(raw)
        except ValueError:
            answered = None
        if status == 200 and isinstance(answered, dict):
            return answered
        error = answered.get("error") if isinstance(answered, dict) else None
        if status == 404:
            raise SignoffRequestError(f"the Signoff server at {base} has no Claude Code hook endpoint (it is older "
                                      "than this hook: upgrade it)", status=status)
        if status in (502, 503, 504) and time.monotonic() - started + RETRY_PAUSE < retry_for:
            time.sleep(RETRY_PAUSE)
            continue
        message = error.get("message") if isinstance(error, dict) else None
        raise SignoffRequestError(f"the Signoff server answered {status}: {message or raw[:200]!r}", status=status)


def _allows(result: dict[str, Any]) -> bool:
    out = result.get("hookSpecificOutput")
    if not isinstance(out, dict):
        return False
    decision = out.get("decision")
    return out.get("permissionDecision") == "allow" or (isinstance(decision, dict) and decision.get("behavior") == "allow")


def _checked(options: _Options, reply: Any, expected_key: str | None) -> dict[str, Any]:
    """The signed request an allow was decided on, checked (SignatureInvalid otherwise): its signature by a
    trusted key, and (when this hook can derive it) the key this call's request was submitted under."""
    from signoff.errors import SignatureInvalid

    request = reply.get("request") if isinstance(reply, dict) else None
    if not isinstance(request, dict) or request.get("status") != "approved":
        raise SignatureInvalid("the server's allow came without the approved, signed request it was decided on; "
                               "nothing may run on it")
    return _signed_by_server(options, request, expected_key)


def _signed_by_server(options: _Options, request: dict[str, Any], expected_key: str | None) -> dict[str, Any]:
    """`request` if its signature is a trusted key's and it was submitted under `expected_key` (when known);
    SignatureInvalid otherwise."""
    import signoff.signatures as sig
    from signoff.errors import SignatureInvalid

    keyring = sig.keyring()
    base, _ = _server(options.url, options.token)
    if keyring.wants_fetch(base) or keyring.wants_refresh(base, request):  # first, stale, or a rotated key
        from urllib.parse import urlsplit

        parts = urlsplit(base)
        status, raw = _exchange(parts, f"{parts.path}{sig.KEYS_PATH}", None, {"User-Agent": "signoff-hook"}, MARGIN)
        if status != 200:
            raise SignatureInvalid(f"cannot check the decision: the server's {sig.KEYS_PATH} answered {status}")
        keyring.pin(base, json.loads(raw))
    if request.get("status") not in sig.FINAL or not keyring.trusted():
        raise SignatureInvalid(f"request {str(request.get('id'))[:40]} has no decision this hook can check")
    keyring.check(request)
    stored = request.get("idempotency_key")
    if expected_key is not None and not (stored == expected_key or (isinstance(stored, str) and (
            stored.endswith(":" + expected_key) or stored.startswith("sha256:")))):
        raise SignatureInvalid(f"request {request.get('id')} was not submitted under this call's key: another "
                               "request's decision, replayed; nothing may run on it")
    return request


def _report_skipped(options: _Options, request_id: str) -> None:
    """The approval made on the file as it was did not run (quietly: asking again matters more)."""
    from urllib.parse import quote, urlsplit

    from signoff.hook_state import CHANGED

    try:
        base, token = _server(options.url, options.token)
        parts = urlsplit(base)
        headers = {"Content-Type": "application/json", "User-Agent": "signoff-hook"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        _exchange(parts, f"{parts.path}/api/v1/approvals/{quote(request_id, safe='')}/outcome",
                  json.dumps({"status": "skipped", "error": CHANGED}).encode(), headers, MARGIN)
    except OSError as exc:
        print(f"signoff: could not report {request_id} skipped: {exc}"[:600], file=sys.stderr)


def decide(options: _Options, data: dict[str, Any]) -> dict[str, Any]:
    """The answer for a PreToolUse or PermissionRequest call: the endpoint's, checked here (signature, file)."""
    from signoff.hook_state import MAX_ASKS, still_current

    started = time.monotonic()
    call = rules.parse(data)
    proposed, changed_from = call.tool_input, None
    for again in range(MAX_ASKS):
        asked = call._replace(tool_input=proposed)
        facts = local_facts(asked, options.hook)
        if again:
            facts.update(again=again, changed_from=changed_from)
        left = max(0.0, options.hook.wait - (time.monotonic() - started))
        answered = forward(_Options(options.hook._replace(wait=left), options.url, options.token),
                           {**data, "tool_input": proposed, rules.LOCAL: facts})
        reply = answered.pop(rules.REPLY, None)
        if not _allows(answered):
            return answered
        call_id = call.tool_use_id or (facts.get("call_id") if call.asking else None)
        base = rules.request_key(call.session_id, call_id) if call_id else None
        expected = rules.chain_key(asked._replace(local=rules.Local(again=again)), base) if base else None
        request = _checked(options, reply, expected)
        decision = request.get("decision") or {}
        params = dict(decision.get("params") or {})
        # Bound to the state it was approved on (signoff.hook_state): the file as it is now, or ask again.
        if still_current(request.get("state"), _file_state(call, params)):
            accepted = None
            if call.asking:
                import signoff.claude_suggestions as claude_suggestions

                sent = [wire for _, wire in claude_suggestions.as_sent(list(call.suggestions))]
                accepted = rules.accepted_suggestion(request, sent)
            allowed = rules.from_request(request)
            assert allowed is not None
            return rules.shaped(allowed, call.event, accepted)
        _report_skipped(options, str(request.get("id")))
        proposed, changed_from = params, str(request.get("id"))
    return rules.shaped(deny(f"the file changed after each of {MAX_ASKS} approvals; nothing was written"), call.event)


def elicited(options: _Options, data: dict[str, Any]) -> dict[str, Any]:
    """The answer to an Elicitation: the server's, passed on only as the signed question it was read from
    says (signature, key, and that it is the question asked); a decline or cancel without one (the server
    could not ask) passes as it is: it gives the MCP server nothing."""
    import uuid

    import signoff.claude_elicit as elicit
    from signoff.errors import SignatureInvalid

    asked = elicit.parse(data)  # garbled input is refused here, with its reason, before anything is asked
    made_here = None if asked.elicitation_id else uuid.uuid4().hex
    answered = forward(options, {**data, rules.LOCAL: {"key": made_here} if made_here else {}})
    reply = answered.pop(rules.REPLY, None)
    result = elicit.checked(answered)
    request = reply.get("request") if isinstance(reply, dict) else None
    if request is None and result["hookSpecificOutput"]["action"] != "accept":
        return result
    if not isinstance(request, dict):
        raise SignatureInvalid("the server's answer came without the signed question it was read from (a server "
                               "older than this hook sends none: upgrade it); nothing is passed on")
    _signed_by_server(options, request, elicit.key(asked, elicit.local_key({"key": made_here})))
    why = result.get("systemMessage")
    return elicit.from_signed(request, asked, str(why).removeprefix("Signoff: ") if why else None)


def _file_state(call: rules.HookCall, params: dict[str, Any]) -> str | None:
    import signoff.claude_tools as claude_tools

    return claude_tools.file_state(call.tool_name, params, call.cwd)


def run(argv: Sequence[str], stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> int:
    """The whole hook: never raises, always prints one JSON answer, always returns 0."""
    event: str | None = None
    try:
        options = parse_options(argv)
        raw = stdin.read()
        try:
            data = json.loads(raw)
        except ValueError:
            raise ValueError("the hook input is not what Claude Code sends (not JSON)") from None
        event = rules.event_of(data)
        if event in rules.POST_EVENTS:  # the receipt: the endpoint reports it; nothing to decide
            forward(options, data)
            result: dict[str, Any] = {}
        elif event == rules.ELICITATION:  # an MCP server's form: the server asks it in Slack and answers
            result = elicited(options, data)
        else:
            result = decide(options, data)
    except BaseException as exc:  # noqa: BLE001 - fail closed on anything, even SystemExit
        if event in rules.POST_EVENTS:  # the call already ran: nothing to close; the receipt is lost, said so
            print(f"signoff: could not report the outcome: {type(exc).__name__}: {exc}"[:600], file=sys.stderr)
            result = {}
        elif isinstance(exc, KeyboardInterrupt):
            result = rules.shaped(deny("interrupted before a decision"), event)
        else:
            detail = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            result = rules.failed(event, f"{type(exc).__name__}: {detail}")
    stdout.write(json.dumps(result) + "\n")
    stdout.flush()
    return 0


HELP = """signoff hook claude-code [--wait SECONDS] [--on-timeout deny|ask|defer] [--channel C...]
                         [--approvers U1,U2,S3] [--risk R] [--url URL] [--token TOKEN]
Claude Code PreToolUse or PermissionRequest hook: reads the hook JSON on stdin, prints the decision
JSON, exits 0. --risk asks for at least that risk (default: the policy's tier for the tool; high
without a policy file). As a PermissionRequest hook, Claude's permission suggestions are offered on the card.
As a PostToolUse (and PostToolUseFailure) hook it reports what ran to the request that allowed it.
As an Elicitation hook it asks the MCP server's form in Slack (accept / decline / cancel).
SIGNOFF_URL, SIGNOFF_TOKEN, SIGNOFF_CHANNEL and SIGNOFF_APPROVERS are read from the environment.
Where Claude Code can reach the server, prefer its HTTP hook: no process per tool call."""
