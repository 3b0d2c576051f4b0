"""Dedupe windows: keys from the arguments, windows, finished states, replace, and races."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection
from testapp import jobs

from django_leasejobs import job, protocol
from django_leasejobs.db.dbtime import db_now
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import Job, Status
from django_leasejobs.protocol import dedupe
from tests.conftest import race

pytestmark = pytest.mark.django_db

HOUR = 3600
LIVE_NAMES = ["pending", "running", "failed"]


def test_a_hash_of_the_call_is_one_key_however_the_arguments_are_passed() -> None:
    first = jobs.sync_user.enqueue(1)
    assert first.dedupe_key.startswith("args:")
    assert jobs.sync_user.enqueue(user_id=1).pk == first.pk
    assert jobs.sync_user.enqueue(1, full=False).pk == first.pk
    assert jobs.sync_user.enqueue(1, full=True).pk != first.pk
    assert jobs.sync_user.enqueue(2).pk != first.pk
    assert Job.objects.count() == 3


def test_a_per_call_true_key_hashes_the_call_and_a_string_stays_literal() -> None:
    a = jobs.add.enqueue(1, 2, dedupe_key=True)
    assert jobs.add.enqueue(a=1, b=2, dedupe_key=True).pk == a.pk
    assert jobs.add.enqueue(1, 3, dedupe_key=True).pk != a.pk
    assert jobs.add.enqueue(1, 2, dedupe_key="user:{a}").dedupe_key == "user:{a}"


def test_a_template_names_the_arguments_and_the_window_its_start() -> None:
    at = dt.datetime(2030, 1, 1, 10, 20, tzinfo=dt.timezone.utc)
    made = jobs.debounced.enqueue(7, run_at=at)
    start = int(dt.datetime(2030, 1, 1, 10, tzinfo=dt.timezone.utc).timestamp())
    assert made.dedupe_key == f"user:7@{start}"


def test_windows_hold_one_job_each() -> None:
    ten = dt.datetime(2030, 1, 1, 10, 0, tzinfo=dt.timezone.utc)
    first = jobs.debounced.enqueue(7, run_at=ten)
    same_hour = jobs.debounced.enqueue(7, run_at=ten + dt.timedelta(minutes=59))
    next_hour = jobs.debounced.enqueue(7, run_at=ten + dt.timedelta(minutes=60))
    assert same_hour.pk == first.pk
    assert next_hour.pk != first.pk
    assert jobs.debounced.enqueue(8, run_at=ten).pk not in (first.pk, next_hour.pk)


def test_a_window_without_run_at_is_the_databases_now() -> None:
    made = jobs.add.enqueue(1, 2, dedupe_key="k", dedupe_period=60)
    now = db_now().timestamp()
    start = int(made.dedupe_key.rsplit("@", 1)[1])
    assert start <= now < start + 60 + 1


def test_replace_moves_the_pending_job_and_its_arguments() -> None:
    ten = dt.datetime(2030, 1, 1, 10, 0, tzinfo=dt.timezone.utc)
    first = jobs.debounced.enqueue(7, note="a", run_at=ten)
    again = jobs.debounced.enqueue(7, note="b", run_at=ten + dt.timedelta(minutes=5))
    assert again.pk == first.pk
    row = Job.objects.get(pk=first.pk)
    assert row.kwargs == {"note": "b"}
    assert row.args == [7]
    assert row.run_at == ten + dt.timedelta(minutes=5)
    assert Job.objects.count() == 1


def test_replace_never_rewrites_a_job_that_started(all_due: Any) -> None:
    first = jobs.debounced.enqueue(7, note="a", delay=1)
    bucketed = first.run_at
    all_due()
    [running] = protocol.claim("w", batch=1)
    assert running.pk == first.pk
    again = jobs.debounced.enqueue(7, note="b", run_at=bucketed)
    assert again.pk == first.pk
    row = Job.objects.get(pk=first.pk)
    assert (row.status, row.kwargs) == (Status.RUNNING, {"note": "a"})


def test_finished_states_count_when_named() -> None:
    report = jobs.daily_report.enqueue("2030-01-01")
    [claimed] = protocol.claim("w", batch=1)
    assert protocol.complete(claimed.pk, claimed.attempt) is protocol.Outcome.SUCCEEDED
    assert jobs.daily_report.enqueue("2030-01-01").pk == report.pk
    assert jobs.daily_report.enqueue("2030-01-02").pk != report.pk
    # Per call, as today: a finished job does not count by default.
    noted = jobs.add.enqueue(1, 2, dedupe_key="once")
    Job.objects.filter(pk=noted.pk).update(status=Status.SUCCEEDED, live_dedupe_key=None)
    assert jobs.add.enqueue(1, 2, dedupe_key="once").pk != noted.pk
    counted = jobs.add.enqueue(1, 2, dedupe_key="twice", dedupe_states=[*LIVE_NAMES, "cancelled"])
    assert protocol.cancel(counted.pk)
    again = jobs.add.enqueue(1, 2, dedupe_key="twice", dedupe_states=[*LIVE_NAMES, "cancelled"])
    assert again.pk == counted.pk


def test_the_check_after_insert_rolls_back_when_a_counted_job_appeared() -> None:
    """The holder finished between the lookup and the INSERT: the INSERT is undone."""
    done = jobs.daily_report.enqueue("2030-01-01")
    Job.objects.filter(pk=done.pk).update(status=Status.SUCCEEDED, live_dedupe_key=None)
    values = {"name": jobs.daily_report.name, "args": ["2030-01-01"], "kwargs": {}}
    rule = dedupe.Rule(("succeeded",), False)
    key = done.dedupe_key

    def insert() -> Job:
        return Job.objects.create(**values, dedupe_key=key, live_dedupe_key=key)

    found, created = dedupe.insert_checked(insert, values["name"], key, rule, connection.alias)
    assert (found.pk, created) == (done.pk, False)
    assert Job.objects.count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("call", ["hash", "template", "finished", "replace"])
def test_racing_producers_get_one_job_and_no_error(call: str) -> None:
    calls = {
        "hash": lambda: jobs.sync_user.enqueue(5).pk,
        "template": lambda: jobs.debounced.enqueue(5, note="x").pk,
        "finished": lambda: jobs.daily_report.enqueue("2030-01-01").pk,
        "replace": lambda: jobs.debounced.enqueue(5, note="y", delay=30).pk,
    }
    ids = race(*[calls[call]] * 6)
    assert len(set(ids)) == 1
    assert Job.objects.count() == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dedupe_key": "k", "dedupe_states": "pending"}, "must be a list"),
        ({"dedupe_key": "k", "dedupe_states": ["pending", "done"]}, "unknown state"),
        ({"dedupe_key": "k", "dedupe_states": ["pending", "succeeded"]}, "every live state"),
        ({"dedupe_key": "k", "dedupe_period": 0}, "between 1 second"),
        ({"dedupe_key": "k", "dedupe_period": "1h"}, "number of seconds"),
        ({"dedupe_key": "k", "dedupe_period": True}, "number of seconds"),
        ({"dedupe_key": "k", "on_conflict": "merge"}, "on_conflict must be"),
        ({"dedupe_period": 60}, "need a dedupe_key"),
        ({"on_conflict": "replace"}, "need a dedupe_key"),
        ({"dedupe_key": ""}, "dedupe_key must be"),
        ({"dedupe_key": 5}, "dedupe_key must be"),
        ({"dedupe_key": "x" * 200, "dedupe_period": 60}, "dedupe_key must be"),
    ],
)
def test_bad_enqueue_options_are_refused_clearly(options: dict[str, Any], message: str) -> None:
    with pytest.raises(JobValidationError, match=message):
        jobs.add.enqueue(1, 2, **options)
    with pytest.raises(JobValidationError, match=message):
        jobs.add.enqueue_many([{"args": [1, 2], **options}])
    assert not Job.objects.exists()


def test_arguments_that_do_not_fit_the_signature_make_no_key() -> None:
    with pytest.raises(JobValidationError, match="cannot take these arguments"):
        jobs.sync_user.enqueue(1, 2, 3)
    assert not Job.objects.exists()


def _noop(user_id: int) -> None: ...


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dedupe_key": "user:{nobody}"}, "not an argument"),
        ({"dedupe_key": "user:{}"}, "not an argument"),
        ({"dedupe_key": "user:{user_id"}, "template"),
        ({"dedupe_key": 3}, "True or a template"),
        ({"dedupe_key": True, "dedupe_states": ["succeeded"]}, "every live state"),
        ({"dedupe_key": True, "dedupe_period": -1}, "between 1 second"),
        ({"dedupe_key": True, "on_conflict": "update"}, "on_conflict"),
        ({"dedupe_period": 60}, "need dedupe_key"),
        ({"on_conflict": "ignore"}, "need dedupe_key"),
    ],
)
def test_bad_decorator_options_are_refused_at_registration(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(JobValidationError, match=message):
        job(name="tests.dedupe.bad", **options)(_noop)


def test_a_key_belongs_to_its_job_name() -> None:
    """Another name's live job holding the same key is never matched, returned or rewritten."""
    other = jobs.permanent.enqueue(dedupe_key="k")
    mine = jobs.add.enqueue(1, 2, dedupe_key="k")
    assert mine.pk != other.pk
    assert mine.name == "testapp.jobs.add"
    assert jobs.add.enqueue(5, 6, dedupe_key="k").pk == mine.pk  # same name: the holder
    assert jobs.permanent.enqueue(dedupe_key="k").pk == other.pk


def test_replace_never_reaches_another_names_job() -> None:
    """``on_conflict="replace"`` moves only a pending job of its own name."""
    victim = jobs.permanent.enqueue(dedupe_key="user:7")
    far = dt.datetime(9999, 1, 1, tzinfo=dt.timezone.utc)
    jobs.add.enqueue(1, 2, dedupe_key="user:7", on_conflict="replace", run_at=far)
    victim.refresh_from_db()
    assert victim.args == []
    assert victim.run_at < far
    assert Job.objects.filter(dedupe_key="user:7").count() == 2


def test_finished_states_count_for_their_own_name_only() -> None:
    """A finished job of another name holding the key is neither returned nor counted."""
    finished = jobs.permanent.enqueue(dedupe_key="report:1")
    Job.objects.filter(pk=finished.pk).update(status=Status.SUCCEEDED, result={"secret": 1})
    Job.objects.filter(pk=finished.pk).update(live_dedupe_key=None)
    found = jobs.add.enqueue(1, 2, dedupe_key="report:1", dedupe_states=[*LIVE_NAMES, "succeeded"])
    assert found.pk != finished.pk
    assert found.result is None


def test_a_key_squatted_by_another_name_does_not_stop_the_derived_job() -> None:
    """``daily_report`` derives ``report:{day}``: another job enqueued with that literal key
    first does not take the report's place."""
    squatter = jobs.add.enqueue(1, 2, dedupe_key="report:2026-01-01")
    report = jobs.daily_report.enqueue("2026-01-01")
    assert report.pk != squatter.pk
    assert report.name == "testapp.jobs.daily_report"
    assert jobs.daily_report.enqueue("2026-01-01").pk == report.pk
