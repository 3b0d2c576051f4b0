"""Pause and resume: what the claim skips, what each call returns, and racing calls."""

from __future__ import annotations

from typing import Any

import pytest
from testapp import jobs

from django_leasejobs import job, protocol
from django_leasejobs.core import registry
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import Job, Pause, Status
from django_leasejobs.runtime.worker import Worker
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


OLD = "tests.shop.jobs.send_receipt"
NEW = "tests.billing.jobs.email_receipt"


def email_receipt(order_id: int) -> None:
    """The renamed job: rows of an older release still carry its former name, ``OLD``."""


@pytest.fixture
def renamed(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``NEW`` registered with ``aliases=[OLD]`` in a registry of the test's own; ``limited``
    decides whether it has a concurrency limit (the claim's limited path)."""
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    monkeypatch.setattr(registry, "_late", set(registry._late))

    def register(limited: bool = False) -> Any:
        options: dict[str, Any] = {"concurrency_limit": 5} if limited else {}
        return job(name=NEW, aliases=[OLD], **options)(email_receipt)

    return register


def _rows(spec: Any) -> tuple[Job, Job]:
    """One row under the registered name, one under the former name."""
    new, old = spec.enqueue(1), spec.enqueue(2)
    Job.objects.filter(pk=old.pk).update(name=OLD)
    return new, old


@pytest.mark.parametrize("limited", [False, True])
@pytest.mark.parametrize("named", [NEW, OLD])
def test_a_job_name_pause_holds_the_rows_under_every_name_of_the_job(
    renamed: Any, all_due: Any, limited: bool, named: str
) -> None:
    new, old = _rows(renamed(limited))
    created = protocol.pause(job=named, by="ops")
    assert created is not None
    assert created.name == NEW  # the job's registered name stands for the pause
    assert set(Pause.objects.values_list("name", "paused_by")) == {(NEW, "ops"), (OLD, "ops")}
    assert protocol.pause(job=OLD if named == NEW else NEW) is None  # the job is paused already
    all_due()
    assert _claimed_ids(None) == set()
    lifted = protocol.resume(job=named)
    assert lifted is not None
    assert lifted.name == NEW
    assert not Pause.objects.exists()  # every name of the job resumed
    assert _claimed_ids(None) == {new.pk, old.pk}


def test_a_pause_made_under_one_name_is_carried_to_the_others_the_worker_knows(
    renamed: Any, all_due: Any
) -> None:
    """A pause an older release made under the job's former name (or before it listed an
    alias): a worker's maintenance pauses every other name of the job, keeping the pause's
    time and author, and resuming by any name lifts them all."""
    Job.objects.create(name=OLD)
    assert protocol.pause(job=OLD, by="ops") is not None  # nothing registered: one row
    Pause.objects.update(paused_at=Pause.objects.get().paused_at.replace(year=2000))
    new, old = _rows(renamed())
    assert protocol.cover_aliases() == [NEW]
    assert protocol.cover_aliases() == []  # in step: nothing more to write
    assert {(p.name, p.paused_by, p.paused_at.year) for p in Pause.objects.all()} == {
        (OLD, "ops", 2000),
        (NEW, "ops", 2000),
    }
    all_due()
    assert new.pk not in _claimed_ids(None)
    assert protocol.resume(job=NEW) is not None
    assert not Pause.objects.exists()
    assert _claimed_ids(None) >= {new.pk, old.pk}


def test_a_worker_holds_a_renamed_jobs_rows_paused_under_its_former_name(
    renamed: Any, all_due: Any
) -> None:
    spec = renamed()
    new, _ = _rows(spec)
    Pause.objects.create(kind="job", name=OLD, paused_by="old release")
    all_due()
    summary = Worker(concurrency=1, scheduler=False, poll=0.01).run(burst=True)
    assert summary.claimed == 0
    assert Job.objects.get(pk=new.pk).status == Status.PENDING
    assert Pause.objects.filter(name=NEW).exists()
