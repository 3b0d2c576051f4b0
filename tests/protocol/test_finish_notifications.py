"""Finish notifications (PostgreSQL): every way a job ends announces its id on
``leasejobs_finished`` when the finishing transaction commits, once per statement; a retry, a
stale write or a rolled-back finish announces nothing. ``job.wait()`` wakes on them."""

from __future__ import annotations

import contextlib
import selectors
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import override_settings
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.core import notify
from django_leasejobs.protocol import Failure, Outcome

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="LISTEN/NOTIFY is PostgreSQL's"),
    pytest.mark.django_db(transaction=True),
]


class FinishListener:
    """A raw connection listening on the finish channel, as a waiting caller's does."""

    def __init__(self) -> None:
        self.conn: Any = connection.get_new_connection(connection.get_connection_params())
        self.conn.autocommit = True
        self.conn.execute(f"LISTEN {notify.FINISHED_CHANNEL}")

    def payloads(self, timeout: float) -> list[str]:
        """Every payload that arrives within ``timeout`` (the bound only ends the wait for
        the ones that never come: each test counts what came)."""
        found: list[str] = []
        with selectors.DefaultSelector() as selector:
            selector.register(self.conn.pgconn.socket, selectors.EVENT_READ)
            while selector.select(timeout):
                self.conn.pgconn.consume_input()
                while (notice := self.conn.pgconn.notifies()) is not None:
                    found.append(notice.extra.decode())
                timeout = 0.3  # gather what follows at once, then stop
        return found

    def ids(self, timeout: float = 5.0) -> list[int]:
        return sorted(i for payload in self.payloads(timeout) for i in notify.finished_ids(payload))


@pytest.fixture
def listener() -> Iterator[FinishListener]:
    listening = FinishListener()
    yield listening
    with contextlib.suppress(Exception):
        listening.conn.close()


def claimed(count: int = 1) -> list[Any]:
    jobs.noop.enqueue_many([((), {})] * count)
    return protocol.claim("w1", batch=count)


class TestAnnounced:
    def test_a_grouped_completion_sends_one_notification_listing_every_id(self, listener) -> None:
        rows = claimed(3)
        protocol.complete_many([(j.pk, j.attempt, {"n": j.pk}) for j in rows])
        payloads = listener.payloads(5)
        assert len(payloads) == 1
        assert notify.finished_ids(payloads[0]) == {j.pk for j in rows}

    def test_a_large_group_is_announced_in_chunks_under_the_payload_limit(self, listener) -> None:
        rows = claimed(notify.IDS_PER_NOTIFICATION + 5)
        protocol.complete_many([(j.pk, j.attempt) for j in rows])
        payloads = listener.payloads(5)
        assert len(payloads) == 2
        assert all(len(p.encode()) < 8000 for p in payloads)
        assert sorted(i for p in payloads for i in notify.finished_ids(p)) == sorted(
            j.pk for j in rows
        )

    def test_a_single_completion(self, listener) -> None:
        (job,) = claimed()
        assert protocol.complete(job.pk, job.attempt, "r") is Outcome.SUCCEEDED
        assert listener.ids() == [job.pk]

    def test_a_dead_letter(self, listener) -> None:
        (job,) = claimed()
        outcome = protocol.fail(job.pk, job.attempt, Failure("boom"), retryable=False)
        assert outcome is Outcome.DEAD
        assert listener.ids() == [job.pk]

    def test_a_cancel_before_the_job_ran(self, listener) -> None:
        job = jobs.noop.enqueue(delay=3600)
        assert protocol.cancel(job.pk)
        assert listener.ids() == [job.pk]

    def test_a_running_attempt_ended_as_cancelled(self, listener) -> None:
        (job,) = claimed()
        assert protocol.request_cancel(job.pk) is protocol.Cancel.REQUESTED
        assert protocol.cancel_attempt(job.pk, job.attempt) is Outcome.CANCELLED
        assert listener.ids() == [job.pk]

    def test_a_completion_in_the_handlers_transaction_on_its_commit(self, listener) -> None:
        (job,) = claimed()
        with transaction.atomic():
            protocol.complete_in_transaction(job.pk, job.attempt, "done")
            assert listener.payloads(0.3) == []  # not before the commit
        assert listener.ids() == [job.pk]


class TestNotAnnounced:
    def test_a_retry_is_not_a_finish(self, listener) -> None:
        (job,) = claimed()
        assert protocol.fail(job.pk, job.attempt, Failure("again")) is Outcome.RETRIED
        assert listener.payloads(0.5) == []

    def test_a_stale_completion(self, listener) -> None:
        (job,) = claimed()
        assert protocol.complete(job.pk, job.attempt + 1) is Outcome.STALE
        assert protocol.complete_many([(job.pk, job.attempt + 1)]) == {job.pk: Outcome.STALE}
        assert listener.payloads(0.5) == []

    def test_a_rolled_back_finish(self, listener) -> None:
        (job,) = claimed()
        waiting = jobs.noop.enqueue(delay=3600)
        with pytest.raises(RuntimeError), transaction.atomic():
            protocol.complete_in_transaction(job.pk, job.attempt, "done")
            assert protocol.cancel(waiting.pk)
            raise RuntimeError("roll back")
        assert listener.payloads(0.5) == []

    def test_nothing_when_notify_is_off(self, listener) -> None:
        rows = claimed(2)
        with override_settings(LEASEJOBS_NOTIFY=False):
            protocol.complete_many([(j.pk, j.attempt) for j in rows[:1]])
            protocol.complete(rows[1].pk, rows[1].attempt)
        assert listener.payloads(0.5) == []
