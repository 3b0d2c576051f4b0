"""MariaDB and MySQL: the ORM's ways (``base.Dialect``) are theirs, but the worker row's upsert.

The locking claim in ``Dialect.claim`` is written for InnoDB (candidates read first, then only
they are locked with SKIP LOCKED); MariaDB 10.5+ returns the ids of a bulk INSERT, MySQL 8 gets
one INSERT per row in the same transaction.
"""

from __future__ import annotations

from typing import Any

from . import workers
from .base import Dialect


class MySQLDialect(Dialect):
    def upsert_worker(self, alias: str, row: dict[str, Any]) -> None:
        workers.upsert(alias, row, workers.on_duplicate_key)
