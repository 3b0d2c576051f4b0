"""Each job's own logs: what a handler emits through ``logging`` is kept per attempt, beside
the job, and still reaches the project's handlers unchanged."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from django.db import DatabaseError
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.core.job_log_context import CURRENT, JobFields
from django_leasejobs.dialects import LogRow
from django_leasejobs.models import Job, JobLog, Status
from django_leasejobs.runtime import attempt_ends, execution, job_logs
from django_leasejobs.runtime.job_logs import ROUTER, Buffer
from django_leasejobs.runtime.worker import Worker
from django_leasejobs.testing import drain, run_job

from ..conftest import shifted

pytestmark = pytest.mark.django_db


class Kept(logging.Handler):
    """A project's own handler: what it receives, formatted with the job's fields."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(job_id)s/%(attempt)s %(name)s %(message)s"))
        self.addFilter(JobFields())

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def project_logging() -> Iterator[Kept]:
    """The project's LOGGING: its loggers at INFO, a handler of its own on the root."""
    handler = Kept()
    root = logging.getLogger()
    names = ("testapp", "testlib")
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.INFO)
    root.addHandler(handler)
    yield handler
    root.removeHandler(handler)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


@pytest.fixture
def router_off(monkeypatch) -> None:
    """The router's count of users at none and the router off the root, whatever a worker of
    an earlier test (one still running in a thread holds the router) left behind."""
    monkeypatch.setattr(job_logs, "_users", 0)
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [h for h in root.handlers if h is not ROUTER])


def messages(job: Job) -> list[tuple[int, str, str, str]]:
    return [
        (entry["attempt"], entry["level"], entry["logger"], entry["message"])
        for entry in job.logs()
        if "message" in entry
    ]


def test_a_sync_handler_s_records_are_kept_with_a_library_s(project_logging) -> None:
    run_job(jobs.logs_lines, 2)
    job = Job.objects.get(name=jobs.logs_lines.name)
    assert messages(job) == [
        (1, "INFO", "testapp.work", "line 0 of attempt 1"),
        (1, "INFO", "testapp.work", "line 1 of attempt 1"),
        (1, "INFO", "testlib.client", "library call 1"),
    ]
    entry = job.logs()[0]
    assert set(entry) == {"attempt", "level", "logger", "message", "at"}
    assert entry["at"].endswith("Z")
    # The project's handler got every record, DEBUG ones dropped by the logger's level alone,
    # with the job's fields.
    assert f"{job.pk}/1 testapp.work line 0 of attempt 1" in project_logging.lines
    assert f"{job.pk}/1 testlib.client library call 1" in project_logging.lines


def test_the_router_is_on_the_root_only_while_a_job_runs(router_off, project_logging) -> None:
    run_job(jobs.logs_lines)
    assert ROUTER not in logging.getLogger().handlers
    logging.getLogger("testapp.work").info("outside any job")
    assert project_logging.lines[-1] == "None/None testapp.work outside any job"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("kept", "added"), [(True, 1), (False, 0)])
def test_a_worker_keeps_the_router_on_the_root_for_its_whole_run(
    router_off, project_logging, monkeypatch, settings, kept, added
) -> None:
    """Put on once for the run, not once per attempt (each put and take takes the logging
    module's lock); never while logs are off; off the root once the run ends."""
    if not kept:
        settings.LEASEJOBS_JOB_LOGS = None
    root = logging.getLogger()
    puts: list[logging.Handler] = []
    add_handler = root.addHandler
    monkeypatch.setattr(root, "addHandler", lambda h: (puts.append(h), add_handler(h))[1])
    rows = [jobs.logs_lines.enqueue(1) for _ in range(4)]
    Worker(queues=None, concurrency=1, poll=0.05, scheduler=False, worker_id="w-route").run(
        burst=True
    )
    assert puts.count(ROUTER) == added
    assert ROUTER not in root.handlers
    assert all(len(messages(row)) == (2 if kept else 0) for row in rows)


@pytest.mark.django_db(transaction=True)
def test_logs_are_kept_after_a_job_set_the_project_s_logging_up_again(
    router_off, project_logging
) -> None:
    """``dictConfig`` with a root takes every handler off it, the router held for the run
    too: the next attempt puts it back."""
    before = jobs.logs_lines.enqueue(1)
    jobs.reconfigures_logging.enqueue()
    after = jobs.logs_lines.enqueue(1)
    Worker(queues=None, concurrency=1, batch=1, poll=0.05, scheduler=False, worker_id="w-re").run(
        burst=True
    )
    assert set(Job.objects.values_list("status", flat=True)) == {Status.SUCCEEDED}
    for row in (before, after):
        assert [m[3] for m in messages(row)] == ["line 0 of attempt 1", "library call 1"]
    assert ROUTER not in logging.getLogger().handlers


def test_an_async_handler_s_records_and_its_child_task_s(project_logging) -> None:
    run_job(jobs.async_logs_lines, 2)
    job = Job.objects.get(name=jobs.async_logs_lines.name)
    assert messages(job) == [
        (1, "INFO", "testapp.work", "async line 0"),
        (1, "INFO", "testapp.work", "async line 1"),
        (1, "WARNING", "testapp.work", "from a child task"),
    ]


@pytest.mark.django_db(transaction=True)
def test_sync_and_async_jobs_in_the_worker_keep_their_own(project_logging) -> None:
    sync = [jobs.logs_lines.enqueue(1) for _ in range(4)]
    asyncs = [jobs.async_logs_lines.enqueue(1) for _ in range(4)]
    Worker(queues=None, concurrency=2, poll=0.05, scheduler=False, worker_id="w-logs").run(
        burst=True
    )
    for row in sync:
        assert [m[3] for m in messages(row)] == ["line 0 of attempt 1", "library call 1"]
    for row in asyncs:
        assert [m[3] for m in messages(row)] == ["async line 0", "from a child task"]


def test_the_level_setting_filters(project_logging, settings) -> None:
    settings.LEASEJOBS_JOB_LOGS = {"level": "WARNING"}
    run_job(jobs.async_logs_lines, 2)
    job = Job.objects.get(name=jobs.async_logs_lines.name)
    assert messages(job) == [(1, "WARNING", "testapp.work", "from a child task")]


def test_none_turns_it_off_and_the_fields_are_still_set(project_logging, settings) -> None:
    settings.LEASEJOBS_JOB_LOGS = None
    run_job(jobs.logs_lines)
    job = Job.objects.get(name=jobs.logs_lines.name)
    assert job.logs() == []
    assert not JobLog.objects.exists()
    assert f"{job.pk}/1 testapp.work line 0 of attempt 1" in project_logging.lines


def test_each_attempt_keeps_its_own_with_its_error(project_logging) -> None:
    row = jobs.logs_lines.enqueue(1, fail_attempts=2)
    drain(with_scheduled=True)
    row.refresh_from_db()
    assert row.status == Status.SUCCEEDED
    assert messages(row) == [
        (1, "INFO", "testapp.work", "line 0 of attempt 1"),
        (1, "INFO", "testlib.client", "library call 1"),
        (1, "ERROR", "testapp.work", "failing attempt 1"),
        (2, "INFO", "testapp.work", "line 0 of attempt 2"),
        (2, "INFO", "testlib.client", "library call 2"),
        (2, "ERROR", "testapp.work", "failing attempt 2"),
        (3, "INFO", "testapp.work", "line 0 of attempt 3"),
        (3, "INFO", "testlib.client", "library call 3"),
    ]
    assert JobLog.objects.filter(job=row).count() == 3


def test_the_attempt_cap_keeps_the_first_and_last_with_a_dropped_count(project_logging) -> None:
    run_job(jobs.logs_lines, 400, size=1000)  # about 400 KB of lines, 64 KiB kept
    job = Job.objects.get(name=jobs.logs_lines.name)
    logs = job.logs()
    (marker,) = [entry for entry in logs if "dropped" in entry]
    kept = [entry["message"] for entry in logs if "message" in entry]
    assert kept[0].startswith("line 0 of attempt 1")
    assert kept[-1] == "library call 1"
    assert marker["dropped"] + len(kept) == 401
    assert sum(len(message) for message in kept) <= job_logs.ATTEMPT_CAP
    assert JobLog.objects.get(job=job).size <= job_logs.ATTEMPT_CAP


def test_the_job_cap_drops_middle_attempts_and_keeps_the_first_and_last(
    project_logging, monkeypatch
) -> None:
    from django_leasejobs.upkeep import job_logs as stored

    monkeypatch.setattr(stored, "JOB_CAP", 3000)
    row = jobs.logs_lines.enqueue(1, fail_attempts=2, size=900)
    drain(with_scheduled=True)
    logs = row.logs()
    attempts = sorted({entry["attempt"] for entry in logs})
    assert attempts == [1, 3]
    marker = next(entry for entry in logs if "dropped" in entry)
    assert marker == {"attempt": 3, "dropped": 3}  # attempt 2's three records


def test_a_long_message_is_cut() -> None:
    buffer = Buffer(logging.INFO)
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "y" * 20000, None, None)
    buffer.add(record)
    (entry,), _ = buffer.records()
    assert entry["message"].endswith("(11808 characters cut)")


def test_a_stale_attempt_writes_no_logs_and_the_new_owner_s_are_its_own(
    project_logging,
) -> None:
    jobs.logs_lines.enqueue(1)
    (stale,) = protocol.claim("w1", batch=1)
    Job.objects.filter(pk=stale.pk).update(lease_expires_at=shifted(-60))
    protocol.recover_expired()  # the lease expired: the job fails, to be retried
    Job.objects.filter(pk=stale.pk).update(run_at=shifted(-1))
    (owner,) = protocol.claim("w2", batch=1)  # w2 takes it again
    late = execution.execute(stale, "w1")
    assert late.context.logs is not None
    assert attempt_ends.write_result(late) is protocol.Outcome.STALE
    assert not JobLog.objects.exists()
    assert attempt_ends.write_result(execution.execute(owner, "w2")) is protocol.Outcome.SUCCEEDED
    assert [m[0] for m in messages(owner)] == [2, 2]  # only the owner's attempt


def test_a_lost_lease_writes_no_logs(project_logging) -> None:
    jobs.logs_lines.enqueue(1)
    (claimed,) = protocol.claim("w1", batch=1)
    result = execution.execute(claimed, "w1")
    result.context.lease_lost_event.set()
    assert attempt_ends.write_result(result) is protocol.Outcome.STALE
    assert not JobLog.objects.exists()


def test_records_outside_a_job_are_ignored_at_once() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    assert CURRENT.get() is None
    assert ROUTER.handle(record) is False
    assert not hasattr(record, "job_id")


def test_current_job_is_the_running_attempt_for_structlog_users(project_logging) -> None:
    from django_leasejobs.logs import current_job

    assert current_job() is None
    job = jobs.noop.enqueue()
    (claimed,) = protocol.claim("w1", batch=1)
    with job_logs.capturing(execution.start(claimed, "w1")):
        assert current_job() == {"job_id": job.pk, "job_name": job.name, "attempt": 1}
    assert current_job() is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("handler", "kept"),
    [
        (jobs.logs_until_timeout, ["waiting", "stopped: timeout"]),
        (jobs.async_logs_until_timeout, ["awaiting"]),
    ],
)
def test_an_attempt_the_worker_ended_keeps_what_it_logged(handler, kept) -> None:
    row = handler.enqueue()
    summary = Worker(queues=None, concurrency=1, poll=0.05, scheduler=False).run(burst=True)
    assert summary.timed_out == 1
    row.refresh_from_db()
    assert row.status == Status.DEAD
    assert [entry["message"] for entry in row.logs()] == kept


def test_a_record_no_handler_takes_still_reaches_python_s_last_resort(monkeypatch) -> None:
    """With the router on a root that has no other handler, Python would skip its last
    resort (stderr) for every record: the router passes such records to it itself."""
    import io

    stream = io.StringIO()
    resort = logging.StreamHandler(stream)
    resort.setLevel(logging.WARNING)
    monkeypatch.setattr(logging, "lastResort", resort)
    monkeypatch.setattr(logging.getLogger(), "handlers", [ROUTER])
    logging.getLogger("nohandlers.here").warning("seen on stderr")
    logging.getLogger("nohandlers.here").info("below the last resort's level")
    assert stream.getvalue() == "seen on stderr\n"
    monkeypatch.setattr(logging.getLogger(), "handlers", [ROUTER, logging.NullHandler()])
    logging.getLogger("nohandlers.here").warning("the project's handler took it")
    assert stream.getvalue() == "seen on stderr\n"


@pytest.mark.django_db(transaction=True)
def test_a_workflow_s_steps_keep_their_logs_through_the_grouped_flush(project_logging) -> None:
    from django_leasejobs import chain

    chain(jobs.logs_lines.si(1), jobs.logs_lines.si(2)).enqueue()
    Worker(queues=None, concurrency=2, poll=0.05, scheduler=False).run(burst=True)
    rows = Job.objects.filter(name=jobs.logs_lines.name).order_by("pk")
    assert [row.status for row in rows] == [Status.SUCCEEDED] * 2
    assert [len(messages(row)) for row in rows] == [2, 3]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("workflow", [False, True])
def test_the_logs_are_written_in_the_completion_s_transaction(workflow) -> None:
    """``then`` runs inside the batch's transaction: its failure leaves nothing written."""
    from django_leasejobs import chain

    if workflow:
        chain(jobs.noop.si(), jobs.noop.si()).enqueue()
    else:
        jobs.noop.enqueue()
    (claimed, *_) = protocol.claim("w1", batch=1)

    def then(done: set[int]) -> None:
        assert done == {claimed.pk}
        raise RuntimeError("the logs' insert failed")

    with pytest.raises(RuntimeError):
        protocol.complete_many([(claimed.pk, claimed.attempt)], then=then)
    assert Job.objects.get(pk=claimed.pk).status == Status.RUNNING


TRIGGERS = {
    "sqlite": (
        "CREATE TRIGGER lj_refuse_logs BEFORE INSERT ON django_leasejobs_joblog "
        "BEGIN SELECT RAISE(ABORT, 'logs refused'); END",
        "DROP TRIGGER lj_refuse_logs",
    ),
    "postgresql": (
        "CREATE FUNCTION lj_refuse_logs() RETURNS trigger AS "
        "$$ BEGIN RAISE EXCEPTION 'logs refused'; END $$ LANGUAGE plpgsql; "
        "CREATE TRIGGER lj_refuse_logs BEFORE INSERT ON django_leasejobs_joblog "
        "FOR EACH ROW EXECUTE FUNCTION lj_refuse_logs()",
        "DROP TRIGGER lj_refuse_logs ON django_leasejobs_joblog; DROP FUNCTION lj_refuse_logs()",
    ),
    "mysql": (
        "CREATE TRIGGER lj_refuse_logs BEFORE INSERT ON django_leasejobs_joblog FOR EACH ROW "
        "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'logs refused'",
        "DROP TRIGGER lj_refuse_logs",
    ),
}


@pytest.fixture
def logs_refused() -> Iterator[None]:
    """The database refuses every insert of logs (a trigger): a real error at the insert."""
    from django.db import connection

    create, drop = TRIGGERS[connection.vendor]
    with connection.cursor() as cursor:
        cursor.execute(create)
    yield
    with connection.cursor() as cursor:
        cursor.execute(drop)


def given_logs(*job_ids: int) -> list[LogRow]:
    """Log rows of first attempts, as the worker hands them to a grouped completion."""
    line = {"level": "INFO", "logger": "testapp", "message": "kept", "at": "2026-01-01T00:00:00Z"}
    return [LogRow(job_id, 1, [line], 60) for job_id in job_ids]


@pytest.mark.django_db(transaction=True)
def test_logs_given_to_a_completion_are_written_for_the_jobs_it_completed() -> None:
    jobs.noop.enqueue_many([((), {})] * 2)
    ours, stale = protocol.claim("w1", batch=2)
    outcomes = protocol.complete_many(
        [(ours.pk, ours.attempt), (stale.pk, stale.attempt + 1)], logs=given_logs(ours.pk, stale.pk)
    )
    assert outcomes == {ours.pk: protocol.Outcome.SUCCEEDED, stale.pk: protocol.Outcome.STALE}
    assert list(JobLog.objects.values_list("job_id", "attempt", "size")) == [(ours.pk, 1, 60)]
    assert messages(Job.objects.get(pk=ours.pk)) == [(1, "INFO", "testapp", "kept")]


@pytest.mark.django_db(transaction=True)
def test_logs_given_to_a_workflow_s_completion_are_written_with_its_steps() -> None:
    from django_leasejobs import chain

    chain(jobs.noop.si(), jobs.noop.si()).enqueue()
    (claimed,) = protocol.claim("w1", batch=1)
    protocol.complete_many([(claimed.pk, claimed.attempt)], logs=given_logs(claimed.pk))
    assert Job.objects.get(pk=claimed.pk).status == Status.SUCCEEDED
    assert list(JobLog.objects.values_list("job_id", flat=True)) == [claimed.pk]


@pytest.mark.django_db(transaction=True)
def test_logs_the_database_refuses_in_a_completion_leave_the_batch_unwritten(
    logs_refused,
) -> None:
    """All or nothing, as any other error of the batch: the worker then writes it again with
    its logs apart (the test below)."""
    jobs.noop.enqueue()
    (claimed,) = protocol.claim("w1", batch=1)
    with pytest.raises(DatabaseError):
        protocol.complete_many([(claimed.pk, claimed.attempt)], logs=given_logs(claimed.pk))
    assert Job.objects.get(pk=claimed.pk).status == Status.RUNNING
    assert not JobLog.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_logs_the_database_refuses_are_lost_and_the_attempts_ends_are_written(
    project_logging, logs_refused, caplog
) -> None:
    """In the grouped flush and in a single report alike, a failed insert of logs loses them
    (a warning says so) and never the completions it rode with."""
    rows = [jobs.logs_lines.enqueue(1) for _ in range(6)]
    summary = Worker(queues=None, concurrency=3, poll=0.05, scheduler=False).run(burst=True)
    assert summary.succeeded == 6
    assert {row.status for row in Job.objects.filter(pk__in=[r.pk for r in rows])} == {
        Status.SUCCEEDED
    }
    assert not JobLog.objects.exists()
    assert any("job.logs_lost" in line for line in caplog.messages)
