"""History that does not slow the hot paths: retention's archive and its claim, and the indexes a large
history needs.

- `requests_archive`: what is kept of a decided request that retention (SIGNOFF_RETENTION_DAYS) took out
  of `requests`: its id, tool and outcome, so its audit rows still name their tool and a GET of its id
  says it was archived (the audit rows themselves are never touched: the hash chain still verifies).
- `job_claims`: one row per job that must run in one replica at a time (retention): a guarded update
  of `due_at` claims it, as the timers claim due rows.
- `ix_audit_events_at`: the audit API's and export's `since` filter starts at the first row in range,
  not at the log's first row.
- `ix_outbox_pending`: the outbox dispatcher's claim reads the pending items only. On the status index,
  SQLite with statistics (every row of a long history is `done`) chose to scan the whole table.

Revision ID: 0020_history
Revises: 0019_similar_cards
Create Date: 2026-12-06
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from storage.schema import UTCDateTime

revision = "0020_history"
down_revision = "0019_similar_cards"
branch_labels = None
depends_on = None

PENDING = sa.text("status = 'pending'")


def upgrade() -> None:
    op.create_table(
        "requests_archive",
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
    claims = op.create_table(
        "job_claims",
        sa.Column("name", sa.String(40), primary_key=True),
        sa.Column("due_at", UTCDateTime, nullable=False),
        sa.Column("owner", sa.String(200)),
    )
    op.bulk_insert(claims, [{"name": "retention", "due_at": datetime(2000, 1, 1, tzinfo=UTC), "owner": None}])
    op.create_index("ix_audit_events_at", "audit_events", ["at", "id"])
    op.create_index("ix_outbox_pending", "outbox", ["id"], sqlite_where=PENDING, postgresql_where=PENDING)


def downgrade() -> None:
    op.drop_index("ix_outbox_pending", table_name="outbox")
    op.drop_index("ix_audit_events_at", table_name="audit_events")
    op.drop_table("job_claims")
    op.drop_table("requests_archive")
