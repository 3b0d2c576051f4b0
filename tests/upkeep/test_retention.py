"""``LEASEJOBS_RETENTION``: the setting, the retention lease, and workers pruning by it.

Time is moved in the database (``finished_at``, the lease's ``expires_at``); the pacing clock
of :class:`Retention` is a counter the test turns.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from testapp import jobs

from django_leasejobs import protocol, upkeep
from django_leasejobs.checks import settings as setting_checks
from django_leasejobs.core.conf import settings as leasejobs_settings
from django_leasejobs.models import DeadLetter, Job, MaintenanceLease, Schedule, Status
from django_leasejobs.runtime import execution, schedules
from django_leasejobs.runtime.worker import Worker
from django_leasejobs.upkeep.retention import Retention

from ..conftest import race, shifted

pytestmark = pytest.mark.django_db

DAY = 86400
WEEK = {"succeeded": "7d", "cancelled": "7d", "dead": "30d"}


def drain(queue: str | None = None) -> int:
    done = 0
    while claimed := protocol.claim("drainer", queues=[queue] if queue else None, batch=50):
        for job in claimed:
            execution.run(job, "drainer")
            done += 1
    return done


def succeeded(count: int, days_ago: float) -> list[int]:
    """``count`` succeeded jobs that finished ``days_ago`` days ago (database time)."""
    created = jobs.noop.enqueue_many([((), {})] * count)
    assert drain() == count
    ids = [job.pk for job in created]
    Job.objects.filter(pk__in=ids).update(finished_at=shifted(-days_ago * DAY))
    return ids


def dead(days_ago: float) -> Job:
    job = jobs.permanent.enqueue(queue="poison")
    assert drain("poison") == 1
    Job.objects.filter(pk=job.pk).update(finished_at=shifted(-days_ago * DAY))
    return job


def cancelled(days_ago: float) -> Job:
    job = jobs.noop.enqueue()
    assert protocol.cancel(job.pk)
    Job.objects.filter(pk=job.pk).update(finished_at=shifted(-days_ago * DAY))
    return job


class Clock:
    """The pacing clock of a ``Retention``: moves only when the test says so, or by ``step``
    at each reading (a batch that takes that long)."""

    def __init__(self, step: float = 0.0) -> None:
        self.now = 1000.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def pruner(worker_id: str, clock: Clock | None = None, **options: Any) -> Retention:
    return Retention(worker_id, clock=clock or Clock(), **options)


def expire_retention_lease() -> None:
    MaintenanceLease.objects.filter(name=upkeep.RETENTION).update(expires_at=shifted(-1))


# --------------------------------------------------------------------------- the setting


BAD_SETTINGS = [
    ("7d", "must be a dict of state -> age"),
    (["succeeded"], "must be a dict of state -> age"),
    ({"failed": "7d"}, "unknown key(s) 'failed': only finished states are pruned"),
    ({"succeded": "7d"}, "unknown key(s) 'succeded'"),
    ({"pending": "1d", "running": "1d"}, "unknown key(s) 'pending', 'running'"),
    ({"succeeded": "7"}, "LEASEJOBS_RETENTION['succeeded']: '7' has no unit"),
    ({"succeeded": 7}, "LEASEJOBS_RETENTION['succeeded']: 7 has no unit"),
    ({"dead": "a month"}, "LEASEJOBS_RETENTION['dead']: 'a month' is not a duration"),
    ({"dead": "-3d"}, "LEASEJOBS_RETENTION['dead']: A duration must be zero or more"),
    ({"dead": ""}, "LEASEJOBS_RETENTION['dead']: An empty duration"),
    ({"dead": "0s"}, "LEASEJOBS_RETENTION['dead'] must be a positive age"),
    ({"cancelled": dt.timedelta(0)}, "LEASEJOBS_RETENTION['cancelled'] must be a positive age"),
    ({"cancelled": True}, "LEASEJOBS_RETENTION['cancelled']: True is not a duration"),
]


class TestSetting:
    def test_default_keeps_everything(self) -> None:
        assert leasejobs_settings.RETENTION == {}

    def test_ages_are_read_as_the_commands_read_them(self) -> None:
        value = {"succeeded": "7d", "cancelled": dt.timedelta(hours=12), "dead": "1w2d"}
        with override_settings(LEASEJOBS_RETENTION=value):
            assert {
                "succeeded": dt.timedelta(days=7),
                "cancelled": dt.timedelta(hours=12),
                "dead": dt.timedelta(days=9),
            } == leasejobs_settings.RETENTION

    def test_none_keeps_that_state(self) -> None:
        with override_settings(LEASEJOBS_RETENTION={"succeeded": "1h30m", "dead": None}):
            assert {"succeeded": dt.timedelta(minutes=90)} == leasejobs_settings.RETENTION

    @pytest.mark.parametrize(("value", "message"), BAD_SETTINGS)
    def test_bad_values_are_refused_clearly(self, value: Any, message: str) -> None:
        with override_settings(LEASEJOBS_RETENTION=value):
            with pytest.raises(ImproperlyConfigured) as caught:
                _ = leasejobs_settings.RETENTION
            assert message in str(caught.value)
            errors = [m for m in setting_checks.check_settings() if m.id == "leasejobs.E001"]
            assert [message in e.msg for e in errors] == [True]
            with pytest.raises(ImproperlyConfigured, match="LEASEJOBS_RETENTION"):
                Worker()

    def test_a_misspelt_setting_name_is_a_warning(self) -> None:
        with override_settings(LEASEJOBS_RETENTON={"succeeded": "7d"}):
            warnings = [m for m in setting_checks.check_settings() if m.id == "leasejobs.W003"]
        assert [w.hint for w in warnings] == ["Did you mean LEASEJOBS_RETENTION?"]


# --------------------------------------------------------------------------- the lease


class TestLease:
    def test_one_holder_until_it_expires_then_the_next(self) -> None:
        assert upkeep.take_lease("retention", "a", 60)
        assert not upkeep.take_lease("retention", "b", 60)
        assert upkeep.take_lease("retention", "a", 60)  # a renewal
        assert MaintenanceLease.objects.get(name="retention").holder == "a"
        expire_retention_lease()
        assert upkeep.take_lease("retention", "b", 60)
        assert not upkeep.take_lease("retention", "a", 60)
        assert MaintenanceLease.objects.get().holder == "b"

    def test_the_lease_runs_in_database_time(self) -> None:
        assert upkeep.take_lease("retention", "a", 90)
        row = MaintenanceLease.objects.annotate(left=shifted(0)).get()
        seconds = (row.expires_at - row.left).total_seconds()
        assert 85 < seconds <= 90

    def test_giving_it_up_frees_it_for_another_holder_only_by_its_holder(self) -> None:
        assert upkeep.take_lease("retention", "a", 60)
        assert not upkeep.give_up_lease("retention", "b")
        assert not upkeep.take_lease("retention", "b", 60)
        assert upkeep.give_up_lease("retention", "a")
        assert not upkeep.give_up_lease("retention", "a")  # already free
        assert upkeep.take_lease("retention", "b", 60)

    def test_leases_of_different_work_are_apart(self) -> None:
        assert upkeep.take_lease("retention", "a", 60)
        assert upkeep.take_lease("other", "b", 60)
        assert MaintenanceLease.objects.count() == 2

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (("", "a", 60), "name must be a non-empty string"),
            (("x" * 101, "a", 60), "name must be a non-empty string"),
            (("retention", "", 60), "holder must be a non-empty string"),
            (("retention", "a", 0), "seconds must be a positive number"),
            (("retention", "a", True), "seconds must be a positive number"),
            (("retention", "a", float("nan")), "seconds must be a positive number"),
        ],
    )
    def test_bad_arguments(self, args: tuple[Any, ...], message: str) -> None:
        with pytest.raises(ValueError, match=message):
            upkeep.take_lease(*args)


@pytest.mark.django_db(transaction=True)
def test_workers_racing_for_the_lease_get_one_holder() -> None:
    for _ in range(3):  # a fresh row the first time (insert-or-ignore), then an expired one
        results = race(*(lambda i=i: upkeep.take_lease("retention", f"w{i}", 60) for i in range(4)))
        assert sorted(results) == [False, False, False, True]
        assert MaintenanceLease.objects.get().holder == f"w{results.index(True)}"
        expire_retention_lease()


# --------------------------------------------------------------------------- pruning


class TestPruning:
    @pytest.fixture(autouse=True)
    def _week(self, settings: Any) -> None:
        settings.LEASEJOBS_RETENTION = WEEK

    def test_prunes_each_state_past_its_age_and_nothing_else(self) -> None:
        old = succeeded(3, days_ago=8)
        recent = succeeded(2, days_ago=6)
        old_dead, recent_dead = dead(days_ago=31), dead(days_ago=29)
        old_cancelled, recent_cancelled = cancelled(days_ago=8), cancelled(days_ago=1)
        pending = jobs.noop.enqueue(delay=DAY)
        Job.objects.filter(pk=pending.pk).update(created_at=shifted(-60 * DAY))
        assert pruner("a").tick() == 5
        remaining = set(Job.objects.values_list("pk", flat=True))
        assert remaining == {*recent, recent_dead.pk, recent_cancelled.pk, pending.pk}
        assert remaining.isdisjoint({*old, old_dead.pk, old_cancelled.pk})
        assert list(DeadLetter.objects.values_list("job_id", flat=True)) == [recent_dead.pk]

    def test_only_the_states_given_are_pruned(self) -> None:
        old = succeeded(2, days_ago=400)
        old_dead = dead(days_ago=400)
        with override_settings(LEASEJOBS_RETENTION={"dead": "30d"}):
            assert pruner("a").tick() == 1
        assert set(Job.objects.values_list("pk", flat=True)) == set(old)
        assert old_dead.pk not in set(Job.objects.values_list("pk", flat=True))

    def test_nothing_without_the_setting(self) -> None:
        succeeded(2, days_ago=400)
        with override_settings(LEASEJOBS_RETENTION={}):
            assert pruner("a").tick() == 0
        assert Job.objects.count() == 2
        assert not MaintenanceLease.objects.exists()  # not even a lease is taken

    def test_two_workers_only_one_prunes(self) -> None:
        succeeded(6, days_ago=8)
        a, b = pruner("a", batch=2, budget=0), pruner("b", batch=2, budget=0)
        assert a.tick() == 2  # one batch per tick with no time budget
        assert b.tick() == 0
        assert a.walking
        assert not b.walking
        assert a.tick() == 2
        assert Job.objects.count() == 2
        assert MaintenanceLease.objects.get().holder == "a"

    def test_the_walk_goes_on_across_ticks_in_key_order(self) -> None:
        ids = succeeded(6, days_ago=8)
        retention = pruner("a", batch=2, budget=0)
        gone: list[list[int]] = []
        while retention.tick():
            gone.append(sorted(set(ids) - set(Job.objects.values_list("pk", flat=True))))
            assert retention.walking
        assert gone == [ids[:2], ids[:4], ids]
        assert not retention.walking  # the round ended with the look-ups that found nothing

    def test_lease_expiry_passes_the_walk_on(self) -> None:
        succeeded(6, days_ago=8)
        a_clock, b_clock = Clock(), Clock()
        a = pruner("a", a_clock, batch=2, budget=0)
        b = pruner("b", b_clock, batch=2, budget=0)
        assert a.tick() == 2
        assert b.tick() == 0
        # a stops ticking (stopped, killed, paused); its lease runs out in database time.
        expire_retention_lease()
        b_clock.now += b.lease_seconds  # b's next try has come
        assert b.tick() == 2
        assert MaintenanceLease.objects.get().holder == "b"
        a_clock.now += 1
        assert a.tick() == 0  # a's renewal is refused: b holds it
        assert not a.walking
        assert b.tick() == 2
        assert not Job.objects.exists()

    def test_a_round_keeps_the_lease_to_its_end_then_anyone_starts_the_next(self) -> None:
        succeeded(2, days_ago=8)
        a_clock, b_clock = Clock(), Clock()
        a, b = pruner("a", a_clock), pruner("b", b_clock)
        assert a.tick() == 2
        assert not a.walking
        succeeded(1, days_ago=8)
        assert a.tick() == 0  # the pause between rounds, on a's clock
        assert b.tick() == 0  # and for everyone else, by the lease
        b_clock.now += b.lease_seconds
        assert b.tick() == 0  # still a's lease in database time
        expire_retention_lease()
        b_clock.now += b.lease_seconds
        assert b.tick() == 1

    def test_a_clean_stop_gives_up_a_walk_under_way(self) -> None:
        succeeded(4, days_ago=8)
        a = pruner("a", batch=2, budget=0)
        assert a.tick() == 2
        a.give_up_lease()
        assert pruner("b", batch=2, budget=0).tick() == 2
        done = pruner("c")
        assert done.tick() == 0
        done.give_up_lease()  # no walk under way: nothing to give back
        assert MaintenanceLease.objects.get().holder == "b"

    def test_a_pruned_occurrence_is_never_emitted_again(self) -> None:
        schedule = Schedule.objects.create(
            name="minutely", cron="* * * * *", job="testapp.jobs.noop", misfire="all"
        )
        Schedule.objects.filter(pk=schedule.pk).update(created_at=shifted(-3 * 60))
        assert schedules.tick() >= 2
        assert drain() >= 2
        Job.objects.update(finished_at=shifted(-8 * DAY))
        emitted = Job.objects.count()
        assert pruner("a").tick() == emitted
        assert schedules.tick() == 0
        assert not Job.objects.exists()


class TestPace:
    """Under load rows pass their age all the time: retention keeps walking while it finds a
    batch's worth, and spends more of each tick while it is behind."""

    @pytest.fixture(autouse=True)
    def _week(self, settings: Any) -> None:
        settings.LEASEJOBS_RETENTION = WEEK

    def test_a_round_that_was_behind_is_followed_by_the_next_at_once(self) -> None:
        succeeded(3, days_ago=8)
        clock = Clock()
        a = pruner("a", clock, batch=2, budget=0)
        assert a.tick() == 2
        assert a.tick() == 1  # less than a batch: the round ends, 3 rows, more than a batch
        assert not a.walking
        # Jobs finished meanwhile pass their age: the next tick starts the next round, with
        # no pause on the pacing clock, and the lease stays a's.
        succeeded(2, days_ago=8)
        assert pruner("b", clock).tick() == 0
        assert a.tick() == 2
        assert MaintenanceLease.objects.get().holder == "a"

    def test_a_job_that_finished_late_behind_the_walk_is_pruned_by_the_next_round(
        self,
    ) -> None:
        ids = succeeded(6, days_ago=6)
        a = pruner("a", batch=2, budget=0)
        Job.objects.filter(pk__in=ids[2:]).update(finished_at=shifted(-8 * DAY))
        assert a.tick() == 2  # ids[2:4]; the walk is past ids[0] and ids[1]
        Job.objects.filter(pk=ids[0]).update(finished_at=shifted(-8 * DAY))
        assert a.tick() == 2  # ids[4:6]
        assert a.tick() == 0  # nothing more past it: the round ends
        assert a.tick() == 1  # behind: the next round at once, from the first key
        assert set(Job.objects.values_list("pk", flat=True)) == {ids[1]}

    def test_the_walk_keeps_going_while_rows_pass_their_age(self) -> None:
        ids = succeeded(12, days_ago=6)
        a = pruner("a", batch=2, budget=0)
        for start in range(0, 12, 3):  # three rows pass their age between two ticks
            aged = ids[start : start + 3]
            Job.objects.filter(pk__in=aged).update(finished_at=shifted(-8 * DAY))
            assert a.tick() == 2
            assert a.tick() == 1
            assert not Job.objects.filter(pk__in=aged).exists()
        assert not Job.objects.exists()

    def test_a_round_that_kept_up_pauses(self) -> None:
        succeeded(1, days_ago=8)
        clock = Clock()
        a = pruner("a", clock, batch=2)
        assert a.tick() == 1  # less than a batch: retention keeps up
        succeeded(1, days_ago=8)
        assert a.tick() == 0
        clock.now += a.lease_seconds
        expire_retention_lease()
        assert a.tick() == 1

    def test_the_pause_is_a_quarter_of_a_short_age(self, settings: Any) -> None:
        settings.LEASEJOBS_RETENTION = {"succeeded": "2m", "dead": "30d"}
        clock = Clock()
        a = pruner("a", clock)
        assert a.tick() == 0  # nothing old yet: the round ends at once
        Job.objects.filter(pk__in=succeeded(1, days_ago=0)).update(finished_at=shifted(-150))
        clock.now += 29
        assert a.tick() == 0
        clock.now += 1  # a quarter of two minutes: the holder renews its lease and walks
        assert a.tick() == 1
        assert MaintenanceLease.objects.get().holder == "a"
        assert a.pause({"succeeded": dt.timedelta(days=7)}) == a.lease_seconds

    def test_the_budget_doubles_while_behind_and_halves_once_caught_up(self) -> None:
        succeeded(20, days_ago=8)
        # Every reading of the clock is 1/16 s later: each batch of one row "takes" that long.
        a = pruner("a", Clock(step=1 / 16), batch=1, budget=1 / 8, max_budget=1 / 2)
        deleted, budgets = [], []
        for _ in range(5):
            deleted.append(a.tick())
            budgets.append(a.tick_budget)
        # The fourth tick ends the round having used most of its budget: it keeps it. The
        # fifth, the next round at once (the last was behind), finds nothing and halves it.
        assert deleted == [2, 4, 8, 6, 0]
        assert budgets == [1 / 4, 1 / 2, 1 / 2, 1 / 2, 1 / 4]
        assert not a.walking


def test_a_worker_prunes_on_its_maintenance(settings: Any) -> None:
    settings.LEASEJOBS_RETENTION = {"succeeded": "7d"}
    old = succeeded(3, days_ago=8)
    fresh = jobs.noop.enqueue()
    summary = Worker(concurrency=1, poll=0.05, scheduler=False).run(burst=True)
    assert summary.succeeded == 1
    assert set(Job.objects.values_list("pk", flat=True)) == {fresh.pk}
    assert set(old).isdisjoint(Job.objects.values_list("pk", flat=True))


def test_a_database_error_is_logged_and_the_worker_goes_on(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import OperationalError

    def broken(*args: Any, **kwargs: Any) -> bool:
        raise OperationalError("lock wait timeout")

    monkeypatch.setattr(upkeep, "take_lease", broken)
    jobs.noop.enqueue()
    with override_settings(LEASEJOBS_RETENTION={"succeeded": "7d"}):
        summary = Worker(concurrency=1, poll=0.05, scheduler=False).run(burst=True)
    assert summary.succeeded == 1
    assert "where=retention error=lock wait timeout" in caplog.text
    assert Job.objects.get().status == Status.SUCCEEDED


@pytest.mark.django_db(transaction=True)
def test_two_workers_ticking_at_once_one_prunes(settings: Any) -> None:
    settings.LEASEJOBS_RETENTION = {"succeeded": "7d"}
    succeeded(6, days_ago=8)
    a, b = pruner("a", batch=2, budget=0), pruner("b", batch=2, budget=0)
    deleted = race(a.tick, b.tick)
    assert sorted(deleted) == [0, 2]
    assert a.walking != b.walking
    assert Job.objects.count() == 4


def test_after_a_database_error_the_next_try_waits_a_quarter_lease(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    from django.db import OperationalError

    calls: list[str] = []

    def broken(*args: Any, **kwargs: Any) -> bool:
        calls.append("take")
        raise OperationalError('relation "django_leasejobs_maintenancelease" does not exist')

    settings.LEASEJOBS_RETENTION = {"succeeded": "7d"}
    monkeypatch.setattr(upkeep, "take_lease", broken)
    clock = Clock()
    retention = pruner("a", clock)
    with pytest.raises(OperationalError):
        retention.tick()
    assert retention.tick() == 0  # the next poll: no statement, no log line
    clock.now += retention.lease_seconds / 4
    with pytest.raises(OperationalError):
        retention.tick()
    assert calls == ["take", "take"]
