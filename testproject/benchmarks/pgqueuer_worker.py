"""PgQueuer, the peer the worker is judged against: seed its queue, drain it, time it.

PgQueuer (asyncpg, its own tables) runs in its own processes on the same database as the
library's figures, with a no-op async entrypoint and its drain mode (exit when the queue is
empty). Its log table records each job's ``picked`` and ``successful`` times, so its rate is
read the same way as the library's: first start to last finish, in database time. Log folding
is switched off so that the rows are still there to read.

Run: ``python pgqueuer_worker.py seed DSN N`` then ``python pgqueuer_worker.py drain DSN BATCH``
(one process per worker); ``span DSN`` prints ``count seconds``; ``uninstall DSN``.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta

import asyncpg
from pgqueuer import AsyncpgDriver, QueueManager
from pgqueuer.models import Job
from pgqueuer.queries import Queries
from pgqueuer.types import QueueExecutionMode

ENTRYPOINT = "noop"
SEED_CHUNK = 5000


async def seed(dsn: str, count: int) -> None:
    """A fresh PgQueuer schema holding ``count`` due no-op jobs."""
    connection = await asyncpg.connect(dsn)
    try:
        queries = Queries(AsyncpgDriver(connection))
        if await queries.schema_is_installed():
            await queries.uninstall()
        await queries.install()
        for start in range(0, count, SEED_CHUNK):
            size = min(SEED_CHUNK, count - start)
            await queries.enqueue([ENTRYPOINT] * size, [None] * size, [0] * size)
        await connection.execute("VACUUM ANALYZE pgqueuer")
    finally:
        await connection.close()


async def uninstall(dsn: str) -> None:
    """Drop PgQueuer's tables, functions and types from the scratch database."""
    connection = await asyncpg.connect(dsn)
    try:
        queries = Queries(AsyncpgDriver(connection))
        if await queries.schema_is_installed():
            await queries.uninstall()
    finally:
        await connection.close()


async def drain(dsn: str, batch_size: int) -> None:
    """One PgQueuer worker with its defaults but ``batch_size``, until the queue is empty."""
    connection = await asyncpg.connect(dsn)
    try:
        manager = QueueManager(Queries(AsyncpgDriver(connection)))

        @manager.entrypoint(ENTRYPOINT)
        async def noop(job: Job) -> None:
            """The job: nothing."""

        await manager.run(
            batch_size=batch_size,
            mode=QueueExecutionMode.drain,
            log_aggregation_interval=timedelta(0),
        )
    finally:
        await connection.close()


async def span(dsn: str) -> tuple[int, float]:
    """(jobs succeeded, seconds from the first pick to the last success)."""
    connection = await asyncpg.connect(dsn)
    try:
        row = await connection.fetchrow(
            "SELECT count(*) FILTER (WHERE status = 'successful'),"
            " EXTRACT(EPOCH FROM max(created) FILTER (WHERE status = 'successful')"
            " - min(created) FILTER (WHERE status = 'picked'))::float8 FROM pgqueuer_log"
        )
    finally:
        await connection.close()
    return int(row[0]), float(row[1] or 0.0)


if __name__ == "__main__":
    command, dsn = sys.argv[1], sys.argv[2]
    if command == "seed":
        asyncio.run(seed(dsn, int(sys.argv[3])))
    elif command == "drain":
        asyncio.run(drain(dsn, int(sys.argv[3])))
    elif command == "uninstall":
        asyncio.run(uninstall(dsn))
    elif command == "span":
        count, seconds = asyncio.run(span(dsn))
        print(count, seconds)
    else:
        raise SystemExit(f"unknown command {command!r}: seed, drain or span")
