"""`signoff audit verify|export` and `signoff keys`: the audit log and the signing key from a shell.

    signoff audit verify [--anchor FILE_OR_URL] [--token T]
        seal what the server has not sealed yet, walk the whole chain, print where it first breaks
        (exit 1) or that it is intact with its head (exit 0); with --anchor (a saved anchor, or the URL
        of GET /api/v1/audit/head), also check the anchor's signature and that the chain still passes
        through it (a rewrite or a truncation before it: exit 1)
    signoff audit anchor
        sign the chain's head now and keep it (the server does it every SIGNOFF_AUDIT_ANCHOR_SECONDS);
        print the anchor's JSON
    signoff audit export [--since 2026-12-01 | --since 7d] [--until ...] [--tool T] [--person U]
                         [--outcome O] [--format jsonl|csv] [--output FILE]
        every matching row, oldest first, streamed a page at a time (memory stays flat)
    signoff keys [--new]
        the public decision-signing keys not retired, as SIGNOFF_PUBLIC_KEY takes them (made now if there
        is none); --new prints a fresh private key for SIGNOFF_SIGNING_KEY and touches nothing
    signoff keys list | rotate | retire KID
        every key with its status and since/until; make a new key current (the old one stays published);
        withdraw an earlier key (decisions signed by it after now are refused by the agent side)
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import IO, Any

from bot.domain.audit_chain import AuditEntry, AuditFilter
from bot.domain.durations import DurationError, parse_duration

COLUMNS = ("id", "seq", "at", "request_id", "tool", "type", "actor", "outcome", "data", "prev_hash", "hash")


def add_parsers(sub: Any) -> None:
    audit = sub.add_parser("audit", help="prove the audit log's hash chain; export the log",
                           description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    audit_sub = audit.add_subparsers(dest="action", required=True)
    verify_ = audit_sub.add_parser("verify", help="walk the hash chain; exit 1 at the first altered or missing row")
    verify_.add_argument("--anchor", help="a saved anchor (JSON file) or the URL of GET /api/v1/audit/head: the "
                                          "chain must still pass through it")
    verify_.add_argument("--token", help="the API token for an --anchor URL (default: SIGNOFF_TOKEN)")
    audit_sub.add_parser("anchor", help="sign the chain's head now, keep it and print it")
    export = audit_sub.add_parser("export", help="stream the audit rows as JSON lines or CSV")
    export.add_argument("--since", help="an ISO time or date (UTC unless it says), or a duration back from now: 7d")
    export.add_argument("--until", help="as --since; rows before it")
    export.add_argument("--tool", help="only rows of requests for this action")
    export.add_argument("--person", help="only rows whose actor is this (a Slack user id)")
    export.add_argument("--outcome", help="only rows with this outcome (approved, rejected, ...)")
    export.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    export.add_argument("--output", help="a file to write (default: standard output)")
    keys = sub.add_parser("keys", help="print the public keys that sign decisions (SIGNOFF_PUBLIC_KEY); rotate or "
                                       "retire one")
    keys.add_argument("action", nargs="?", choices=("list", "rotate", "retire"),
                      help="list: every key; rotate: a new current key; retire KID: withdraw an earlier key")
    keys.add_argument("kid", nargs="?", help="the key to retire")
    keys.add_argument("--new", action="store_true", help="print a new private key for SIGNOFF_SIGNING_KEY")


def when(text: str | None, now: datetime) -> datetime | None:
    """An ISO time/date (UTC when it names no zone), or a duration back from `now`; ValueError otherwise."""
    if text is None:
        return None
    try:
        return now - parse_duration(text)
    except DurationError:
        pass
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is neither an ISO time (2026-12-01T09:00Z) nor a duration (7d)") from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def csv_row(entry: AuditEntry) -> list[Any]:
    row = entry.to_json()
    outcome = row["data"].get("outcome") if isinstance(row["data"], dict) else None
    values = {**row, "outcome": outcome, "data": json.dumps(row["data"], sort_keys=True, separators=(",", ":"))}
    return [values.get(c) if values.get(c) is not None else "" for c in COLUMNS]


async def export(url: str, wanted: AuditFilter, fmt: str, out: IO[str]) -> int:
    from bot.approvals.audit import AuditLog
    from storage.stores import open_store

    store = await open_store(url, pool_size=2)
    try:
        log = AuditLog(store)
        await log.seal()
        buffer, writer, count = io.StringIO(), None, 0
        if fmt == "csv":
            writer = csv.writer(buffer)
            writer.writerow(COLUMNS)
        async for entry in log.export(wanted):
            if writer is not None:
                writer.writerow(csv_row(entry))
            else:
                buffer.write(json.dumps(entry.to_json(), separators=(",", ":")) + "\n")
            count += 1
            if buffer.tell() > 1 << 16:  # written out as it goes: one page and 64 KiB at most in memory
                out.write(buffer.getvalue())
                buffer.seek(0)
                buffer.truncate()
        out.write(buffer.getvalue())
        out.flush()
        return count
    finally:
        await store.close()


def read_anchor(where: str, token: str | None) -> Any:
    """The JSON of a saved anchor (a file) or of GET /api/v1/audit/head (a URL); OSError/ValueError if not."""
    if where.startswith(("http://", "https://")):
        import urllib.request

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        with urllib.request.urlopen(urllib.request.Request(where, headers=headers), timeout=30) as answer:
            return json.loads(answer.read())
    with open(where, encoding="utf-8") as f:
        return json.load(f)


def anchor_of(data: Any) -> Any:
    """The anchor in what `read_anchor` gave: the API's `{"anchor": ...}` or a saved anchor itself."""
    from bot.domain.audit_chain import Anchor

    if isinstance(data, dict) and "anchor" in data:
        if data["anchor"] is None:
            raise ValueError("the server has not anchored its audit chain yet (`signoff audit anchor` makes one)")
        data = data["anchor"]
    return Anchor.from_json(data)


async def verify(url: str, anchor: Any = None, configured: str | None = None) -> tuple[bool, str]:
    from bot.approvals.audit import AuditLog
    from bot.approvals.keys import anchor_problem, load_keys
    from storage.signing_keys import SigningKeyStore
    from storage.stores import open_store

    store = await open_store(url, pool_size=2)
    try:
        if anchor is not None:
            keys = await load_keys(configured, SigningKeyStore(store), datetime.now(UTC))
            problem = anchor_problem(anchor, keys.signer.published)
            if problem is not None:
                return False, f"audit anchor INVALID: {problem}"
        report = await AuditLog(store).verify(anchor=anchor)
    finally:
        await store.close()
    return report.ok, report.words()


async def make_anchor(url: str, configured: str | None) -> Any:
    from bot.approvals.audit import AuditLog
    from bot.approvals.keys import load_keys
    from storage.signing_keys import SigningKeyStore
    from storage.stores import open_store

    store = await open_store(url, pool_size=2)
    try:
        keys = await load_keys(configured, SigningKeyStore(store), datetime.now(UTC))
        log = AuditLog(store)
        await log.seal()
        return await log.anchor(keys.signer, datetime.now(UTC))
    finally:
        await store.close()


async def keys_command(url: str, configured: str | None, action: str | None, kid: str | None) -> list[str]:
    """What `signoff keys [list|rotate|retire KID]` prints; SignoffError when it cannot be done."""
    from bot.approvals.keys import Signer, load_keys
    from storage.signing_keys import SigningKeyStore
    from storage.stores import open_store

    if configured is not None and action is None:
        return [f"SIGNOFF_PUBLIC_KEY={Signer.from_seed(configured).public_key}"]
    store = await open_store(url, pool_size=2)
    try:
        keys = await load_keys(configured, SigningKeyStore(store), datetime.now(UTC))
        if action == "rotate":
            old, new = await keys.rotate(datetime.now(UTC))
            return [f"rotated: {new} signs decisions from now on (every replica within one sweep); {old} stays "
                    "published, so what it signed still verifies", f"SIGNOFF_PUBLIC_KEY={keys.signer.public_keys}"]
        if action == "retire":
            assert kid is not None
            await keys.retire(kid, datetime.now(UTC))
            return [f"retired: {kid}; agents refuse decisions signed by it from now on",
                    f"SIGNOFF_PUBLIC_KEY={keys.signer.public_keys}"]
        if action == "list":
            return [" ".join(f"{k}={v}" for k, v in entry.items() if k not in ("alg", "endorsement"))
                    for entry in keys.signer.keys_json()["keys"]]
        return [f"SIGNOFF_PUBLIC_KEY={keys.signer.public_keys}"]
    finally:
        await store.close()


def run(args: argparse.Namespace, url: str, environ: Mapping[str, str] = os.environ) -> int:
    from bot.errors import SignoffError

    configured = (environ.get("SIGNOFF_SIGNING_KEY") or "").strip() or None
    if args.command == "keys":
        if args.new:
            from bot.approvals.keys import new_seed

            print(f"SIGNOFF_SIGNING_KEY={new_seed()}")
            return 0
        if (args.action == "retire") != (args.kid is not None):
            print("signoff keys: retire takes one key id (`signoff keys list` shows them); nothing else does",
                  file=sys.stderr)
            return 2
        try:
            lines = asyncio.run(keys_command(url, configured, args.action, args.kid))
        except SignoffError as exc:
            print(f"signoff keys: {exc.message}", file=sys.stderr)
            return 1
        print("\n".join(lines))
        return 0
    if args.action == "anchor":
        made = asyncio.run(make_anchor(url, configured))
        if made is None:
            print("signoff audit anchor: the audit chain is empty; nothing to anchor", file=sys.stderr)
            return 1
        print(json.dumps(made.to_json()))
        return 0
    if args.action == "verify":
        anchor = None
        if args.anchor:
            token = args.token or environ.get("SIGNOFF_TOKEN")
            try:
                anchor = anchor_of(read_anchor(args.anchor, token))
            except (OSError, ValueError) as exc:
                print(f"signoff audit verify: cannot read the anchor {args.anchor}: {exc}", file=sys.stderr)
                return 2
        ok, words = asyncio.run(verify(url, anchor, configured))
        print(words)
        return 0 if ok else 1
    now = datetime.now(UTC)
    try:
        wanted = AuditFilter(since=when(args.since, now), until=when(args.until, now), tool=args.tool,
                             person=args.person, outcome=args.outcome)
    except ValueError as exc:
        print(f"signoff: {exc}", file=sys.stderr)
        return 2
    if args.output:
        with open(args.output, "w", encoding="utf-8", newline="") as out:
            count = asyncio.run(export(url, wanted, args.format, out))
    else:
        count = asyncio.run(export(url, wanted, args.format, sys.stdout))
    print(f"exported {count} audit rows", file=sys.stderr)
    return 0
