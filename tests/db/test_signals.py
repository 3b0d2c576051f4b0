"""Signals: one per state change, after commit, with the documented arguments; free unused."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction
from testapp import jobs

from django_leasejobs import Backoff, protocol
from django_leasejobs.db import signals
from django_leasejobs.models import DeadLetter, Job
from django_leasejobs.protocol import Failure, Outcome
from django_leasejobs.runtime import execution

pytestmark = pytest.mark.django_db

ALL = {
    "job_enqueued": signals.job_enqueued,
    "job_started": signals.job_started,
    "job_succeeded": signals.job_succeeded,
    "job_retried": signals.job_retried,
    "job_dead": signals.job_dead,
    "job_cancelled": signals.job_cancelled,
}


@pytest.fixture
def received() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Every signal sent during the test, as (signal name, keyword arguments)."""
    log: list[tuple[str, dict[str, Any]]] = []
    receivers = {}
    for name, signal in ALL.items():

        def receiver(sender: Any, _name: str = name, **kwargs: Any) -> None:
            assert sender is Job
            kwargs.pop("signal")
            log.append((_name, kwargs))

        receivers[name] = receiver
        signal.connect(receiver)
    yield log
    for name, signal in ALL.items():
        signal.disconnect(receivers[name])


def names(log: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [name for name, _ in log]


def test_enqueued_is_sent_after_commit_with_the_job(
    received, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        job = jobs.add.enqueue(1, 2)
        assert received == []  # not before the commit
    assert received == [("job_enqueued", {"job": job})]


def test_a_rolled_back_enqueue_sends_nothing(received, django_capture_on_commit_callbacks) -> None:
    class Boom(Exception):
        pass

    with (
        django_capture_on_commit_callbacks(execute=True),
        pytest.raises(Boom),
        transaction.atomic(),
    ):
        jobs.noop.enqueue()
        raise Boom
    assert received == []


def test_a_dedupe_hit_sends_nothing_and_bulk_sends_one_per_job(
    received, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        first = jobs.noop.enqueue(dedupe_key="k")
        again = jobs.noop.enqueue(dedupe_key="k")
        many = jobs.add.enqueue_many([((1, 2), {}), {"args": [3, 4], "dedupe_key": "other"}])
    assert again.pk == first.pk
    sent = sorted(kwargs["job"].pk for _, kwargs in received)
    assert sent == sorted([first.pk, *(j.pk for j in many)])
    assert names(received) == ["job_enqueued"] * 3


def test_started_then_succeeded(received, django_capture_on_commit_callbacks) -> None:
    job = jobs.add.enqueue(2, 3, queue="math")
    with django_capture_on_commit_callbacks(execute=True):
        (claimed,) = protocol.claim("w1", batch=1)
        assert execution.run(claimed, "w1") is Outcome.SUCCEEDED
    assert received == [
        ("job_started", {"job": claimed, "worker_id": "w1"}),
        (
            "job_succeeded",
            {
                "job_id": job.pk,
                "name": jobs.add.name,
                "queue": "math",
                "attempt": 1,
                "result": 5,
            },
        ),
    ]
    assert received[0][1]["job"].attempt == 1


def test_retried_then_dead(received, django_capture_on_commit_callbacks) -> None:
    job = jobs.noop.enqueue(max_attempts=2)
    backoff = Backoff(base=30, cap=30, jitter="none")
    with django_capture_on_commit_callbacks(execute=True):
        (claimed,) = protocol.claim("w1", batch=1)
        assert protocol.fail(job.pk, claimed.attempt, Failure("E: one"), backoff=backoff) == (
            Outcome.RETRIED
        )
    assert received[-1] == (
        "job_retried",
        {
            "job_id": job.pk,
            "name": jobs.noop.name,
            "queue": "default",
            "attempt": 1,
            "error": "E: one",
            "kind": "error",
            "delay": 30.0,
        },
    )
    Job.objects.filter(pk=job.pk).update(run_at=job.created_at)
    with django_capture_on_commit_callbacks(execute=True):
        (claimed,) = protocol.claim("w1", batch=1)
        assert protocol.fail(job.pk, claimed.attempt, Failure("E: two")) is Outcome.DEAD
    name, kwargs = received[-1]
    assert name == "job_dead"
    assert kwargs["dead_letter"] == DeadLetter.objects.get(job=job)
    assert kwargs == {
        "job_id": job.pk,
        "name": jobs.noop.name,
        "queue": "default",
        "attempt": 2,
        "reason": "attempts exhausted",
        "error": "E: two",
        "dead_letter": kwargs["dead_letter"],
    }


def test_an_expired_lease_is_a_retry_of_kind_lease_expired(
    received, django_capture_on_commit_callbacks, expire_lease
) -> None:
    jobs.noop.enqueue()
    (claimed,) = protocol.claim("w1", batch=1)
    expire_lease(claimed)
    with django_capture_on_commit_callbacks(execute=True):
        assert protocol.recover_expired() == {claimed.pk: Outcome.RETRIED}
    name, kwargs = received[-1]
    assert (name, kwargs["kind"], kwargs["attempt"]) == ("job_retried", "lease expired", 1)
    assert "w1 stopped renewing" in kwargs["error"]


def test_complete_many_and_complete_in_transaction(
    received, django_capture_on_commit_callbacks
) -> None:
    first, second = jobs.noop.enqueue(), jobs.noop.enqueue()
    jobs.exactly_once.enqueue("x")
    claimed = protocol.claim("w1", batch=3)
    by_name = {job.name: job for job in claimed if job.name == jobs.exactly_once.name}
    with django_capture_on_commit_callbacks(execute=True):
        outcomes = protocol.complete_many([(first.pk, 1), (second.pk, 1)])
        assert set(outcomes.values()) == {Outcome.SUCCEEDED}
        execution.run(by_name[jobs.exactly_once.name], "w1")
    succeeded = [kwargs for name, kwargs in received if name == "job_succeeded"]
    assert sorted((k["job_id"], k["result"]) for k in succeeded) == sorted(
        [(first.pk, None), (second.pk, None), (by_name[jobs.exactly_once.name].pk, "done")]
    )


def test_stale_writes_send_nothing(received, django_capture_on_commit_callbacks) -> None:
    job = jobs.noop.enqueue()
    (claimed,) = protocol.claim("w1", batch=1)
    assert protocol.complete(job.pk, claimed.attempt) is Outcome.SUCCEEDED
    with django_capture_on_commit_callbacks(execute=True):
        assert protocol.complete(job.pk, claimed.attempt) is Outcome.STALE
        assert protocol.fail(job.pk, claimed.attempt, Failure("late")) is Outcome.STALE
    assert received == []


def test_a_failing_receiver_is_logged_and_changes_nothing(
    django_capture_on_commit_callbacks, caplog
) -> None:
    def broken(sender: Any, **kwargs: Any) -> None:
        raise RuntimeError("receiver bug")

    signals.job_succeeded.connect(broken)
    try:
        job = jobs.noop.enqueue()
        (claimed,) = protocol.claim("w1", batch=1)
        with (
            caplog.at_level(logging.ERROR, logger="django_leasejobs"),
            django_capture_on_commit_callbacks(execute=True),
        ):
            assert protocol.complete(job.pk, claimed.attempt) is Outcome.SUCCEEDED
    finally:
        signals.job_succeeded.disconnect(broken)
    assert Job.objects.get(pk=job.pk).status == "succeeded"
    assert "receiver bug" in caplog.text


def test_no_receivers_means_no_work(django_assert_num_queries) -> None:
    assert not any(signals.wanted(signal) for signal in ALL.values())
    first, second = jobs.noop.enqueue(), jobs.noop.enqueue()
    claimed = {job.pk: job for job in protocol.claim("w1", batch=2)}
    with django_assert_num_queries(1):  # the guarded UPDATE, no read of name and queue
        protocol.complete(first.pk, claimed[first.pk].attempt)

    def listener(sender: Any, **kwargs: Any) -> None:
        pass

    signals.job_succeeded.connect(listener)
    try:
        with django_assert_num_queries(2):  # + the name and queue for the receivers
            protocol.complete(second.pk, claimed[second.pk].attempt)
    finally:
        signals.job_succeeded.disconnect(listener)


def test_complete_many_with_results_sends_each_result(
    received, django_capture_on_commit_callbacks
) -> None:
    first, second, third = jobs.noop.enqueue(), jobs.noop.enqueue(), jobs.noop.enqueue()
    claimed = {job.pk: job for job in protocol.claim("w1", batch=3)}
    with django_capture_on_commit_callbacks(execute=True):
        protocol.complete_many(
            [(first.pk, 1, {"a": 1}), (second.pk, 1), (third.pk, claimed[third.pk].attempt + 1, 3)]
        )
    succeeded = sorted(
        (kwargs["job_id"], kwargs["result"]) for name, kwargs in received if name == "job_succeeded"
    )
    assert succeeded == sorted([(first.pk, {"a": 1}), (second.pk, None)])  # third was stale


def test_cancelled_once_for_a_waiting_job_and_nothing_for_a_second_request(
    received, django_capture_on_commit_callbacks
) -> None:
    job = jobs.other_queue.enqueue()
    with django_capture_on_commit_callbacks(execute=True):
        assert protocol.request_cancel(job.pk) is protocol.Cancel.CANCELLED
        assert protocol.request_cancel(job.pk) is protocol.Cancel.REFUSED
    assert received == [
        (
            "job_cancelled",
            {"job_id": job.pk, "name": jobs.other_queue.name, "queue": "other", "attempt": 0},
        )
    ]


def test_cancelled_once_when_the_worker_ends_a_running_attempt(
    received, django_capture_on_commit_callbacks
) -> None:
    job = jobs.noop.enqueue()
    (claimed,) = protocol.claim("w1", batch=1)
    with django_capture_on_commit_callbacks(execute=True):
        assert protocol.request_cancel(job.pk) is protocol.Cancel.REQUESTED
        assert protocol.cancel_attempt(job.pk, claimed.attempt) is Outcome.CANCELLED
        assert protocol.cancel_attempt(job.pk, claimed.attempt) is Outcome.STALE
        assert protocol.complete(job.pk, claimed.attempt) is Outcome.STALE  # the handler's late
    cancelled = [kwargs for name, kwargs in received if name == "job_cancelled"]
    assert cancelled == [
        {"job_id": job.pk, "name": jobs.noop.name, "queue": "default", "attempt": 1}
    ]
    assert "job_succeeded" not in names(received)


def test_cancelled_when_a_failed_attempt_had_a_cancel_request(
    received, django_capture_on_commit_callbacks
) -> None:
    job = jobs.noop.enqueue()
    (claimed,) = protocol.claim("w1", batch=1)
    protocol.request_cancel(job.pk)
    with django_capture_on_commit_callbacks(execute=True):
        assert protocol.fail(job.pk, claimed.attempt, Failure("E: x")) is Outcome.CANCELLED
    assert names(received)[-1:] == ["job_cancelled"]
    assert "job_retried" not in names(received)
    assert received[-1][1]["attempt"] == 1
