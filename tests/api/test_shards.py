"""The API with shards (``LEASEJOBS_QUEUE_DATABASES``): ``?database=`` picks the queue database
an operation works on, an enqueue goes where its queue lives and says so in ``database``.

Two real databases of the test run's engine, ``default`` and ``shard`` (testproject's settings).
Rows are made and counted in each by the ORM (or the library inside ``using_database``), and
ids are made to repeat across the two, so that a call reaching the wrong database fails.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import jsonschema_rs
import pytest
from django.contrib.admin.models import LogEntry
from django.test import override_settings
from testapp import jobs

from django_leasejobs import Workflow, protocol
from django_leasejobs.api import schema
from django_leasejobs.models import DeadLetter, Job, Pause, Schedule, Status, WorkflowRun
from django_leasejobs.models.databases import using_database
from django_leasejobs.protocol import Failure

from ..conftest import shifted

pytestmark = pytest.mark.django_db(databases=["default", "shard"])

ROUTES = {"reports": "shard"}
ADD = "testapp.jobs.add"


@pytest.fixture
def shards() -> Iterator[None]:
    with override_settings(LEASEJOBS_QUEUE_DATABASES=ROUTES):
        yield


def documented(body: object, component: str) -> None:
    document = json.loads(schema.rendered())
    checker = {**document, "$ref": f"#/components/schemas/{component}"}
    jsonschema_rs.Draft202012Validator(checker, validate_formats=True).validate(body)


def twins() -> tuple[Job, Job]:
    """A pending job at home (queue mail) and one in the shard (queue reports), same id."""
    home = jobs.add.using(queue="mail").enqueue(1, 2)
    shard = jobs.add.using(queue="reports").enqueue(3, 4)
    assert shard._state.db == "shard"
    Job.objects.using("shard").filter(pk=shard.pk).update(id=home.pk)
    return home, Job.objects.using("shard").get(pk=home.pk)


def status(alias: str, pk: int) -> str:
    return Job.objects.using(alias).values_list("status", flat=True).get(pk=pk)


def dead_in_shard() -> Job:
    """A job of the shard's reports queue, dead after its one attempt."""
    job = jobs.add.using(queue="reports", max_attempts=1).enqueue(1, 2)
    with using_database("shard"):
        Job.objects.using("shard").filter(pk=job.pk).update(run_at=shifted(-1))
        (claimed,) = protocol.claim("api-shards", batch=1, queues=["reports"])
        protocol.fail(claimed.pk, claimed.attempt, Failure("OSError: disk full"))
    return job


def test_an_enqueue_is_written_in_its_queues_database_and_says_which(operator, shards):
    code, shard = operator.post("jobs/", {"name": ADD, "args": [1, 2], "queue": "reports"})
    assert code == 201, shard
    documented(shard, "Job")
    assert shard["database"] == "shard"
    assert Job.objects.using("shard").filter(pk=shard["id"], queue="reports").exists()
    assert not Job.objects.using("default").filter(queue="reports").exists()
    entry = LogEntry.objects.get(object_id=str(shard["id"]))
    assert entry.change_message == "Enqueued in database 'shard' (API)"
    code, home = operator.post("jobs/", {"name": ADD, "args": [1, 2]})
    assert (code, home["database"]) == (201, "default")
    assert Job.objects.using("default").filter(pk=home["id"]).exists()
    # Its database, with its id, finds it again.
    code, found = operator.get(f"jobs/{shard['id']}/", database=shard["database"])
    assert (code, found["queue"], found["args"]) == (200, "reports", [1, 2])


def test_an_enqueue_takes_no_database_parameter(operator, shards):
    code, body = operator.post("jobs/?database=shard", {"name": ADD, "args": [1, 2]})
    assert (code, body["code"], body["field"]) == (400, "unknown_parameter", "database")
    assert "its queue's database" in body["message"]
    assert not Job.objects.using("default").exists()
    assert not Job.objects.using("shard").exists()


def test_a_batch_is_written_in_its_queues_database(operator, shards):
    item = {"name": ADD, "args": [1, 2], "queue": "reports"}
    code, body = operator.post("jobs/batch/", {"jobs": [item, {**item, "args": [3, 4]}]})
    assert code == 201, body
    assert [entry["job"]["database"] for entry in body["jobs"]] == ["shard", "shard"]
    assert Job.objects.using("shard").count() == 2
    assert not Job.objects.using("default").exists()


def test_a_batch_is_all_or_nothing_in_a_shard_too(caller, shards):
    """The dedupe hit of the second item is refused inside the batch's transaction: the
    first item, already inserted in the shard, must go with it."""
    holder = jobs.add.using(queue="reports", dedupe_key="k").enqueue(1, 2)
    enqueuer = caller("add_job")  # may not see the holder: the hit is a 409
    first = {"name": ADD, "args": [5, 6], "queue": "reports", "dedupe_key": "other"}
    second = {"name": ADD, "args": [7, 8], "queue": "reports", "dedupe_key": "k"}
    code, body = enqueuer.post("jobs/batch/", {"jobs": [first, second]})
    assert (code, body["code"], body["field"]) == (409, "duplicate", "jobs[1].dedupe_key")
    assert list(Job.objects.using("shard").values_list("pk", flat=True)) == [holder.pk]


def test_a_batch_across_two_databases_is_refused_naming_them(operator, shards):
    items = [{"name": ADD, "args": [1, 2], "queue": "reports"}, {"name": ADD, "args": [3, 4]}]
    code, body = operator.post("jobs/batch/", {"jobs": items})
    assert (code, body["code"], body["field"]) == (400, "invalid", "jobs")
    assert "'shard' for 'reports'" in body["message"]
    assert "'default' for 'default'" in body["message"]
    assert not Job.objects.using("default").exists()
    assert not Job.objects.using("shard").exists()


def test_ids_repeat_and_database_picks_the_job(operator, shards):
    home, shard = twins()
    code, body = operator.get(f"jobs/{home.pk}/")
    assert (code, body["queue"], body["database"]) == (200, "mail", "default")
    code, body = operator.get(f"jobs/{home.pk}/", database="shard")
    assert (code, body["queue"], body["database"]) == (200, "reports", "shard")
    documented(body, "Job")
    assert operator.get(f"jobs/{home.pk}/logs/", database="shard") == (200, {"logs": []})

    code, body = operator.post(f"jobs/{home.pk}/cancel/?database=shard")
    assert (code, body["status"], body["database"]) == (200, "cancelled", "shard")
    assert status("shard", shard.pk) == Status.CANCELLED
    assert status("default", home.pk) == Status.PENDING
    entry = LogEntry.objects.get(change_message__startswith="Cancelled")
    assert entry.change_message == "Cancelled in database 'shard' (API)"

    code, body = operator.post(f"jobs/{home.pk}/retry/?database=shard")
    assert (code, body["code"]) == (409, "invalid_state")
    assert "is cancelled" in body["message"]


def test_a_shard_job_is_not_found_at_home(operator, shards):
    job = jobs.add.using(queue="reports").enqueue(1, 2)
    assert not Job.objects.using("default").exists()
    code, body = operator.get(f"jobs/{job.pk}/")
    assert (code, body["code"]) == (404, "not_found")
    assert operator.get(f"jobs/{job.pk}/", database="shard")[0] == 200


READS = [
    "jobs/",
    "jobs/1/",
    "jobs/1/logs/",
    "dead-letters/",
    "dead-letters/1/",
    "schedules/",
    "queues/",
    "health/",
    "pauses/",
    "workflows/",
    "workflows/1/",
]
ACTIONS = ["jobs/1/cancel/", "jobs/1/retry/", "dead-letters/1/replay/", "workflows/1/cancel/"]


@pytest.mark.parametrize("path", READS)
def test_an_unknown_database_is_refused_naming_the_queue_databases(operator, shards, path):
    code, body = operator.get(path, database="nowhere")
    assert (code, body["code"], body["field"]) == (400, "invalid_parameter", "database")
    assert "'default', 'shard'" in body["message"], body
    assert "'nowhere'" in body["message"]


@pytest.mark.parametrize("path", ACTIONS)
def test_an_action_in_an_unknown_database_is_refused(operator, shards, path):
    home, shard = twins()
    code, body = operator.post(path.replace("1", str(home.pk)) + "?database=nowhere")
    assert (code, body["code"], body["field"]) == (400, "invalid_parameter", "database")
    assert status("default", home.pk) == status("shard", shard.pk) == Status.PENDING


def test_database_is_given_once(operator, shards):
    code, body = operator.get("jobs/", database=["shard", "default"])
    assert (code, body["code"], body["field"]) == (400, "invalid_parameter", "database")
    assert body["message"] == "Give database once."


def test_without_routes_the_home_database_is_the_only_one(operator):
    job = jobs.add.enqueue(1, 2)
    code, body = operator.get("jobs/", database="shard")
    assert (code, body["code"]) == (400, "invalid_parameter")
    assert "one of the queue databases, 'default' (" in body["message"]
    code, body = operator.get("jobs/", database="default")
    assert code == 200
    assert [(row["id"], row["database"]) for row in body["results"]] == [(job.pk, "default")]


def test_the_job_list_reads_the_named_database(operator, shards):
    home, shard = twins()
    other = jobs.add.using(queue="reports").enqueue(5, 6)
    code, body = operator.get("jobs/", database="shard")
    assert code == 200
    found = [(row["id"], row["queue"], row["database"]) for row in body["results"]]
    # (twins() gave the shard's row the home one's id: the two may list in either order)
    assert sorted(found) == sorted([(other.pk, "reports", "shard"), (shard.pk, "reports", "shard")])
    code, body = operator.get("jobs/")
    assert [(row["id"], row["queue"]) for row in body["results"]] == [(home.pk, "mail")]


def test_a_list_reads_the_named_databases_replica(operator, shards, settings):
    """``default`` stands in for the shard's replica: the list reads it (its rows, under the
    shard's name), while the job itself is read where it is written, the shard."""
    home, _ = twins()
    settings.LEASEJOBS_READ_DATABASES = {"shard": "default"}
    code, body = operator.get("jobs/", database="shard")
    assert code == 200
    assert [(row["queue"], row["database"]) for row in body["results"]] == [("mail", "shard")]
    code, body = operator.get(f"jobs/{home.pk}/", database="shard")
    assert (code, body["queue"]) == (200, "reports")


def test_dead_letters_are_listed_got_and_replayed_in_their_database(operator, shards):
    job = dead_in_shard()
    assert operator.get("dead-letters/") == (200, {"results": [], "next_cursor": None})
    code, body = operator.get("dead-letters/", database="shard")
    assert code == 200
    assert [row["job_id"] for row in body["results"]] == [job.pk]
    letter = body["results"][0]["id"]
    assert operator.get(f"dead-letters/{letter}/", database="shard")[0] == 200
    code, replayed = operator.post(f"dead-letters/{letter}/replay/?database=shard")
    assert (code, replayed["database"], replayed["queue"]) == (201, "shard", "reports")
    assert Job.objects.using("shard").filter(pk=replayed["id"], status="pending").exists()
    assert DeadLetter.objects.using("shard").get(pk=letter).replayed_job_id == replayed["id"]


def test_workflows_are_listed_got_and_cancelled_in_their_database(operator, shards):
    flow = Workflow(name="monthly")
    first = flow.add(jobs.add.using(queue="reports").s(1, 2))
    flow.add(jobs.add.using(queue="reports").si(3, 4), after=[first])
    run = flow.enqueue()
    assert not WorkflowRun.objects.using("default").exists()
    assert operator.get("workflows/")[1]["results"] == []
    code, body = operator.get("workflows/", database="shard")
    assert [(row["id"], row["name"]) for row in body["results"]] == [(run.pk, "monthly")]
    code, body = operator.get(f"workflows/{run.pk}/", database="shard")
    assert (code, body["steps_total"]) == (200, 2)
    code, body = operator.post(f"workflows/{run.pk}/cancel/?database=shard")
    assert code == 200, body
    assert WorkflowRun.objects.using("shard").get(pk=run.pk).status == "cancelled"


def test_schedules_and_the_numbers_are_the_named_databases(operator, shards):
    Schedule.objects.using("shard").create(name="monthly", cron="0 0 1 * *", job=ADD)
    jobs.add.using(queue="reports").enqueue(1, 2)
    jobs.add.using(queue="mail").enqueue(1, 2)
    assert operator.get("schedules/")[1]["results"] == []
    code, body = operator.get("schedules/", database="shard")
    assert [row["name"] for row in body["results"]] == ["monthly"]
    schedule = body["results"][0]["id"]
    code, body = operator.get(
        f"schedules/{schedule}/occurrences/",
        start="2030-01-01T00:00:00Z",
        end="2030-01-31T00:00:00Z",
        database="shard",
    )
    assert (code, body["schedule"]["name"]) == (200, "monthly")
    assert list(operator.get("queues/", database="shard")[1]["queues"]) == ["reports"]
    assert list(operator.get("queues/")[1]["queues"]) == ["mail"]


def test_a_queue_is_paused_in_its_own_database(operator, shards):
    code, body = operator.post("pauses/", {"kind": "queue", "name": "reports"})
    assert (code, body["name"]) == (201, "reports")
    assert list(Pause.objects.using("shard").values_list("name", flat=True)) == ["reports"]
    assert not Pause.objects.using("default").exists()
    assert operator.get("pauses/") == (200, {"results": []})
    code, body = operator.get("pauses/", database="shard")
    assert [row["name"] for row in body["results"]] == ["reports"]
    code, body = operator.post("pauses/resume/", {"kind": "queue", "name": "reports"})
    assert code == 200, body
    assert not Pause.objects.using("shard").exists()


def test_a_job_name_is_paused_in_every_queue_database(operator, shards):
    """A job's rows may be in any queue database: its pause holds them in each."""
    pause = {"kind": "job", "name": ADD}
    assert operator.post("pauses/", pause)[0] == 201
    for alias in ("default", "shard"):
        assert list(Pause.objects.using(alias).values_list("name", flat=True)) == [ADD]
    assert operator.post("pauses/resume/", pause)[0] == 200
    assert not Pause.objects.using("default").exists()
    assert not Pause.objects.using("shard").exists()


def test_a_bulk_action_acts_in_one_database(operator, shards):
    home, shard = twins()
    cancel = {"action": "cancel", "filter": {"status": "pending"}}
    code, body = operator.post("jobs/bulk/", {**cancel, "database": "shard"})
    assert (code, body["matched"]) == (200, 1), body
    documented(body, "BulkResult")
    assert status("shard", shard.pk) == Status.CANCELLED
    assert status("default", home.pk) == Status.PENDING
    entry = LogEntry.objects.get(change_message__startswith="Bulk cancel")
    assert "in database 'shard'" in entry.change_message

    other = jobs.add.using(queue="reports").enqueue(1, 2)
    code, body = operator.post("jobs/bulk/?database=shard", {**cancel, "database": "shard"})
    assert (code, body["matched"]) == (200, 1)
    assert status("shard", other.pk) == Status.CANCELLED
    assert status("default", home.pk) == Status.PENDING
    code, body = operator.post("jobs/bulk/", {**cancel, "dry_run": True})
    assert body == {"matched": 1}  # the home job


def test_a_bulk_action_refuses_a_bad_or_ambiguous_database(operator, shards):
    home, shard = twins()
    cancel = {"action": "cancel", "filter": {"status": "pending"}}
    for path, body, code in [
        ("jobs/bulk/", {**cancel, "database": "nowhere"}, "invalid"),
        ("jobs/bulk/", {**cancel, "database": 7}, "invalid"),
        ("jobs/bulk/?database=default", {**cancel, "database": "shard"}, "invalid"),
        ("jobs/bulk/?database=nowhere", cancel, "invalid_parameter"),
    ]:
        answer = operator.post(path, body)
        assert (answer[0], answer[1]["code"], answer[1]["field"]) == (400, code, "database")
    assert status("default", home.pk) == status("shard", shard.pk) == Status.PENDING
