"""The agent-side commands of `signoff` (the console script delegates `wait`, `hook` and `mcp` here).

    signoff wait ID [--timeout S]   (or --claude-result run.json: the call a Claude Code run deferred)
                                    block until the request is decided; print the decision JSON;
                                    exit 0 approved, 1 rejected, 2 expired or cancelled,
                                    3 no decision (still pending after --timeout, or the server unreachable),
                                    4 undeliverable (Slack refused the card for good: nobody can decide it)
    signoff hook claude-code ...    Claude Code PreToolUse hook (stdin: hook JSON, stdout: decision JSON)
    signoff mcp                     the MCP server over stdio
    signoff verify RECEIPT.json [--key KID:KEY[,KID:KEY...] | --keys FILE_OR_URL]
                                    check a decision's signature offline (the request's JSON as the API
                                    or the decided webhook gave it); the keys: --key or
                                    SIGNOFF_PUBLIC_KEY (the server's `signoff keys`), or --keys, a saved
                                    copy (or the URL) of the server's /.well-known/signoff-keys with every
                                    key it has signed with (a retired key holds only for decisions made
                                    before it was retired). Exit 0 valid, 1 not
    signoff langgraph resume --graph module:function [--db checkpoints.db | postgresql://...] [--async]
                             [--once] [--lease S] [--listen HOST:PORT] [--quiet]
                                    resume paused LangGraph threads with Signoff's decisions (run from
                                    the app's folder: it is imported from there); says what it
                                    watches and each thread it resumes, unless --quiet
                                    (signoff.langgraph_cli)
    signoff openai resume --agent module:name [--approvals module:name] [--run ID] [--once]
                          [--listen HOST:PORT] [--quiet]
                                    resume paused OpenAI Agents SDK runs with Signoff's decisions, exactly
                                    once (signoff.openai_cli)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

from signoff.errors import SignoffError, UndeliverableError

EXIT_BY_OUTCOME = {"approved": 0, "answered": 0, "rejected": 1, "expired": 2, "cancelled": 2}
EXIT_NO_DECISION = 3
EXIT_UNDELIVERABLE = 4


def _since(iso_time: str | None) -> str:
    """`2026-12-05T14:00:00Z (3m 20s ago)`, or what the server gave when it cannot be read."""
    from datetime import UTC, datetime

    if not iso_time:
        return "an unknown time"
    try:
        then = datetime.fromisoformat(iso_time.replace("Z", "+00:00"))
    except ValueError:
        return iso_time
    seconds = max(0, int((datetime.now(UTC) - then).total_seconds()))
    ago = f"{seconds // 60}m {seconds % 60}s" if seconds >= 60 else f"{seconds}s"
    return f"{iso_time} ({ago} ago)"


def pending_note(body: dict[str, Any], timeout: float | None) -> str:
    """What a request still pending after `--timeout` is waiting for: its card, where, since when."""
    card = body.get("card")
    delivery = (body.get("delivery") or {}).get("status")
    where = (f"its card is in channel {card.get('channel')}" if isinstance(card, dict)
             else f"its card for channel {body.get('channel') or '(the default channel)'} is not posted yet "
                  f"(delivery: {delivery or 'unknown'})")
    who = ", ".join(body.get("approvers") or []) or "anyone allowed in that channel"
    return (f"{body.get('id')} is still pending after {timeout:g}s: waiting for a person ({who}) to decide "
            f"\"{body.get('summary')}\"; {where}; requested {_since(body.get('created_at'))}. "
            f"Run `signoff wait {body.get('id')}` again to keep waiting.")


def _deferred_call(path: str) -> tuple[str, str]:
    """(session_id, tool_use_id) of the call a `claude -p --output-format json` run deferred."""
    from pathlib import Path

    raw = sys.stdin.read() if path == "-" else Path(path).read_text()
    lines = [line for line in raw.strip().splitlines() if line.strip()]
    result = json.loads(lines[-1]) if lines else {}
    deferred = result.get("deferred_tool_use") if isinstance(result, dict) else None
    if not isinstance(deferred, dict) or not deferred.get("id") or not result.get("session_id"):
        raise SignoffError(f"{path} is not a Claude Code result with a deferred tool call "
                           f"(terminal_reason: {result.get('terminal_reason') if isinstance(result, dict) else None})")
    return str(result["session_id"]), str(deferred["id"])


def _wait(args: argparse.Namespace) -> int:
    from signoff.client import SignoffClient
    from signoff.hook import request_key

    try:
        with SignoffClient(args.url, args.token) as client:
            request_id = args.id
            if args.claude_result:
                found_request = client.find(request_key(*_deferred_call(args.claude_result)))
                if found_request is None:
                    raise SignoffError("no Signoff request for the deferred call (was the hook `signoff hook "
                                       "claude-code`, on this server?)")
                request_id = str(found_request["id"])
            elif not request_id:
                raise SignoffError("give a request id, or --claude-result FILE")
            found = client.decision(request_id, args.timeout)
            pending = client.get(request_id) if found is None else None
    except UndeliverableError as exc:
        print(f"signoff wait: {exc.message}", file=sys.stderr)
        print(json.dumps({"id": exc.request_id, "outcome": None, "error": exc.code, "delivery": exc.delivery}))
        return EXIT_UNDELIVERABLE
    except (SignoffError, OSError, ValueError) as exc:
        print(f"signoff wait: {getattr(exc, 'message', None) or exc}", file=sys.stderr)
        return EXIT_NO_DECISION
    args.id = request_id
    if found is None:
        print(f"signoff wait: {pending_note(pending or {'id': args.id}, args.timeout)}", file=sys.stderr)
        print(json.dumps({"id": args.id, "outcome": None}))
        return EXIT_NO_DECISION
    print(json.dumps(found.to_json()))
    return EXIT_BY_OUTCOME.get(found.outcome, 1)


SERVER_COMMANDS = frozenset({"serve", "demo", "db", "run", "policy", "audit", "keys"})


def _keys_document(where: str) -> Any:
    """A saved copy of /.well-known/signoff-keys, or that URL read now; OSError/ValueError if neither."""
    if where.startswith(("http://", "https://")):
        import urllib.request

        with urllib.request.urlopen(where, timeout=30) as answer:
            return json.loads(answer.read())
    from pathlib import Path

    return json.loads(Path(where).read_text())


def _verify(args: argparse.Namespace) -> int:
    """Offline: no server is asked. The receipt is a request's JSON as the API returned it."""
    import os
    from pathlib import Path

    from signoff import signatures

    key = args.key or ("" if args.keys else os.environ.get("SIGNOFF_PUBLIC_KEY")) or ""
    if not key.strip() and not args.keys:
        print("signoff verify: give the server's public keys: --key or SIGNOFF_PUBLIC_KEY (`signoff keys` on the "
              "server prints them), or --keys with a copy of its /.well-known/signoff-keys", file=sys.stderr)
        return 2
    try:
        text = sys.stdin.read() if args.receipt == "-" else Path(args.receipt).read_text()
        body = json.loads(text)
        ring = signatures.Keyring({"SIGNOFF_PUBLIC_KEY": key})
        if args.keys:
            ring.pin("offline", _keys_document(args.keys))
        if not isinstance(body, dict) or body.get("status") not in signatures.FINAL:
            raise SignoffError("not a decided request's JSON (no final status): nothing to check")
        ring.check(body)
    except (OSError, ValueError) as exc:
        print(f"signoff verify: cannot read {args.receipt}: {exc}", file=sys.stderr)
        return 2
    except SignoffError as exc:
        print(f"signoff verify: INVALID: {exc.message}", file=sys.stderr)
        return 1
    decision = body.get("decision") or {}
    print(f"valid: request {body.get('id')} {decision.get('outcome', body.get('status'))} at "
          f"{decision.get('decided_at')}, signed by key {body['signature']['kid']}")
    return 0


def parser() -> argparse.ArgumentParser:
    import argparse

    root = argparse.ArgumentParser(prog="signoff", description="Signoff's agent-side commands.")
    sub = root.add_subparsers(dest="command", required=True)
    wait = sub.add_parser("wait", help="wait for a request's decision; exit 0 approved, 1 rejected, "
                                       "2 expired/cancelled, 3 no decision, 4 undeliverable")
    wait.add_argument("id", nargs="?", help="the request id (apr_... or qst_...)")
    wait.add_argument("--claude-result", metavar="FILE",
                      help="instead of an id: the JSON of a `claude -p --output-format json` run that deferred a "
                           "tool call to `signoff hook claude-code` ('-' for stdin)")
    wait.add_argument("--timeout", type=float, default=None, help="give up after this many seconds (exit 3)")
    wait.add_argument("--url", help="the Signoff server (default: SIGNOFF_URL)")
    wait.add_argument("--token", help="API token (default: SIGNOFF_TOKEN)")
    verify = sub.add_parser("verify", help="check a decision's signature offline; exit 0 valid, 1 not")
    verify.add_argument("receipt", help="the request's JSON as the API returned it ('-' for stdin)")
    verify.add_argument("--key", help="the server's public keys, <kid>:<base64url>[,...] (default: SIGNOFF_PUBLIC_KEY)")
    verify.add_argument("--keys", metavar="FILE_OR_URL",
                        help="a saved copy of the server's /.well-known/signoff-keys (or its URL): every key it "
                             "signed with, rotated ones too")
    from signoff.langgraph_cli import add_parser
    from signoff.openai_cli import add_parser as add_openai

    add_parser(sub)
    add_openai(sub)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] == ["hook"]:
        # Parsed by the hook itself: a bad option must still print a deny, never argparse's exit 2.
        from signoff import hook

        if given[1:2] != ["claude-code"] or "--help" in given or "-h" in given:
            print(hook.HELP, file=sys.stderr)
            # Still a deny on stdout: a hook command that prints no decision lets the call through.
            print(json.dumps(hook.deny("no decision: `signoff hook` was asked for help or for an unknown hook")))
            return 0
        return hook.run(given[2:])
    if given[:1] == ["mcp"]:
        from signoff.mcp_server import run_stdio

        return run_stdio(given[1:])
    if given[:1] and given[0] in SERVER_COMMANDS:
        # Only the server's install has them: this is the agent side alone (client/pyproject.toml).
        print(f"signoff {given[0]}: a command of the Signoff server, which is not installed here (this is the "
              "agent side alone). Install the server from the repository's root: pip install -e .", file=sys.stderr)
        return 2
    args = parser().parse_args(given)
    if args.command == "wait":
        return _wait(args)
    if args.command == "verify":
        return _verify(args)
    if args.command == "langgraph":
        from signoff.langgraph_cli import run

        return run(args)
    if args.command == "openai":
        from signoff.openai_cli import run as run_openai

        return run_openai(args)
    raise SystemExit(f"signoff: unknown command {args.command}")


if __name__ == "__main__":
    sys.exit(main())
