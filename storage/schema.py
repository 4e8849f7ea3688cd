"""SQLAlchemy table definitions. Alembic migrations own the real schema; these mirror them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

metadata = sa.MetaData()

# Plain JSON, not JSONB: JSONB reorders object keys, and the order of an agent's params and of a
# schema's properties is what people see in the card and the edit form.
Json = sa.JSON()


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every engine (SQLite hands back naive values)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def bind_processor(self, dialect: Any) -> Any:
        """SQLite: the text SQLAlchemy's DATETIME writes (`YYYY-MM-DD HH:MM:SS.ffffff`, naive UTC) in one
        call; its own processor formats each field with `%` (5.5 % of the auto-allowed path's samples).
        tests/storage/test_schema.py compares the two."""
        if dialect.name != "sqlite":
            return super().bind_processor(dialect)

        def process(value: datetime | None) -> str | None:
            if value is None:
                return None
            if value.tzinfo is None:
                raise ValueError("naive datetime given to storage")
            return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")

        return process

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to storage")
        value = value.astimezone(UTC)
        # SQLite compares the stored text; keep every value in one canonical, naive-UTC form.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


requests = sa.Table(
    "requests",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("action_name", sa.String(200), nullable=False),
    sa.Column("params", Json, nullable=False),
    sa.Column("params_schema", Json),
    sa.Column("summary", sa.Text, nullable=False),
    sa.Column("context", sa.Text),
    sa.Column("preview", Json),
    sa.Column("risk", sa.String(16), nullable=False),
    sa.Column("channel", sa.String(40), nullable=False),
    sa.Column("approvers", Json, nullable=False),
    sa.Column("callback_url", sa.Text),
    sa.Column("requested_by", sa.String(200)),
    sa.Column("card_channel", sa.String(40)),
    sa.Column("card_ts", sa.String(40)),
    sa.Column("thread_ts", sa.String(40)),
    sa.Column("idempotency_key", sa.String(255)),
    sa.Column("body_hash", sa.String(64)),
    sa.Column("extra", Json, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.Column("next_due_at", UTCDateTime),
    # Timers (migration 0002): the timing given at submit, and how far along it the request is.
    sa.Column("timing", Json),
    sa.Column("reminders_sent", sa.Integer, nullable=False, server_default="0"),
    sa.Column("remind_at", UTCDateTime),
    sa.Column("escalation_loop", sa.Integer, nullable=False, server_default="0"),
    sa.Column("escalation_level", sa.Integer, nullable=False, server_default="0"),
    sa.Column("escalate_at", UTCDateTime),
    sa.Column("expires_at", UTCDateTime),
    sa.Column("snoozed_until", UTCDateTime),
    sa.Column("escalation", Json),  # who it was escalated to/from, by whom, the note
    sa.Column("card_permalink", sa.Text),
    # Quorum, separation of duties, typed confirmation, batches (migration 0004_votes).
    sa.Column("quorum", sa.Integer, nullable=False, server_default="1"),
    sa.Column("requester_may_approve", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("confirm", sa.Text),
    sa.Column("requester_user", sa.String(40)),
    sa.Column("votes", Json),
    sa.Column("items", Json),
    # The API token that made it (migration 0008; extra["api_token"] too): its pending requests counted
    # at submit (SIGNOFF_MAX_PENDING_PER_TOKEN) on an index of pending rows only.
    sa.Column("owner", sa.String(100)),
    # Migration 0012: an approval held in its undo window until then (due then: next_due_at too), and when
    # a person first opened the request (App Home, a modal), for the time-to-first-view histogram.
    sa.Column("undo_until", UTCDateTime),
    sa.Column("first_viewed_at", UTCDateTime),
    sa.Index("ix_requests_created", "created_at"),
    sa.Index("ix_requests_channel_created", "channel", "created_at"),
    sa.Index("ix_requests_owner_pending", "owner", sqlite_where=sa.text("status = 'pending'"),
             postgresql_where=sa.text("status = 'pending'")),
    sa.Index("ix_requests_status_created", "status", "created_at", "id"),
    sa.Index("ux_requests_idempotency_key", "idempotency_key", unique=True),
    sa.Index("ix_requests_next_due_at", "next_due_at"),
)

decisions = sa.Table(
    "decisions",
    metadata,
    sa.Column("request_id", sa.String(40), sa.ForeignKey("requests.id"), primary_key=True),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("params", Json, nullable=False),
    sa.Column("changes", Json, nullable=False),
    sa.Column("comment", sa.Text),
    sa.Column("decided_by_id", sa.String(40)),
    sa.Column("decided_by_name", sa.String(200)),
    sa.Column("decided_at", UTCDateTime, nullable=False),
    sa.Column("via", sa.String(16), nullable=False),
    sa.Column("votes", Json),  # migration 0004_votes
    sa.Column("params_sha256", sa.String(64)),
    sa.Column("items", Json),
    sa.Index("ix_decisions_decided_by", "decided_by_id", "decided_at"),  # App Home: "decided by you"
)

audit_events = sa.Table(
    "audit_events",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
    sa.Column("request_id", sa.String(40), nullable=False),
    sa.Column("type", sa.String(40), nullable=False),
    sa.Column("actor", sa.String(200)),
    sa.Column("data", Json, nullable=False),
    sa.Column("at", UTCDateTime, nullable=False),
    # The hash chain (migration 0011, bot/domain/audit_chain.py): None until the sealer gives the row its
    # position; the approval path writes rows without them.
    sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite")),
    sa.Column("prev_hash", sa.String(64)),
    sa.Column("hash", sa.String(64)),
    sa.Index("ix_audit_events_request", "request_id", "id"),
    sa.Index("ux_audit_events_seq", "seq", unique=True, sqlite_where=sa.text("seq IS NOT NULL"),
             postgresql_where=sa.text("seq IS NOT NULL")),
    sa.Index("ix_audit_events_unsealed", "id", sqlite_where=sa.text("seq IS NULL"),
             postgresql_where=sa.text("seq IS NULL")),
    sa.Index("ix_audit_events_at", "at", "id"),  # migration 0020: the audit API's `since` (storage/audit_store.py)
)

# The chain's head: one row (id 1), the last sealed position and its hash. A sealer holds it (FOR UPDATE on
# PostgreSQL; SQLite's one writer) for its whole transaction, so positions are given one sealer at a time.
audit_head = sa.Table(
    "audit_head",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
)

# The server's Ed25519 decision-signing keys (migration 0011): made on first start when SIGNOFF_SIGNING_KEY
# is not set, and shared by every replica through the database. `private_key`: the 32-byte seed, base64url.
# `name` is the slot ("current"): replicas starting at once each try to insert theirs, one wins, all read it.
signing_keys = sa.Table(
    "signing_keys",
    metadata,
    sa.Column("name", sa.String(40), primary_key=True),
    sa.Column("kid", sa.String(40), nullable=False),
    sa.Column("private_key", sa.String(100), nullable=False),
    sa.Column("public_key", sa.String(100), nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    # Migration 0017 (key rotation): when it was the current key, when it was withdrawn, and the previous
    # key's signature over it. The current key's slot is `current`; a rotated-out one is `kid:<kid>`.
    sa.Column("since", UTCDateTime),
    sa.Column("until", UTCDateTime),
    sa.Column("retired_at", UTCDateTime),
    sa.Column("endorsed_by", sa.String(40)),
    sa.Column("endorsement", sa.String(200)),
)

# The audit chain's head signed with the decision key (migration 0017; bot/approvals/audit.py): one row
# per anchored position, kept so that a later rewrite of the chain before it can be shown.
audit_anchors = sa.Table(
    "audit_anchors",
    metadata,
    sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=False),
    sa.Column("hash", sa.String(64), nullable=False),
    sa.Column("at", UTCDateTime, nullable=False),
    sa.Column("kid", sa.String(40), nullable=False),
    sa.Column("sig", sa.String(200), nullable=False),
)

outbox = sa.Table(
    "outbox",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
    sa.Column("request_id", sa.String(40)),
    sa.Column("kind", sa.String(40), nullable=False),
    sa.Column("dedupe_key", sa.String(255), nullable=False),
    sa.Column("payload", Json, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("failures", sa.Integer, nullable=False),
    sa.Column("next_attempt_at", UTCDateTime, nullable=False),
    sa.Column("lease_until", UTCDateTime),
    sa.Column("last_error", sa.Text),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("done_at", UTCDateTime),
    sa.Index("ux_outbox_dedupe_key", "dedupe_key", unique=True),
    sa.Index("ix_outbox_due", "status", "next_attempt_at"),
    # Migration 0020: the dispatcher's claim and next-due read walk the pending items only, however many
    # delivered ones a long history holds (storage/sql_statements.PENDING_ITEM).
    sa.Index("ix_outbox_pending", "id", sqlite_where=sa.text("status = 'pending'"),
             postgresql_where=sa.text("status = 'pending'")),
)


# One approval of a request that needs a quorum (migration 0004_votes). The primary key is the
# guard: one person can never count twice, whatever the application read.
votes = sa.Table(
    "votes",
    metadata,
    sa.Column("request_id", sa.String(40), sa.ForeignKey("requests.id"), primary_key=True),
    sa.Column("voter_id", sa.String(40), primary_key=True),
    sa.Column("voter_name", sa.String(200)),
    sa.Column("at", UTCDateTime, nullable=False),
)


# Who a request concerns, per Slack user (migration 0002): the App Home inbox reads it by user.
# role: "approver" (listed directly or through a user group, expanded when it was added) or
# "escalated" (an escalation reached them). Authorization never reads this table: it is an index.
request_people = sa.Table(
    "request_people",
    metadata,
    sa.Column("request_id", sa.String(40), sa.ForeignKey("requests.id"), primary_key=True),
    sa.Column("user_id", sa.String(40), primary_key=True),
    sa.Column("role", sa.String(16), primary_key=True),
    sa.Column("added_at", UTCDateTime, nullable=False),
    sa.Index("ix_request_people_user", "user_id", "role", "request_id"),
)

# Users who have opened Signoff's App Home: only their Home is republished when it changes.
home_users = sa.Table(
    "home_users",
    metadata,
    sa.Column("user_id", sa.String(40), primary_key=True),
    sa.Column("first_opened_at", UTCDateTime, nullable=False),
    sa.Column("last_opened_at", UTCDateTime, nullable=False),
)

# Slack's pace per channel, shared by every replica (bot/slack/pace.py): the earliest time the
# next chat.postMessage to `channel` may go. Taken with one guarded UPDATE, so two replicas never
# both post in one slot.
channel_pace = sa.Table(
    "channel_pace",
    metadata,
    sa.Column("channel", sa.String(40), primary_key=True),
    sa.Column("next_at", UTCDateTime, nullable=False),
)

# What Slack sent, stored before the ack (migration 0014_slack_received; bot/slack/received.py): the raw
# body, unique on Slack's own id for it (`key`), held by the process handling it until `lease_until`,
# replayed by any process after that until `done_at` is set.
slack_received = sa.Table(
    "slack_received",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(200), nullable=False, unique=True),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("content_type", sa.String(80), nullable=False),
    sa.Column("received_at", UTCDateTime, nullable=False),
    sa.Column("lease_until", UTCDateTime, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("done_at", UTCDateTime, nullable=True),
    sa.Index("ix_slack_received_open", "done_at", "lease_until"),
)

# Resume claims (migration 0010_resume_claims; bot/domain/resumes.py): at most one resumer applies a
# decision to a suspended agent call. The key is the claiming API token's name and the key it chose;
# every change is one statement guarded on state, owner and lease (storage/resume_sql.py).
resume_claims = sa.Table(
    "resume_claims",
    metadata,
    sa.Column("token", sa.String(100), primary_key=True),
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("owner", sa.String(200), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("lease_until", UTCDateTime, nullable=False),
    sa.Column("request_ids", Json, nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)


# What retention (SIGNOFF_RETENTION_DAYS, migration 0020; bot/approvals/retention.py) keeps of a decided
# request it took out of `requests`: enough for its audit rows to name their tool and for a GET of its id
# to say it was archived. The audit rows themselves stay as they were.
requests_archive = sa.Table(
    "requests_archive",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("action_name", sa.String(200), nullable=False),
    sa.Column("channel", sa.String(40), nullable=False),
    sa.Column("owner", sa.String(100)),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("decided_at", UTCDateTime, nullable=False),
    sa.Column("archived_at", UTCDateTime, nullable=False),
)

# Jobs that run in one replica at a time (migration 0020): whoever moves `due_at` forward with a guarded
# update (`WHERE due_at <= now`) runs the job; the others see the row not due. `owner`: who claimed it last.
job_claims = sa.Table(
    "job_claims",
    metadata,
    sa.Column("name", sa.String(40), primary_key=True),
    sa.Column("due_at", UTCDateTime, nullable=False),
    sa.Column("owner", sa.String(200)),
)
