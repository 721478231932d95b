"""environment versions: the versioned id's version and the environment fingerprint per row

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-04 01:40:00

Rows stored before this revision came from bundles without an environment fingerprint (schema
1 and 2, ids without ``-vN``): both columns stay NULL, and the leaderboard lists those rows as
*unversioned*, never ranked with versioned ones (docs/leaderboard.md).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("env_version", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("env_fingerprint", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("env_fingerprint_parts", sa.JSON(), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_submissions_env_version"), ["env_version"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_submissions_env_version"))
        batch_op.drop_column("env_fingerprint_parts")
        batch_op.drop_column("env_fingerprint")
        batch_op.drop_column("env_version")
