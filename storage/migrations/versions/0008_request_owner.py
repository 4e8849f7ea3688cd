"""The API token that made a request as a column of its own: `requests.owner`.

The token's name was kept only inside the JSON `extra` (`extra.api_token`). Counting a token's
pending requests at every submit (SIGNOFF_MAX_PENDING_PER_TOKEN) needs it indexed: a partial index
of pending rows only, so a year of decided history costs the count nothing. Existing rows are
filled from `extra.api_token`.

Revision ID: 0008_request_owner
Revises: 0007_channel_pace
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.schema import Json

revision = "0008_request_owner"
down_revision = "0007_channel_pace"
branch_labels = None
depends_on = None

PENDING = sa.text("status = 'pending'")


def upgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.add_column(sa.Column("owner", sa.String(100)))
    requests = sa.table("requests", sa.column("owner", sa.String(100)), sa.column("extra", Json))
    # Names are at most 100 characters (bot.api.tokens.MAX_NAME_CHARS); an older, longer one keeps no owner.
    name = requests.c.extra["api_token"].as_string()
    op.execute(requests.update().where(sa.func.length(name) <= 100).values(owner=name))
    op.create_index("ix_requests_owner_pending", "requests", ["owner"], sqlite_where=PENDING,
                    postgresql_where=PENDING)


def downgrade() -> None:
    op.drop_index("ix_requests_owner_pending", table_name="requests")
    with op.batch_alter_table("requests") as batch:
        batch.drop_column("owner")
