"""Alembic environment for the leaderboard database.

``leaderboard.db.upgrade`` passes an open connection in ``config.attributes``; the
``alembic`` command line (with ``-x url=...`` or ``sqlalchemy.url``) works too.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from leaderboard.models import Base

config = context.config
target_metadata = Base.metadata


def _configure_and_run(connection) -> None:
    # Batch mode: SQLite cannot ALTER most things; batch migrations copy tables instead.
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure_and_run(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    if not url:
        raise RuntimeError("no database: pass `-x url=...` or set sqlalchemy.url in alembic.ini")
    engine = create_engine(url)
    with engine.connect() as conn:
        _configure_and_run(conn)
        conn.commit()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
