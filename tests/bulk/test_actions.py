"""Bulk actions: the dry run's count, the keyed walk, what each action changes and leaves, and
the one admin log entry each writes."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.auth.models import User
from testapp import jobs

from django_leasejobs import bulk, protocol
from django_leasejobs.models import DeadLetter, Effect, Job, Status
from django_leasejobs.protocol import Failure

from ..conftest import fields, shifted

pytestmark = pytest.mark.django_db


@pytest.fixture
def user() -> User:
    return User.objects.create_user("operator")


def claimed(queue: str = "mail") -> Job:
    job = jobs.noop.using(queue=queue).enqueue()
    Job.objects.filter(pk=job.pk).update(run_at=shifted(-1))
    (taken,) = protocol.claim("bulk-worker", batch=1, queues=[queue])
    return taken


def dead(queue: str = "mail", **options) -> Job:
    job = claimed(queue)
    if options:
        Job.objects.filter(pk=job.pk).update(**options)
    Job.objects.filter(pk=job.pk).update(max_attempts=1)
    protocol.fail(job.pk, job.attempt, Failure("OSError: disk full"))
    assert fields(job.pk, "status")["status"] == Status.DEAD
    return job


def run(action: str, user: User, **given):
    parsed = bulk.parse(given)
    chosen = bulk.action_named(action)
    return bulk.run(
        chosen, bulk.jobs(parsed), user_id=user.pk, description=bulk.describe(parsed), source="test"
    )


def test_cancel_counts_first_then_cancels_waiting_and_asks_running(user) -> None:
    waiting = [jobs.noop.using(queue="mail", delay=60).enqueue() for _ in range(3)]
    running = claimed()
    other = jobs.noop.using(queue="other").enqueue()
    done = claimed()
    protocol.complete(done.pk, done.attempt)
    cancel = bulk.ACTIONS["cancel"]

    assert bulk.preview(cancel, bulk.jobs({"queue": "mail"})).matched == 4
    assert Job.objects.filter(status=Status.CANCELLED).count() == 0  # a dry run changes nothing

    result = bulk.run(
        cancel,
        bulk.jobs({"queue": "mail"}),
        user_id=user.pk,
        description='{"queue": "mail"}',
        source="test",
        batch=2,
    )
    assert (result.matched, result.changed, result.left) == (
        4,
        {"cancelled": 3, "cancel_requested": 1},
        0,
    )
    assert {fields(job.pk, "status")["status"] for job in waiting} == {Status.CANCELLED}
    assert fields(running.pk, "cancel_requested_at")["cancel_requested_at"] is not None
    assert fields(other.pk, "status")["status"] == Status.PENDING
    # Asked once: a second bulk cancel matches neither the cancelled nor the asked.
    assert bulk.preview(cancel, bulk.jobs({"queue": "mail"})).matched == 0


def test_one_admin_log_entry_names_the_action_the_filter_and_the_counts(user) -> None:
    jobs.noop.using(queue="mail").enqueue()
    jobs.noop.using(queue="mail").enqueue()
    run("cancel", user, queue="mail")
    (entry,) = LogEntry.objects.all()
    assert (entry.user_id, entry.action_flag, entry.object_id) == (user.pk, CHANGE, None)
    assert entry.content_type.model_class() is Job
    assert entry.object_repr == "Bulk cancel: 2 job(s)"
    assert entry.change_message == (
        'Bulk cancel (test) of the jobs matching {"queue": "mail"}: 2 matched; '
        "cancelled 2, cancel requested 0; left 0."
    )


def test_the_walk_stops_at_the_last_job_counted(user) -> None:
    first = jobs.noop.using(queue="mail").enqueue()
    counted = bulk.preview(bulk.ACTIONS["cancel"], bulk.jobs({"queue": "mail"}))
    later = jobs.noop.using(queue="mail").enqueue()
    result = bulk.run(
        bulk.ACTIONS["cancel"],
        bulk.jobs({"queue": "mail"}),
        user_id=user.pk,
        description="",
        source="test",
        through_id=counted.through_id,
    )
    assert result.changed["cancelled"] == 1
    assert fields(first.pk, "status")["status"] == Status.CANCELLED
    assert fields(later.pk, "status")["status"] == Status.PENDING


def test_retry_replays_each_dead_job_once(user) -> None:
    one, two = dead(), dead()
    dead(queue="other")
    result = run("retry", user, queue="mail")
    assert (result.matched, result.changed, result.left) == (2, {"replayed": 2}, 0)
    letters = DeadLetter.objects.filter(job_id__in=[one.pk, two.pk])
    assert all(letter.replayed_job_id is not None for letter in letters)
    replays = Job.objects.filter(pk__in=[letter.replayed_job_id for letter in letters])
    assert {job.status for job in replays} == {Status.PENDING}
    # The second time, nothing matches: a dead job is never retried twice.
    again = run("retry", user, queue="mail")
    assert (again.matched, again.changed) == (0, {"replayed": 0})
    assert Job.objects.count() == 5


def test_a_retry_the_replay_refuses_is_left_and_named(user) -> None:
    job = dead(dedupe_key="held")
    holder = jobs.noop.using(queue="mail", dedupe_key="held", delay=60).enqueue()
    result = run("retry", user, status="dead")
    assert (result.changed, result.left) == ({"replayed": 0}, 1)
    ((refused_id, why),) = result.refusals
    assert refused_id == job.pk
    assert f"Job {holder.pk} already holds dedupe key" in why


def test_delete_deletes_finished_jobs_as_pruning_does(user) -> None:
    gone = dead()
    Effect.objects.create(key="sent", job_id=gone.pk)
    done = claimed()
    protocol.complete(done.pk, done.attempt)
    live = jobs.noop.using(queue="mail").enqueue()
    result = run("delete", user, queue="mail")
    assert (result.matched, result.changed, result.left) == (2, {"deleted": 2}, 0)
    assert list(Job.objects.values_list("pk", flat=True)) == [live.pk]
    assert not DeadLetter.objects.exists()
    assert Effect.objects.get(key="sent").job_id is None
    assert LogEntry.objects.get().action_flag == DELETION


def test_delete_keeps_a_replays_job_while_its_dead_letter_is_there(user) -> None:
    job = dead()
    replay = protocol.replay(DeadLetter.objects.get(job_id=job.pk).pk)
    Job.objects.filter(pk=replay.pk).update(status=Status.CANCELLED, finished_at=shifted(0))
    assert bulk.preview(bulk.ACTIONS["delete"], bulk.jobs({"status": "cancelled"})).matched == 0
    assert upkeep_kept([replay.pk]) == [replay.pk]


def upkeep_kept(ids: list[int]) -> list[int]:
    from django_leasejobs import upkeep

    deleted, kept = upkeep.delete_finished(ids)
    assert deleted == 0
    return kept


def test_a_filter_status_the_action_never_acts_from_is_refused() -> None:
    with pytest.raises(bulk.FilterError, match="retry acts on dead jobs only") as refused:
        bulk.check_statuses(bulk.ACTIONS["retry"], bulk.parse({"status": "pending"}))
    assert refused.value.field == "status"
    bulk.check_statuses(bulk.ACTIONS["delete"], bulk.parse({"status": ["pending", "dead"]}))
    with pytest.raises(ValueError, match="one of cancel, retry, delete"):
        bulk.action_named("purge")


def test_the_entry_is_written_when_the_walk_stops_on_an_error(user, monkeypatch) -> None:
    jobs.noop.using(queue="mail").enqueue()

    def broken(ids):
        raise RuntimeError("database went away")

    monkeypatch.setattr(protocol, "cancel_many", broken)
    with pytest.raises(RuntimeError):
        run("cancel", user, queue="mail")
    (entry,) = LogEntry.objects.all()
    assert entry.change_message.endswith("Stopped by an error after job #0: RuntimeError.")
