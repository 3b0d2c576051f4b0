"""The fairness section's ceilings: the enqueues' own statements, replayed with nothing around them.

A fair enqueue cannot cost less than the statements it sends. Each variant replays, through a
Django cursor (as any Django code sends SQL), the statements captured once from a real
``enqueue()`` or ``enqueue_many`` of the same jobs, with and without a fair key:

- ``statement_single``: the INSERT ``enqueue()`` sends (a fair job's computes its place: the
  key's last place and the queue's head, two index reads in ``leasejobs_fair_place``);
- ``given_single``: the fair job's INSERT with its place given (``STATEMENT_TIMESTAMP()``, no
  read): what the fair row alone costs, its columns and index entries;
- ``statement_bulk``: every statement of a list of 1,000 jobs over 10 keys (the database's
  time, the read of the keys' lines, the INSERT, the NOTIFY), in one transaction;
- ``given_bulk``: the same list without the read: the rows with their places, each placed
  among the waiting jobs instead of at the end of the queue's order.

The ratios (fair over plain) are what a fair enqueue could reach if the library added nothing
to its statements.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction
from testapp import jobs

PLACE = "(SELECT at FROM place)"
"""How the fair single INSERT takes the place its ``WITH place AS (...)`` computed."""

Statements = list[tuple[str, Any]]


def captured(call: Callable[[], Any]) -> Statements:
    """The statements ``call`` sends, with their parameters, in order."""
    sent: Statements = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        sent.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        call()
    return sent


def given(statements: Statements) -> Statements:
    """The fair statements with the place given: the single INSERT's ``WITH`` dropped, the bulk
    list's read of the keys' lines left out (its INSERT carries the places as values)."""
    out: Statements = []
    for sql, params in statements:
        if "leasejobs_fair_place" in sql:
            if PLACE not in sql:
                raise RuntimeError("the fair INSERT no longer takes its place as " + PLACE)
            insert = sql[sql.index("INSERT INTO") :]
            out.append((insert.replace(PLACE, "STATEMENT_TIMESTAMP()"), params))
        elif "fair_key = g.fair_key" not in sql:
            out.append((sql, params))
    return out


def _replay(statements: Statements) -> None:
    with connection.cursor() as cursor:
        for sql, params in statements:
            cursor.execute(sql, params)
            if cursor.description is not None:
                cursor.fetchall()


def _replayed(statements: Statements, times: int, *, atomic: bool) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        for _ in range(times):
            if atomic:
                with transaction.atomic():
                    _replay(statements)
            else:
                _replay(statements)
        return time.perf_counter() - start

    return run


def variants(single_count: int, lists: int, keys: int) -> dict[str, Callable[[], float]]:
    """Each variant's timed replay: ``single_count`` single INSERTs, ``lists`` lists of 1,000."""
    items = [((f"a{n % keys}",), {"n": n}) for n in range(1000)]
    with transaction.atomic():
        single = {
            "fair": captured(lambda: jobs.per_account.enqueue("a1", 1)),
            "plain": captured(lambda: jobs.account_work.enqueue("a1", 1)),
        }
        bulk = {
            "fair": captured(lambda: jobs.per_account.enqueue_many(items)),
            "plain": captured(lambda: jobs.account_work.enqueue_many(items)),
        }
        transaction.set_rollback(True)
    return {
        "statement_single_fair": _replayed(single["fair"], single_count, atomic=False),
        "given_single_fair": _replayed(given(single["fair"]), single_count, atomic=False),
        "statement_single_plain": _replayed(single["plain"], single_count, atomic=False),
        "statement_bulk_fair": _replayed(bulk["fair"], lists, atomic=True),
        "given_bulk_fair": _replayed(given(bulk["fair"]), lists, atomic=True),
        "statement_bulk_plain": _replayed(bulk["plain"], lists, atomic=True),
    }


def ratios(seconds: dict[str, float]) -> dict[str, float]:
    """Fair over plain, in rates, for each fair variant (``fair_<variant>_vs_plain``)."""
    out: dict[str, float] = {}
    for kind in ("single", "bulk"):
        plain = seconds[f"statement_{kind}_plain"]
        for variant in ("statement", "given"):
            out[f"fair_{variant}_{kind}_vs_plain"] = plain / seconds[f"{variant}_{kind}_fair"]
    return out
