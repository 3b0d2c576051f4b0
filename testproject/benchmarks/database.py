"""The scratch database: created for a benchmark run, migrated, reset between sections, dropped.

Benchmarks talk to PostgreSQL in two ways: through Django (the code under test, in subprocesses
whose ``DATABASE_URL`` points here) and through psycopg directly (seeding rows fast, the raw-SQL
ceiling, reading results), so this module hands out both a URL and a libpq conninfo string.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg import sql

MANAGE = Path(__file__).resolve().parent.parent / "manage.py"
JOB_TABLE = "django_leasejobs_job"
NOOP = "testapp.jobs.noop"
SHARD_ALIAS = "shard"
"""The second queue database of testproject's settings: the configured database's name with
``_shard``, on the same server (the ``shards`` section's)."""


@dataclass(frozen=True)
class Target:
    """Where a PostgreSQL database lives, and its name."""

    host: str
    port: int
    user: str
    password: str
    name: str

    @classmethod
    def from_settings(cls, settings_dict: dict[str, Any]) -> Target:
        return cls(
            host=settings_dict.get("HOST") or "127.0.0.1",
            port=int(settings_dict.get("PORT") or 5432),
            user=settings_dict.get("USER") or "postgres",
            password=settings_dict.get("PASSWORD") or "",
            name=settings_dict["NAME"],
        )

    def named(self, name: str) -> Target:
        return replace(self, name=name)

    @property
    def conninfo(self) -> str:
        return psycopg.conninfo.make_conninfo(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password or None,
            dbname=self.name,
        )

    @property
    def url(self) -> str:
        auth = quote(self.user, safe="")
        if self.password:
            auth += ":" + quote(self.password, safe="")
        return f"postgres://{auth}@{self.host}:{self.port}/{quote(self.name, safe='')}"

    def connect(self, **kwargs: Any) -> psycopg.Connection[Any]:
        return psycopg.connect(self.conninfo, autocommit=True, **kwargs)


def create(target: Target) -> None:
    """(Re)create the scratch database from nothing; it is the benchmark's alone.

    CREATE DATABASE copies template1 and fails while anyone else is connected to it (other test
    runs creating their databases on a shared server do that briefly), so it is retried.
    """
    with target.named("postgres").connect() as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(target.name))
        )
        for attempt in range(20):
            try:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(target.name)))
                return
            except psycopg.errors.ObjectInUse:
                if attempt == 19:
                    raise
                time.sleep(0.5)


def shard(target: Target) -> Target:
    """The database the ``shard`` alias names when ``target`` is the configured one."""
    return target.named(f"{target.name}_{SHARD_ALIAS}")


def drop(target: Target) -> None:
    with target.named("postgres").connect() as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(target.name))
        )


def environment(target: Target, **extra: str) -> dict[str, str]:
    """The environment of a subprocess that must use the scratch database."""
    env = dict(os.environ)
    env.update(
        DATABASE_URL=target.url,
        DJANGO_SETTINGS_MODULE="benchmarks.settings",
        PYTHONUNBUFFERED="1",
        **extra,
    )
    return env


def manage(*args: str) -> list[str]:
    """The argv of ``manage.py ARGS`` for a subprocess (run it with ``environment(target)``)."""
    return [sys.executable, str(MANAGE), *args]


def migrate(target: Target, alias: str = "default", **extra: str) -> None:
    """Migrate the database of ``alias`` in the settings pointed at ``target``."""
    argv = manage("migrate", "--database", alias, "--verbosity", "0")
    subprocess.run(argv, env=environment(target, **extra), check=True)


def reset(conn: psycopg.Connection[Any]) -> None:
    """Empty the job tables (and the peer's) and restart ids, so every section starts alike."""
    tables = [
        row[0]
        for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND "
            "(tablename LIKE 'django_leasejobs_%%' OR tablename LIKE 'django_tasks_database_%%')"
        )
    ]
    if tables:
        conn.execute(
            sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(
                sql.SQL(", ").join(sql.Identifier(t) for t in tables)
            )
        )


def seed(
    conn: psycopg.Connection[Any],
    count: int,
    *,
    name: str = NOOP,
    queue: str = "default",
    run_at: str = "STATEMENT_TIMESTAMP() - INTERVAL '1 second'",
) -> None:
    """Insert ``count`` due pending jobs in one statement (the fast way to build a backlog).

    The rows are exactly what ``enqueue`` writes for a no-op job; only the insert is faster.
    """
    conn.execute(
        sql.SQL(
            """
            INSERT INTO {table} (name, args, kwargs, queue, priority, status, run_at, attempt,
                released, max_attempts, lease_owner, created_at, last_error, errors, finished_by,
                task_backend)
            SELECT %s, '[]', '{{}}', %s, 0, 'pending', {run_at}, 0, 0, 5, '', STATEMENT_TIMESTAMP(),
                '', '[]', '', ''
            FROM generate_series(1, %s)
            """
        ).format(table=sql.Identifier(JOB_TABLE), run_at=sql.SQL(run_at)),
        [name, queue, count],
    )


HISTORY_COLUMN = """SELECT EXISTS (SELECT 1 FROM information_schema.columns
    WHERE table_name = 'django_leasejobs_job' AND column_name = 'in_history')"""
"""Whether the job table has ``in_history`` (a ``--baseline`` from before it has not)."""


def has_history(conn: psycopg.Connection[Any]) -> bool:
    """Whether finished rows are written with ``in_history`` (and so, on PostgreSQL, go to the
    history partitions): this checkout yes, a baseline from before migration 0025 no."""
    row = conn.execute(HISTORY_COLUMN).fetchone()
    return bool(row and row[0])


def vacuum_analyze(conn: psycopg.Connection[Any], table: str = JOB_TABLE) -> None:
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(table)))


def drain_span(conn: psycopg.Connection[Any], table: str = JOB_TABLE) -> tuple[int, float]:
    """(jobs succeeded, seconds from the first start to the last finish), in database time."""
    status = "SUCCESSFUL" if table != JOB_TABLE else "succeeded"
    row = conn.execute(
        sql.SQL(
            "SELECT count(*), EXTRACT(EPOCH FROM max(finished_at) - min(started_at)) "
            "FROM {} WHERE status = %s"
        ).format(sql.Identifier(table)),
        [status],
    ).fetchone()
    assert row is not None
    return int(row[0]), float(row[1] or 0.0)
