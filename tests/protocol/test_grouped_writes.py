"""The grouped statements (complete_many, heartbeat, bulk enqueue) and NOTIFY on enqueue.

They must keep every guarantee of the one-row paths: each row fenced by its own token, results
stored as ``complete()`` stores them, and a job announced only once it is committed.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import time
from collections import OrderedDict, namedtuple
from collections.abc import Iterator

import pytest
from django.db import IntegrityError, connection, transaction
from django.forms.models import model_to_dict
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st
from testapp import jobs

from django_leasejobs import dialects, protocol
from django_leasejobs.core import notify
from django_leasejobs.dialects.postgresql import insert as pg_insert
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Outcome
from django_leasejobs.runtime.listener import Listener

from ..conftest import fields

Point = namedtuple("Point", "x y")

postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="LISTEN/NOTIFY is PostgreSQL's"
)


@pytest.mark.django_db
class TestCompleteMany:
    def test_results_are_stored_and_each_row_is_fenced(self) -> None:
        for _ in range(3):
            jobs.noop.enqueue()
        a, b, c = protocol.claim("w1", batch=3)
        protocol.release(c.pk, c.attempt)  # c's token is now stale
        outcomes = protocol.complete_many(
            [(a.pk, a.attempt, {"n": 1}), (b.pk, b.attempt), (c.pk, c.attempt, "late")]
        )
        assert outcomes == {a.pk: Outcome.SUCCEEDED, b.pk: Outcome.SUCCEEDED, c.pk: Outcome.STALE}
        assert fields(a.pk, "status", "result") == {"status": Status.SUCCEEDED, "result": {"n": 1}}
        assert fields(b.pk, "status", "result") == {"status": Status.SUCCEEDED, "result": None}
        assert fields(c.pk, "status", "result") == {"status": Status.PENDING, "result": None}
        row = fields(a.pk, "finished_at", "lease_owner", "lease_expires_at")
        assert row["finished_at"] is not None
        assert (row["lease_owner"], row["lease_expires_at"]) == ("", None)

    def test_a_wrong_attempt_changes_nothing(self) -> None:
        job = jobs.noop.enqueue()
        (claimed,) = protocol.claim("w1", batch=1)
        assert protocol.complete_many([(job.pk, claimed.attempt + 1, 1)]) == {job.pk: Outcome.STALE}
        assert fields(job.pk, "status")["status"] == Status.RUNNING

    def test_an_unstorable_result_fails_only_its_job(self) -> None:
        for _ in range(3):
            jobs.noop.enqueue()
        good, bad, circular = protocol.claim("w1", batch=3)
        contains_itself: list[object] = []
        contains_itself.append(contains_itself)
        outcomes = protocol.complete_many(
            [
                (good.pk, good.attempt, [1, 2]),
                (bad.pk, bad.attempt, float("nan")),
                (circular.pk, circular.attempt, contains_itself),
            ]
        )
        assert outcomes == {
            good.pk: Outcome.SUCCEEDED,
            bad.pk: Outcome.DEAD,
            circular.pk: Outcome.DEAD,
        }
        assert fields(good.pk, "result")["result"] == [1, 2]
        assert DeadLetter.objects.get(job_id=bad.pk).reason == "error"
        assert "contains itself" in fields(circular.pk, "last_error")["last_error"]


@pytest.mark.django_db
def test_heartbeat_extends_owned_leases_and_names_the_lost_ones(expire_lease) -> None:
    for _ in range(3):
        jobs.noop.enqueue()
    mine, reclaimed, other = protocol.claim("w1", batch=3)
    Job.objects.filter(pk=other.pk).update(lease_owner="w2")
    protocol.release(reclaimed.pk, reclaimed.attempt)
    expire_lease(mine)
    lost = protocol.heartbeat(
        "w1",
        [(mine.pk, mine.attempt), (reclaimed.pk, reclaimed.attempt), (other.pk, other.attempt)],
        lease_seconds=30,
    )
    assert lost == {reclaimed.pk, other.pk}
    row = fields(mine.pk, "lease_expires_at", "started_at")
    assert row["lease_expires_at"] > row["started_at"]


@pytest.mark.django_db
class TestBulkEnqueue:
    def test_returned_jobs_equal_their_rows(self) -> None:
        made = jobs.add.enqueue_many(
            [((1, 2), {}), {"args": [3, 4], "priority": 7, "queue": "q2"}, ((5,), {"b": 6})]
        )
        for job in made:
            stored = Job.objects.get(pk=job.pk)
            assert model_to_dict(job) == model_to_dict(stored)
            assert (job.run_at, job.created_at) == (stored.run_at, stored.created_at)
            assert not job._state.adding
        assert [j.args for j in made] == [[1, 2], [3, 4], [5]]
        assert [j.pk for j in made] == sorted(j.pk for j in made)

    def test_rows_that_differ_in_any_field_are_stored_as_given(self) -> None:
        """Fields equal in every row are statement parameters; the others travel as JSON."""
        when = timezone.now() + dt.timedelta(hours=1)
        made = jobs.add.enqueue_many(
            [
                {"args": [1, 1], "max_attempts": 3},
                {"args": [1, 1], "kwargs": {}, "run_at": when, "priority": -5},
                {"args": [2, 2], "delay": 60, "queue": "other", "max_attempts": 9},
            ]
        )
        stored = {job.pk: Job.objects.get(pk=job.pk) for job in made}
        for job in made:
            assert model_to_dict(job) == model_to_dict(stored[job.pk])
            assert job.run_at == stored[job.pk].run_at
        assert [(j.max_attempts, j.priority, j.queue) for j in made] == [
            (3, 0, "default"),
            (jobs.add.get_max_attempts(), -5, "default"),
            (9, 0, "other"),
        ]
        assert made[1].run_at == when

    def test_values_equal_in_python_but_not_in_json_stay_apart(self) -> None:
        """1 == 1.0 == True, but they are three different JSON values (and handler arguments)."""
        made = jobs.add.enqueue_many([([1, 2], {}), ([True, 2.0], {}), ([1.0, 2], {})])
        stored = [Job.objects.get(pk=job.pk).args for job in made]
        assert [[type(v) for v in args] for args in stored] == [
            [int, int],
            [bool, float],
            [float, int],
        ]
        assert stored == [job.args for job in made]

    @pytest.mark.parametrize(
        ("first", "second"),
        [
            (OrderedDict(a=1), OrderedDict(a=True)),
            (OrderedDict(a=1), OrderedDict(a=1.0)),
            (Point(1, 2), Point(True, 2)),
        ],
        ids=["ordered-dict-bool", "ordered-dict-float", "namedtuple-bool"],
    )
    def test_nested_subclasses_keep_each_rows_own_json(self, first: object, second: object) -> None:
        """1 == 1.0 == True inside an OrderedDict or a namedtuple too: each row its own value."""
        alone = jobs.takes_anything.enqueue(second)
        made = jobs.takes_anything.enqueue_many([((first,), {}), ((second,), {})])
        stored = [json.dumps(Job.objects.get(pk=job.pk).args) for job in [*made, alone]]
        assert stored[1] == stored[2] != stored[0]

    def test_a_single_enqueue_equals_its_row(self) -> None:
        """enqueue() builds its Job from the values it sent (pg_insert), not by a re-read."""
        made = [
            jobs.add.enqueue(1, 2),
            jobs.add.enqueue(3, 4, priority=7, queue="other", max_attempts=2),
            jobs.add.enqueue(5, 6, delay=30),
            jobs.add.enqueue(7, 8, dedupe_key="one-of-a-kind"),
        ]
        for job in made:
            stored = Job.objects.get(pk=job.pk)
            assert model_to_dict(job) == model_to_dict(stored)
            assert (job.run_at, job.created_at) == (stored.run_at, stored.created_at)
            assert (job.status, job.attempt) == (Status.PENDING, 0)
            assert not job._state.adding
            assert job._state.db == stored._state.db
        made[0].errors.append("x")
        assert jobs.add.enqueue(9, 9).errors == [], "a default list is not shared"

    def test_order_holds_across_statements(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(pg_insert, "CHUNK", 3)
        made = jobs.add.enqueue_many([((i, i), {}) for i in range(8)])
        assert [j.args for j in made] == [[i, i] for i in range(8)]
        assert [Job.objects.get(pk=j.pk).args for j in made] == [[i, i] for i in range(8)]

    def test_mutable_defaults_are_not_shared(self) -> None:
        first, second = jobs.noop.enqueue_many([((), {}), ((), {})])
        first.errors.append("x")
        assert second.errors == []

    def test_a_bad_item_in_a_later_chunk_writes_nothing(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Chunks are validated while earlier ones are inserted: a bad item rolls them back."""
        monkeypatch.setattr(pg_insert, "CHUNK", 3)
        kept = jobs.add.enqueue(0, 0)
        items = [((i, i), {}) for i in range(10)] + [(([1], {"x": float("inf")}))]
        with transaction.atomic():
            inside = jobs.add.enqueue(1, 1)
            with pytest.raises(JobValidationError, match="Infinity"):
                jobs.add.enqueue_many(items)
            # The caller's transaction goes on, with its own write kept.
            after = jobs.add.enqueue(2, 2)
        assert set(Job.objects.values_list("pk", flat=True)) == {kept.pk, inside.pk, after.pk}
        assert [j.args for j in jobs.add.enqueue_many(items[:7])] == [[i, i] for i in range(7)]

    @postgresql_only
    def test_a_database_error_in_a_later_chunk_writes_nothing(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An error the database raises for a later statement comes out as Django's own
        IntegrityError, the earlier chunks are rolled back and the connection stays usable."""
        monkeypatch.setattr(pg_insert, "CHUNK", 2)
        with connection.cursor() as cursor:  # rolled back with the test's transaction
            cursor.execute(
                "ALTER TABLE django_leasejobs_job "
                "ADD CONSTRAINT test_no_boom CHECK (queue <> 'boom')"
            )
        items = [((i, i), {}) for i in range(5)] + [{"args": [9, 9], "queue": "boom"}]
        with pytest.raises(IntegrityError, match="test_no_boom"):
            jobs.add.enqueue_many(items)
        assert not Job.objects.exists()
        assert len(jobs.add.enqueue_many(items[:5])) == 5


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0.0, -0.0, 1.0, 2.5])
    | st.text(max_size=2),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=2), children, max_size=3)
    ),
    max_leaves=8,
)


@pytest.mark.fuzz
@given(JSON_VALUES, JSON_VALUES)
def test_bulk_rows_share_a_value_only_when_its_json_is_the_same(a: object, b: object) -> None:
    """Rows whose field is "the same" send the first row's value for all: it must be the same
    JSON (jsonb ignores key order, so keys are sorted here), never merely equal in Python."""
    same_json = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert pg_insert._same_json(a, b) == same_json
    assert pg_insert._same_json(a, copy.deepcopy(a))


@pytest.mark.fuzz
@given(st.lists(JSON_VALUES, min_size=1, max_size=4))
def test_a_bulk_column_varies_when_its_json_does(column: list[object]) -> None:
    rows = [{"v": value} for value in column]
    assert pg_insert._varies("v", rows) == (
        len({json.dumps(v, sort_keys=True) for v in column}) > 1
    )
    shared = [{"v": column[0]} for _ in column]  # the very same object in every row
    assert not pg_insert._varies("v", shared)


@postgresql_only
@pytest.mark.django_db(transaction=True)
class TestNotify:
    @pytest.fixture
    def listener(self) -> Iterator[Listener]:
        listener = Listener()
        listener.start()
        assert listener.connected()
        yield listener
        listener.close()

    def test_enqueue_notifies_its_queue_on_commit(self, listener: Listener) -> None:
        with transaction.atomic():
            jobs.other_queue.enqueue()
            assert listener.wait(0.2) == set()  # not before the commit
        assert listener.wait(5) == {"other"}

    def test_a_rolled_back_enqueue_notifies_nothing(self, listener: Listener) -> None:
        with pytest.raises(RuntimeError), transaction.atomic():
            jobs.noop.enqueue()
            raise RuntimeError("roll back")
        assert listener.wait(0.3) == set()

    def test_a_delayed_job_is_not_announced(self, listener: Listener) -> None:
        jobs.noop.enqueue(delay=60)
        assert listener.wait(0.3) == set()

    def test_a_job_given_a_past_run_at_is_announced(self, listener: Listener) -> None:
        jobs.other_queue.enqueue(run_at=timezone.now() - dt.timedelta(seconds=5))
        assert listener.wait(5) == {"other"}

    def test_a_dedupe_keyed_job_is_announced(self, listener: Listener) -> None:
        jobs.other_queue.enqueue(dedupe_key="announced")
        assert listener.wait(5) == {"other"}

    def test_bulk_enqueue_notifies_each_due_queue(self, listener: Listener) -> None:
        jobs.noop.enqueue_many([((), {}), {"queue": "q2"}, {"queue": "later", "delay": 60}])
        seen: set[str] = set()
        for _ in range(3):
            seen |= listener.wait(1)
        assert seen == {"default", "q2"}

    def test_notify_can_be_turned_off(self, listener: Listener) -> None:
        with override_settings(LEASEJOBS_NOTIFY=False):
            assert not dialects.notifies()
            jobs.noop.enqueue()
            jobs.noop.enqueue_many([((), {})])
        assert listener.wait(0.3) == set()

    def test_wake_interrupts_a_wait(self, listener: Listener) -> None:
        listener.wake()
        assert listener.wait(30) == set()

    def test_a_lost_connection_is_reopened(self, listener: Listener) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = ANY(%s) "
                "AND pid <> pg_backend_pid() AND datname = current_database()",
                # The listener's last statement: it listens to the queue and the cancel channels.
                [[f"LISTEN {notify.CHANNEL}", f"LISTEN {notify.CANCEL_CHANNEL}"]],
            )
            pids = [row[0] for row in cursor.fetchall()]
            assert pids, "the listener's session was not found"
            # pg_terminate_backend only signals: wait until the session is really gone, or
            # start() below may still find it alive and keep it.
            for _ in range(500):
                cursor.execute("SELECT pg_stat_clear_snapshot()")  # a fresh view each time
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [pids])
                if cursor.fetchone()[0] == 0:
                    break
                time.sleep(0.01)
            else:
                pytest.fail("the terminated session did not end in 5 s")
        assert listener.wait(0.5) == set()
        listener.start()
        assert listener.connected()
        jobs.noop.enqueue()
        assert listener.wait(5) == {"default"}


@pytest.mark.django_db
def test_notify_is_postgresql_only() -> None:
    assert dialects.notifies() is (connection.vendor == "postgresql")


@pytest.mark.django_db
def test_a_claimed_job_still_reads_its_error_history(make_due) -> None:
    """The claim leaves the history out of the rows it returns; it loads on access."""
    job = jobs.noop.enqueue()
    (first,) = protocol.claim("w1", batch=1)
    protocol.fail(first.pk, first.attempt, protocol.Failure("boom"))
    make_due(job)
    (again,) = protocol.claim("w1", batch=1)
    assert [entry["error"] for entry in again.errors] == ["boom"]
    assert again.last_error == "boom"
    assert again.result is None


@pytest.mark.django_db
def test_enqueue_many_on_postgresql_takes_the_one_statement_path() -> None:
    """The bulk path must not fall back to Django's bulk_create when the Job model grows."""
    if connection.vendor != "postgresql":
        pytest.skip("the one-statement bulk INSERT is PostgreSQL's")
    with CaptureQueriesContext(connection) as queries:
        created = jobs.noop.enqueue_many([((), {})] * 50)
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert len(inserts) == 1
    assert "jsonb_array_elements" in inserts[0]
    assert len({job.pk for job in created}) == 50
