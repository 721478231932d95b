"""grader versions: which grader produced each stored grade, and the grade it replaced

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 20:45:00

Rows stored before this revision were graded by a grader that recorded no version: they get
``legacy`` (``leaderboard.models.LEGACY_GRADER_VERSION``), which no current grader has, so they
are listed as stale until ``marft-leaderboard regrade`` re-grades them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

LEGACY = "legacy"  # a literal, not an import: a migration must not change when the code does


def upgrade() -> None:
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        # The server default fills existing rows; it is dropped below so that new rows must
        # name their grader (the models declare no default).
        batch_op.add_column(
            sa.Column(
                "grader_version", sa.String(length=100), nullable=False, server_default=LEGACY
            )
        )
        batch_op.add_column(sa.Column("previous_score", sa.Float(), nullable=True))
        batch_op.add_column(
            sa.Column("previous_grader_version", sa.String(length=100), nullable=True)
        )
        batch_op.add_column(
            sa.Column("bundle_grader_version", sa.String(length=100), nullable=True)
        )
        batch_op.create_index(
            batch_op.f("ix_submissions_grader_version"), ["grader_version"], unique=False
        )
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.alter_column("grader_version", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_submissions_grader_version"))
        batch_op.drop_column("bundle_grader_version")
        batch_op.drop_column("previous_grader_version")
        batch_op.drop_column("previous_score")
        batch_op.drop_column("grader_version")
