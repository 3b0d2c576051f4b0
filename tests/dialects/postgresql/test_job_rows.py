"""``job_rows.builder``: the ``Job`` it makes is the one ``Job.from_db`` makes, and where
something listens for ``pre_init``/``post_init`` it is ``from_db`` itself."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DEFAULT_DB_ALIAS
from django.db.models import signals

from django_leasejobs.dialects.postgresql import job_rows
from django_leasejobs.models import Job

pytestmark = pytest.mark.django_db


def row_values(job: Job) -> dict[str, Any]:
    return {name: getattr(job, name) for name in job_rows.ATTNAMES}


@pytest.fixture
def stored() -> Job:
    return Job.objects.create(name="testapp.jobs.noop", args=[1], kwargs={"a": "b"})


def test_the_builder_takes_every_concrete_field_in_model_order() -> None:
    assert tuple(f.attname for f in Job._meta.concrete_fields) == job_rows.ATTNAMES
    assert job_rows._PLAIN  # Job keeps Django's loading, so the short path is the one taken


def test_a_built_job_is_the_job_from_db_loads(stored: Job) -> None:
    values = row_values(stored)
    built = job_rows.builder("other")(values)
    loaded = Job.from_db("other", job_rows.ATTNAMES, list(values.values()))
    assert type(built) is Job
    assert {k: v for k, v in vars(built).items() if k != "_state"} == {
        k: v for k, v in vars(loaded).items() if k != "_state"
    }
    assert (built._state.db, built._state.adding) == ("other", False)
    assert vars(built._state) == vars(loaded._state)
    assert built.get_deferred_fields() == set()
    assert built == loaded


def test_a_built_job_saves_and_refreshes_as_a_loaded_one(stored: Job) -> None:
    built = job_rows.builder(DEFAULT_DB_ALIAS)(row_values(stored))
    built.priority = 7
    built.save(update_fields=["priority"])
    assert Job.objects.get(pk=stored.pk).priority == 7
    Job.objects.filter(pk=stored.pk).update(priority=9)
    built.refresh_from_db(fields=["priority"])
    assert built.priority == 9
    assert built.schedule is None  # the foreign key's descriptor works on it


@pytest.mark.parametrize("signal", [signals.pre_init, signals.post_init])
def test_init_receivers_are_called_for_every_built_job(stored: Job, signal: Any) -> None:
    seen: list[Any] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        seen.append(kwargs.get("instance", kwargs.get("args")))

    signal.connect(receiver, sender=Job)
    try:
        build = job_rows.builder(DEFAULT_DB_ALIAS)
        jobs = [build(row_values(stored)) for _ in range(2)]
    finally:
        signal.disconnect(receiver, sender=Job)
    assert len(seen) == 2
    if signal is signals.post_init:
        assert seen == jobs
    assert all(job._state.adding is False for job in jobs)


@pytest.mark.parametrize("listening", [False, True])
def test_a_field_left_out_is_deferred_and_loaded_on_access(stored: Job, listening: bool) -> None:
    """A claim returns no ``errors``, ``result`` or ``last_error``: either path defers them."""
    Job.objects.filter(pk=stored.pk).update(last_error="boom", errors=[{"error": "boom"}])
    values = row_values(stored)
    del values["last_error"], values["errors"]

    def receiver(sender: Any, **kwargs: Any) -> None:
        pass

    if listening:
        signals.post_init.connect(receiver, sender=Job)
    try:
        built = job_rows.builder(DEFAULT_DB_ALIAS)(values)
    finally:
        signals.post_init.disconnect(receiver, sender=Job)
    assert built.get_deferred_fields() == {"last_error", "errors"}
    assert built.last_error == "boom"
    assert built.errors == [{"error": "boom"}]
    assert built.get_deferred_fields() == set()
