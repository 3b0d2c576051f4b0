"""Pauses with shards: a queue's pause is written in the database its jobs live in, where that
database's workers read it, whatever database the caller works on; a job name's in every queue
database; ``jobqueue list`` shows the pauses of each, naming the database.

Rows are counted per alias with the ORM; what a shard's worker would claim is asked of the
claim itself, inside ``using_database("shard")``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.test import override_settings
from testapp import jobs

from django_leasejobs import operations, protocol
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import Job, Pause
from django_leasejobs.models.databases import using_database

from ..conftest import shifted

pytestmark = pytest.mark.django_db(databases=["default", "shard"])


@pytest.fixture(autouse=True)
def shards() -> Iterator[None]:
    with override_settings(LEASEJOBS_QUEUE_DATABASES={"reports": "shard", "eu-*": "shard"}):
        yield


def run(*argv: str) -> str:
    out = io.StringIO()
    call_command("jobqueue", *argv, stdout=out)
    return out.getvalue()


def pauses(alias: str) -> list[tuple[str, str]]:
    return list(Pause.objects.using(alias).order_by("kind", "name").values_list("kind", "name"))


def claimed_in(alias: str) -> set[int]:
    with using_database(alias):
        return {job.pk for job in protocol.claim("pause-test", batch=10)}


def due(queue: str) -> Job:
    job = jobs.noop.enqueue(queue=queue)
    Job.objects.using(job._state.db).filter(pk=job.pk).update(run_at=shifted(-1))
    return job


def test_a_shard_s_queue_is_paused_in_the_shard_where_its_workers_read_it() -> None:
    held, other = due("reports"), due("eu-north")
    said = run("pause", "reports", "--by", "alice")
    assert "Paused queue reports (database shard)" in said
    assert pauses("shard") == [("queue", "reports")]
    assert pauses("default") == []
    assert claimed_in("shard") == {other.pk}
    assert "Resumed queue reports (database shard)" in run("resume", "reports")
    assert pauses("shard") == []
    assert claimed_in("shard") == {held.pk}


def test_a_home_queue_is_paused_at_home() -> None:
    assert "(database default)" in run("pause", "mail")
    assert pauses("default") == [("queue", "mail")]
    assert pauses("shard") == []


def test_the_queue_routes_the_pause_not_the_database_the_caller_works_on() -> None:
    with using_database("default"):
        made = operations.pause(queue="eu-west", by="ops")
    assert made is not None
    assert made.database == "shard"
    assert pauses("shard") == [("queue", "eu-west")]
    with using_database("default"):
        assert operations.pause(queue="eu-west") is None  # already paused, in the shard
        lifted = operations.resume(queue="eu-west")
    assert lifted is not None
    assert (lifted.name, lifted.database) == ("eu-west", "shard")
    assert pauses("shard") == []


def test_a_job_name_is_paused_and_resumed_in_every_queue_database() -> None:
    home, away = due("default"), due("reports")
    run("pause", jobs.noop.name, "--job")
    assert pauses("default") == pauses("shard") == [("job", jobs.noop.name)]
    assert claimed_in("default") == claimed_in("shard") == set()
    said = run("resume", jobs.noop.name, "--job")
    assert f"Resumed job {jobs.noop.name} (databases default, shard)" in said
    assert pauses("default") == pauses("shard") == []
    assert claimed_in("default") == {home.pk}
    assert claimed_in("shard") == {away.pk}


def test_a_job_pause_half_made_is_made_whole_by_pausing_again() -> None:
    Pause.objects.using("default").create(kind="job", name=jobs.noop.name, paused_by="ops")
    made = operations.pause(job=jobs.noop.name)
    assert made is not None
    assert made.database == "shard"
    assert pauses("shard") == [("job", jobs.noop.name)]
    assert operations.pause(job=jobs.noop.name) is None


def test_a_job_name_known_only_by_a_shard_s_rows_may_be_paused() -> None:
    job = jobs.noop.enqueue(queue="reports")
    Job.objects.using("shard").filter(pk=job.pk).update(name="shop.jobs.retired")
    assert operations.pause(job="shop.jobs.retired") is not None
    assert pauses("shard") == [("job", "shop.jobs.retired")]
    with pytest.raises(JobValidationError, match=r"No job named 'shop\.jobs\.gone'"):
        operations.pause(job="shop.jobs.gone")


def test_list_shows_the_pauses_of_every_queue_database_naming_each() -> None:
    run("pause", "mail", "--by", "alice")
    run("pause", "reports", "--by", "bob")
    lines = run("list").splitlines()
    assert lines[0].split() == ["database", "kind", "name", "paused", "for", "by"]
    assert [line.split()[:3] for line in lines[1:]] == [
        ["default", "queue", "mail"],
        ["shard", "queue", "reports"],
    ]
    listed = json.loads(run("list", "--json"))
    assert [(p["database"], p["name"], p["paused_by"]) for p in listed] == [
        ("default", "mail", "alice"),
        ("shard", "reports", "bob"),
    ]
    with using_database("shard"):  # the library's list: one database's
        assert [p.name for p in operations.paused()] == ["reports"]


def test_without_routes_a_pause_goes_where_the_caller_works() -> None:
    with override_settings(LEASEJOBS_QUEUE_DATABASES={}):
        run("pause", "reports")
        assert pauses("default") == [("queue", "reports")]
        listed = json.loads(run("list", "--json"))
        assert "database" not in listed[0]
        assert "(database" not in run("resume", "reports")
        with using_database("shard"):
            operations.pause(queue="reports")
        assert pauses("shard") == [("queue", "reports")]
