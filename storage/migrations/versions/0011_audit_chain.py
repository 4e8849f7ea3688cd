"""The audit log's hash chain and the decision-signing key.

`audit_events` gains `seq`, `prev_hash` and `hash` (bot/domain/audit_chain.py); `audit_head` holds the
chain's last position and hash; existing rows are chained here, oldest first, so `signoff audit verify`
covers the whole history. `signing_keys` keeps the server's Ed25519 key when SIGNOFF_SIGNING_KEY is not
set (bot/approvals/keys.py), shared by every replica.

Revision ID: 0011_audit_chain
Revises: 0010_resume_claims
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.schema import UTCDateTime

revision = "0011_audit_chain"
down_revision = "0010_resume_claims"
branch_labels = None
depends_on = None

_SEQ = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("audit_events") as batch:
        batch.add_column(sa.Column("seq", _SEQ))
        batch.add_column(sa.Column("prev_hash", sa.String(64)))
        batch.add_column(sa.Column("hash", sa.String(64)))
    op.create_index("ux_audit_events_seq", "audit_events", ["seq"], unique=True,
                    sqlite_where=sa.text("seq IS NOT NULL"), postgresql_where=sa.text("seq IS NOT NULL"))
    op.create_index("ix_audit_events_unsealed", "audit_events", ["id"],
                    sqlite_where=sa.text("seq IS NULL"), postgresql_where=sa.text("seq IS NULL"))
    op.create_table(
        "audit_head",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("seq", _SEQ, nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
    )
    op.create_table(
        "signing_keys",
        sa.Column("name", sa.String(40), primary_key=True),
        sa.Column("kid", sa.String(40), nullable=False),
        sa.Column("private_key", sa.String(100), nullable=False),
        sa.Column("public_key", sa.String(100), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    from storage.audit_seal import GENESIS_HEAD, seal_sync

    op.execute(sa.text("INSERT INTO audit_head (id, seq, hash) VALUES (1, 0, :h)").bindparams(h=GENESIS_HEAD))
    seal_sync(op.get_bind())  # the rows written before the chain, in id order


def downgrade() -> None:
    op.drop_table("signing_keys")
    op.drop_table("audit_head")
    op.drop_index("ix_audit_events_unsealed", "audit_events")
    op.drop_index("ux_audit_events_seq", "audit_events")
    with op.batch_alter_table("audit_events") as batch:
        batch.drop_column("hash")
        batch.drop_column("prev_hash")
        batch.drop_column("seq")
