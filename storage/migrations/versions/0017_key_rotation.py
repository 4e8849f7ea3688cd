"""Key rotation and the audit chain's signed anchors.

- `signing_keys` keeps every decision-signing key, not only the current one (bot/approvals/keys.py):
  `since`/`until` the time it was the current key, `retired_at` when an operator withdrew it (a decision
  signed by it after that is refused by the agent side), `endorsed_by`/`endorsement` the previous key's
  signature over this one (an agent that trusts the previous key takes this one only with it). The
  current key keeps the slot name `current`; a rotated-out key is renamed `kid:<kid>`.
- `audit_anchors`: the chain's head (position and hash) signed with the decision key at a time
  (bot/approvals/audit.py), one row per anchored position.

Revision ID: 0017_key_rotation
Revises: 0016_suggestion_dismissals
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.schema import UTCDateTime

revision = "0017_key_rotation"
down_revision = "0016_suggestion_dismissals"
branch_labels = None
depends_on = None

_SEQ = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("signing_keys") as batch:
        batch.add_column(sa.Column("since", UTCDateTime))
        batch.add_column(sa.Column("until", UTCDateTime))
        batch.add_column(sa.Column("retired_at", UTCDateTime))
        batch.add_column(sa.Column("endorsed_by", sa.String(40)))
        batch.add_column(sa.Column("endorsement", sa.String(200)))
    op.execute(sa.text("UPDATE signing_keys SET since = created_at"))
    op.create_table(
        "audit_anchors",
        sa.Column("seq", _SEQ, primary_key=True, autoincrement=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("at", UTCDateTime, nullable=False),
        sa.Column("kid", sa.String(40), nullable=False),
        sa.Column("sig", sa.String(200), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("audit_anchors")
    with op.batch_alter_table("signing_keys") as batch:
        batch.drop_column("endorsement")
        batch.drop_column("endorsed_by")
        batch.drop_column("retired_at")
        batch.drop_column("until")
        batch.drop_column("since")
