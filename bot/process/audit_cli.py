"""`signoff audit verify|export` and `signoff keys`: the audit log and the signing key from a shell.

    signoff audit verify
        seal what the server has not sealed yet, walk the whole chain, print where it first breaks
        (exit 1) or that it is intact with its head (exit 0)
    signoff audit export [--since 2026-12-01 | --since 7d] [--until ...] [--tool T] [--person U]
                         [--outcome O] [--format jsonl|csv] [--output FILE]
        every matching row, oldest first, streamed a page at a time (memory stays flat)
    signoff keys [--new]
        the public decision-signing key, as SIGNOFF_PUBLIC_KEY takes it (made now if there is none);
        --new prints a fresh private key for SIGNOFF_SIGNING_KEY and touches nothing
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
    audit_sub.add_parser("verify", help="walk the hash chain; exit 1 at the first altered or missing row")
    export = audit_sub.add_parser("export", help="stream the audit rows as JSON lines or CSV")
    export.add_argument("--since", help="an ISO time or date (UTC unless it says), or a duration back from now: 7d")
    export.add_argument("--until", help="as --since; rows before it")
    export.add_argument("--tool", help="only rows of requests for this action")
    export.add_argument("--person", help="only rows whose actor is this (a Slack user id)")
    export.add_argument("--outcome", help="only rows with this outcome (approved, rejected, ...)")
    export.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    export.add_argument("--output", help="a file to write (default: standard output)")
    keys = sub.add_parser("keys", help="print the public key that signs decisions (SIGNOFF_PUBLIC_KEY)")
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


async def verify(url: str) -> tuple[bool, str]:
    from bot.approvals.audit import AuditLog
    from storage.stores import open_store

    store = await open_store(url, pool_size=2)
    try:
        report = await AuditLog(store).verify()
    finally:
        await store.close()
    return report.ok, report.words()


async def public_key(url: str, configured: str | None) -> str:
    from bot.approvals.keys import load_signer
    from storage.signing_keys import SigningKeyStore
    from storage.stores import open_store

    if configured is not None:
        from bot.approvals.keys import Signer

        return Signer.from_seed(configured).public_key
    store = await open_store(url, pool_size=2)
    try:
        return (await load_signer(None, SigningKeyStore(store), datetime.now(UTC))).public_key
    finally:
        await store.close()


def run(args: argparse.Namespace, url: str, environ: Mapping[str, str] = os.environ) -> int:
    if args.command == "keys":
        if args.new:
            from bot.approvals.keys import new_seed

            print(f"SIGNOFF_SIGNING_KEY={new_seed()}")
            return 0
        configured = (environ.get("SIGNOFF_SIGNING_KEY") or "").strip() or None
        print(f"SIGNOFF_PUBLIC_KEY={asyncio.run(public_key(url, configured))}")
        return 0
    if args.action == "verify":
        ok, words = asyncio.run(verify(url))
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
