"""Pause and resume: what the claim skips, what each call returns, and racing calls."""

from __future__ import annotations

import pytest
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import Job, Pause, Status
from tests.conftest import race

pytestmark = pytest.mark.django_db

NOOP = jobs.noop.name
ADD = jobs.add.name


def _claimed_ids(queues: list[str] | None, batch: int = 10) -> set[int]:
    return {job.pk for job in protocol.claim("w", queues=queues, batch=batch)}


@pytest.mark.parametrize("queues", [None, ["mail"], ["mail", "default"]])
def test_a_paused_queue_is_not_claimed_and_other_queues_are(
    all_due: object, queues: list[str] | None
) -> None:
    mail = jobs.noop.enqueue(queue="mail")
    other = jobs.noop.enqueue(queue="default")
    created = protocol.pause(queue="mail", by="ops")
    assert created is not None
    assert (created.kind, created.name, created.paused_by) == (
        "queue",
        "mail",
        "ops",
    )
    all_due()  # type: ignore[operator]
    claimed = _claimed_ids(queues)
    assert mail.pk not in claimed
    assert Job.objects.get(pk=mail.pk).status == Status.PENDING
    assert claimed == ({other.pk} if queues is None or "default" in queues else set())
    lifted = protocol.resume(queue="mail", by="ops")
    assert lifted is not None
    assert lifted.name == "mail"
    assert _claimed_ids(queues) == {mail.pk}


@pytest.mark.parametrize("queues", [None, ["default"], ["default", "mail"]])
def test_a_paused_job_name_is_not_claimed_in_any_queue(
    all_due: object, queues: list[str] | None
) -> None:
    held = [jobs.noop.enqueue(priority=50), jobs.noop.enqueue(queue="mail", priority=50)]
    runs = jobs.add.enqueue(1, 2)
    assert protocol.pause(job=NOOP) is not None
    all_due()  # type: ignore[operator]
    assert _claimed_ids(queues) == {runs.pk}
    assert set(
        Job.objects.filter(pk__in=[j.pk for j in held]).values_list("status", flat=True)
    ) == {Status.PENDING}
    assert protocol.resume(job=NOOP) is not None
    expected = {j.pk for j in held if queues is None or j.queue in queues}
    assert _claimed_ids(queues) == expected


def test_a_running_job_of_a_paused_queue_finishes() -> None:
    job = jobs.noop.enqueue(queue="mail")
    [claimed] = protocol.claim("w", queues=["mail"])
    protocol.pause(queue="mail")
    assert protocol.complete(claimed.pk, claimed.attempt) is protocol.Outcome.SUCCEEDED
    assert Job.objects.get(pk=job.pk).status == Status.SUCCEEDED


def test_pause_and_resume_are_idempotent_and_say_what_changed() -> None:
    assert protocol.paused() == []
    first = protocol.pause(queue="mail", by="alice")
    assert first is not None
    assert protocol.pause(queue="mail", by="bob") is None
    assert protocol.pause(job=NOOP) is not None
    listed = protocol.paused()
    assert [(p.kind, p.name, p.paused_by) for p in listed] == [
        ("job", NOOP, ""),
        ("queue", "mail", "alice"),
    ]
    assert all(p.age >= 0 for p in listed)
    assert [p.name for p in protocol.paused("queue")] == ["mail"]
    assert protocol.resume(queue="mail") is not None
    assert protocol.resume(queue="mail") is None
    assert protocol.resume(queue="never-paused") is None
    assert [p.name for p in protocol.paused()] == [NOOP]


def test_the_age_is_measured_from_the_pause() -> None:
    protocol.pause(queue="mail")
    Pause.objects.update(paused_at=Pause.objects.get().paused_at.replace(year=2000))
    [old] = protocol.paused()
    assert old.age > 20 * 365 * 86400


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one"),
        ({"queue": "a", "job": NOOP}, "exactly one"),
        ({"queue": "bad queue"}, "queue"),
        ({"queue": ""}, "queue"),
        ({"job": "has space"}, "job name"),
        ({"job": ""}, "job name"),
        ({"job": 3}, "job name"),
        ({"job": "a\ud800"}, "lone surrogate"),
        ({"queue": "default\n"}, r"queue 'default\\n' is not a valid queue"),
        ({"job": NOOP + "\n"}, "job must be a job name"),
        ({"queue": "\ud800"}, "queue"),
        ({"queue": "a", "by": "\ud800"}, "lone surrogate"),
        ({"queue": "a", "by": 5}, "by must be"),
        ({"queue": "a", "by": "x" * 201}, "by must be"),
    ],
)
def test_bad_input_is_refused_clearly(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(JobValidationError, match=message):
        protocol.pause(**kwargs)  # type: ignore[arg-type]
    assert not Pause.objects.exists()


@pytest.mark.parametrize(
    ("name", "message"), [("a\ud800", "job name contains a lone surrogate"), ("a b", "job must")]
)
def test_resume_refuses_what_pause_refuses(name: str, message: str) -> None:
    with pytest.raises(JobValidationError, match=message):
        protocol.resume(job=name)


@pytest.mark.django_db(transaction=True)
def test_racing_pauses_make_one_row_and_no_error() -> None:
    results = race(*[lambda: protocol.pause(queue="mail") for _ in range(4)])
    assert sum(result is not None for result in results) == 1
    assert Pause.objects.filter(kind="queue", name="mail").count() == 1


@pytest.mark.django_db(transaction=True)
def test_racing_resumes_lift_the_pause_once() -> None:
    protocol.pause(queue="mail")
    results = race(*[lambda: protocol.resume(queue="mail") for _ in range(4)])
    assert sum(result is not None for result in results) == 1
    assert not Pause.objects.exists()


@pytest.mark.parametrize("queues", [None, ["default"], ["mail", "default"]])
@pytest.mark.parametrize("paused", ["queue", "job"])
def test_jobs_with_limits_are_held_back_by_a_pause_too(
    all_due: object, queues: list[str] | None, paused: str
) -> None:
    # Jobs with concurrency or rate limits take the claim's limited path: it checks pauses too.
    limited = [jobs.per_customer.enqueue(customer_id=i) for i in range(3)]
    plain = jobs.noop.enqueue()
    if paused == "queue":
        assert protocol.pause(queue="default") is not None
    else:
        assert protocol.pause(job=jobs.per_customer.name) is not None
    all_due()  # type: ignore[operator]
    claimed = _claimed_ids(queues)
    assert not claimed & {j.pk for j in limited}
    assert claimed == (set() if paused == "queue" else {plain.pk})
    if paused == "queue":
        protocol.resume(queue="default")
    else:
        protocol.resume(job=jobs.per_customer.name)
    assert _claimed_ids(queues) == {j.pk for j in limited} | (
        {plain.pk} if paused == "queue" else set()
    )


def test_a_job_name_that_names_no_job_is_refused_with_the_close_ones() -> None:
    with pytest.raises(JobValidationError, match=r"Did you mean 'testapp\.jobs\.noop'"):
        protocol.pause(job="testapp.jobs.nop")
    with pytest.raises(JobValidationError, match="is registered or waiting in the jobs table"):
        protocol.pause(job="nothing.like.it")
    assert not Pause.objects.exists()


def test_a_name_only_the_jobs_table_knows_may_be_paused() -> None:
    """An unregistered name with rows (an old release's job) is a job to pause."""
    Job.objects.create(name="old.release.jobs.gone")
    assert protocol.pause(job="old.release.jobs.gone") is not None
