"""``complete_steps`` and ``count_steps`` on every database, with its own dialect and with the
ORM's: a batch of workflow successes moves the jobs (each fenced) and their steps; the counts
the protocol computes from them move each child's pending count once and each run's counters
once, and report the children left with no pending parent and the runs whose every step
ended."""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from testapp import jobs
from testapp import workflow_jobs as w

from django_leasejobs import dialects, group, protocol
from django_leasejobs.dialects import Completion
from django_leasejobs.dialects.base.workflow_steps import Counted, StepsCompleted
from django_leasejobs.dialects.postgresql import steps as postgresql_steps
from django_leasejobs.models import Job, Status, WorkflowEdge, WorkflowRun, WorkflowStep
from django_leasejobs.protocol.workflow_completions import counts

from ..invariants import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _members(run: WorkflowRun) -> list[Job]:
    return sorted(protocol.claim("w1", batch=100), key=lambda j: j.pk)


def _steps(run: WorkflowRun) -> dict[str, tuple[str, int]]:
    rows = WorkflowStep.objects.filter(run=run).values_list("name", "state", "pending_parents")
    return {name: (state, pending) for name, state, pending in rows}


class Done(NamedTuple):
    jobs: set[int]
    ready: list[tuple[int, int, str]]
    finished_runs: list[int]


def _complete(dialect: dialects.Dialect, completions: list[Completion]) -> Done:
    """The two operations as the protocol calls them, in one transaction."""
    with transaction.atomic():
        moved: StepsCompleted = dialect.complete_steps(DEFAULT_DB_ALIAS, completions, "w1")
        children, runs = counts(DEFAULT_DB_ALIAS, moved.moved)
        counted: Counted = dialect.count_steps(DEFAULT_DB_ALIAS, children, runs)
        return Done(moved.jobs, counted.ready, counted.finished_runs)


@pytest.mark.parametrize("result", [None, 7])
def test_a_batch_moves_jobs_steps_children_and_runs(dialect: dialects.Dialect, result: Any) -> None:
    run = group(w.square.s(i) for i in range(4)).then(w.total.s()).enqueue()
    first, second, third, fourth = _members(run)
    done = _complete(dialect, [Completion(first.pk, 1, result), Completion(second.pk, 1)])
    assert done.jobs == {first.pk, second.pk}
    assert (done.ready, done.finished_runs) == ([], [])
    rows = {j.pk: j for j in Job.objects.all()}
    assert (rows[first.pk].status, rows[first.pk].result) == (Status.SUCCEEDED, result)
    assert (rows[first.pk].finished_by, rows[first.pk].lease_owner) == ("w1", "")
    assert rows[first.pk].finished_at is not None
    assert _steps(run)["square"] == ("succeeded", 0)
    assert _steps(run)["total"] == ("waiting", 2)
    counters = WorkflowRun.objects.values_list("steps_finished", "steps_succeeded").get()
    assert counters == (2, 2)
    done = _complete(dialect, [Completion(third.pk, 1), Completion(fourth.pk, 1)])
    callback = WorkflowStep.objects.get(run=run, name="total")
    assert done.ready == [(callback.pk, run.pk, "cancel")]
    assert done.finished_runs == []  # the callback has not run
    assert _steps(run)["total"] == ("waiting", 0)  # released by the protocol, not here


def test_stale_tokens_plain_jobs_and_replaced_jobs_change_nothing(
    dialect: dialects.Dialect,
) -> None:
    run = group(w.square.s(i) for i in range(2)).then(w.total.s()).enqueue()
    plain = jobs.noop.enqueue()
    claimed = {j.pk: j for j in protocol.claim("w1", batch=10)}
    member, replaced = sorted(pk for pk in claimed if pk != plain.pk)
    # The second member's step now follows another job (as after a replay).
    WorkflowStep.objects.filter(job_id=replaced).update(job_id=plain.pk)
    done = _complete(
        dialect,
        [Completion(member, 2), Completion(plain.pk, 1), Completion(replaced, 1)],
    )
    assert done.jobs == {replaced}  # its job row is fenced and written; its step is not its
    assert Job.objects.get(pk=member).status == Status.RUNNING
    assert Job.objects.get(pk=plain.pk).status == Status.RUNNING
    assert _steps(run)["square-2"][0] == "released"
    assert WorkflowRun.objects.values_list("steps_finished", flat=True).get() == 0


def test_the_last_step_reports_its_run(dialect: dialects.Dialect) -> None:
    run = group(w.square.s(1), w.square.s(2)).enqueue()
    first, second = _members(run)
    done = _complete(dialect, [Completion(first.pk, 1, 1), Completion(second.pk, 1, 4)])
    assert done.finished_runs == [run.pk]
    assert WorkflowRun.objects.values_list("steps_finished", "steps_total").get() == (2, 2)


def test_a_released_on_failure_child_ending_with_its_parent_is_written_once(
    dialect: dialects.Dialect,
) -> None:
    run = group(w.square.s(1), w.square.s(2), w.boom.si()).on_failure(w.tick.si("f")).enqueue()
    claimed = _members(run)
    boom = next(j for j in claimed if j.name == w.boom.name)
    protocol.fail(boom.pk, boom.attempt, protocol.Failure("x"), retryable=False)
    (handler,) = protocol.claim("w1", batch=1)  # the on_failure step, released by the death
    member = next(j for j in claimed if j.name == w.square.name)
    done = _complete(dialect, [Completion(member.pk, 1, 1), Completion(handler.pk, 1)])
    assert done.jobs == {member.pk, handler.pk}
    assert _steps(run)["tick"] == ("succeeded", 2)  # its own end; not decremented with it


def test_runs_are_counted_once_no_child_is_left_ready(dialect: dialects.Dialect) -> None:
    """A child left ready leaves the runs uncounted (the protocol releases it first); the
    runs alone are then counted."""
    run = group(w.square.s(1), w.square.s(2)).then(w.total.s()).enqueue()
    members = _members(run)
    callback = WorkflowStep.objects.get(run=run, name="total")
    with transaction.atomic():
        moved = dialect.complete_steps(
            DEFAULT_DB_ALIAS, [Completion(j.pk, 1) for j in members], "w1"
        )
        assert set(moved.moved) == set(
            WorkflowStep.objects.filter(run=run, name__startswith="square").values_list(
                "pk", flat=True
            )
        )
        assert set(moved.moved.values()) == {run.pk}
        counted = dialect.count_steps(DEFAULT_DB_ALIAS, {callback.pk: 2}, {run.pk: 2})
        assert counted == ([(callback.pk, run.pk, "cancel")], [], False)
        assert WorkflowRun.objects.values_list("steps_finished", flat=True).get() == 0
        counted = dialect.count_steps(DEFAULT_DB_ALIAS, {}, {run.pk: 2})
        assert counted == ([], [], True)
    assert WorkflowRun.objects.values_list("steps_finished", "steps_succeeded").get() == (2, 2)


def test_the_tables_the_statement_names_are_the_models() -> None:
    assert WorkflowStep._meta.db_table == postgresql_steps.STEP
    assert WorkflowEdge._meta.db_table == postgresql_steps.EDGE
    assert WorkflowRun._meta.db_table == postgresql_steps.RUN


def test_runs_lock_in_id_order_whatever_the_plan(vendor_dialect: dialects.Dialect) -> None:
    """The runs' rows are locked in id order by the statement's shape: with the planner
    pushed to hash joins and sequential scans, and the first run's row stored after the
    second's, a batch waiting on the second run already holds the first."""
    if connection.vendor != "postgresql":
        pytest.skip("a plan's order of locking is PostgreSQL's (elsewhere one UPDATE per run)")
    first = group(w.square.s(1)).enqueue().pk
    second = group(w.square.s(2)).enqueue().pk
    WorkflowRun.objects.filter(pk=first).update(name="moved")  # its new version comes last
    run_table = WorkflowRun._meta.db_table
    holder = connections.create_connection(DEFAULT_DB_ALIAS)
    errors: list[BaseException] = []
    counting = threading.Thread(
        target=_count_runs, args=(vendor_dialect, {first: 1, second: 1}, errors)
    )
    try:
        with holder.cursor() as other:
            other.execute("BEGIN")
            other.execute(f"SELECT id FROM {run_table} WHERE id = %s FOR UPDATE", [second])
            counting.start()
            wait_for(lambda: _waiting(other) or errors, what="the batch waits on the second run")
            assert not errors
            with pytest.raises(Exception, match="could not obtain lock"):  # held by the batch
                other.execute(
                    f"SELECT id FROM {run_table} WHERE id = %s FOR UPDATE NOWAIT", [first]
                )
            other.execute("ROLLBACK")
    finally:
        counting.join(timeout=60)
        holder.close()
    assert not errors
    counted = WorkflowRun.objects.order_by("pk").values_list("steps_finished", flat=True)
    assert list(counted) == [1, 1]


def _count_runs(
    dialect: dialects.Dialect, runs: dict[int, int], errors: list[BaseException]
) -> None:
    """``count_steps`` on this thread's own connection, with a plan of hash joins and
    sequential scans."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            for setting in ("nestloop", "mergejoin", "indexscan", "bitmapscan"):
                cursor.execute(f"SET LOCAL enable_{setting} = off")
            dialect.count_steps(DEFAULT_DB_ALIAS, {}, runs)
    except BaseException as exc:  # re-raised by the test
        errors.append(exc)
    finally:
        connection.close()


def _waiting(cursor: Any) -> bool:
    """Whether a session of this database waits for a lock."""
    cursor.execute("SELECT pg_stat_clear_snapshot()")  # read afresh inside a transaction
    cursor.execute(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE wait_event_type = 'Lock' AND datname = current_database()"
    )
    return bool(cursor.fetchone()[0])
