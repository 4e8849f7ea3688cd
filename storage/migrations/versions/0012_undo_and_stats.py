"""The undo window's stored timer and the time-to-decide statistics' columns and indexes.

- `requests.undo_until`: an approval held in its tier's undo window until then (bot/domain/undo.py);
  the row is due then (`next_due_at`), so the timer sweep writes the held approval once, in any replica,
  after a restart too.
- `requests.first_viewed_at`: when a person first opened the request (its App Home listing or a modal),
  for the time-to-first-view histogram (bot/approvals/stats.py).
- `ix_requests_created`, `ix_requests_channel_created`: `/signoff stats`, App Home's section and the
  weekly digest read one time range (7 days) of one channel or of the workspace, never all history.

Revision ID: 0012_undo_and_stats
Revises: 0010_resume_claims
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.schema import UTCDateTime

revision = "0012_undo_and_stats"
down_revision = "0011_audit_chain"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.add_column(sa.Column("undo_until", UTCDateTime))
        batch.add_column(sa.Column("first_viewed_at", UTCDateTime))
    op.create_index("ix_requests_created", "requests", ["created_at"])
    op.create_index("ix_requests_channel_created", "requests", ["channel", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_requests_channel_created", table_name="requests")
    op.drop_index("ix_requests_created", table_name="requests")
    with op.batch_alter_table("requests") as batch:
        batch.drop_column("first_viewed_at")
        batch.drop_column("undo_until")
