"""The scratch database: created for a benchmark run, migrated, reset between sections, dropped.

Benchmarks talk to PostgreSQL in two ways: through Django (the code under test, in subprocesses
whose ``DATABASE_URL`` points here) and through psycopg directly (seeding rows fast, the raw-SQL
ceiling, reading results), so this module hands out both a URL and a libpq conninfo string. The
sections that run on every database (``PORTABLE``) go through Django alone; their scratch
database is a MariaDB/MySQL database on the configured server or a SQLite file beside the
configured one.
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


PORTABLE = ("history",)
"""Sections that run on every supported database, not on PostgreSQL alone."""

_SCHEMES = {"postgresql": "postgres", "mysql": "mysql", "sqlite": "sqlite"}
_DEFAULTS = {"postgresql": (5432, "postgres"), "mysql": (3306, "root"), "sqlite": (0, "")}


@dataclass(frozen=True)
class Target:
    """Where a database lives, and its name (a file's path on SQLite). ``vendor`` is
    Django's (``postgresql``, ``mysql``, ``sqlite``)."""

    host: str
    port: int
    user: str
    password: str
    name: str
    vendor: str = "postgresql"

    @classmethod
    def from_settings(cls, settings_dict: dict[str, Any]) -> Target:
        engine = settings_dict["ENGINE"].rsplit(".", 1)[-1]
        vendor = {"sqlite3": "sqlite"}.get(engine, engine)
        port, user = _DEFAULTS.get(vendor, _DEFAULTS["postgresql"])
        return cls(
            host=settings_dict.get("HOST") or "127.0.0.1",
            port=int(settings_dict.get("PORT") or port),
            user=settings_dict.get("USER") or user,
            password=settings_dict.get("PASSWORD") or "",
            name=str(settings_dict["NAME"]),
            vendor=vendor,
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
        if self.vendor == "sqlite":
            return f"sqlite:///{Path(self.name).resolve()}"
        auth = quote(self.user, safe="")
        if self.password:
            auth += ":" + quote(self.password, safe="")
        scheme = _SCHEMES[self.vendor]
        return f"{scheme}://{auth}@{self.host}:{self.port}/{quote(self.name, safe='')}"

    def connect(self, **kwargs: Any) -> psycopg.Connection[Any]:
        return psycopg.connect(self.conninfo, autocommit=True, **kwargs)


def _mysql_name(target: Target) -> str:
    return "`" + target.name.replace("`", "``") + "`"


def _mysql_server(target: Target) -> Any:
    import MySQLdb

    return MySQLdb.connect(
        host=target.host, port=target.port, user=target.user, password=target.password
    )


def _drop_other(target: Target) -> None:
    """Drop a scratch database that is not PostgreSQL's: a MariaDB/MySQL database, or a SQLite
    file with its write-ahead log and shared memory."""
    if target.vendor == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            Path(target.name + suffix).unlink(missing_ok=True)
        return
    server = _mysql_server(target)
    try:
        server.cursor().execute(f"DROP DATABASE IF EXISTS {_mysql_name(target)}")
    finally:
        server.close()


def create(target: Target) -> None:
    """(Re)create the scratch database from nothing; it is the benchmark's alone.

    CREATE DATABASE copies template1 and fails while anyone else is connected to it (other test
    runs creating their databases on a shared server do that briefly), so it is retried.
    """
    if target.vendor != "postgresql":
        _drop_other(target)
        if target.vendor == "mysql":
            server = _mysql_server(target)
            try:
                server.cursor().execute(
                    f"CREATE DATABASE {_mysql_name(target)} CHARACTER SET utf8mb4 "
                    "COLLATE utf8mb4_unicode_ci"
                )
            finally:
                server.close()
        return
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
    if target.vendor != "postgresql":
        _drop_other(target)
        return
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
