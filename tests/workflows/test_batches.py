"""A worker's batch of successes moves its workflow steps together: one decrement per child,
one counter UPDATE per run, whatever the batch's size; mixed batches (plain jobs, stale
tokens, a replayed step's old job) complete only what their tokens still own; batches racing
on their own connections release the callback once."""

from __future__ import annotations

import pytest
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext
from testapp import jobs
from testapp import workflow_jobs as w

from django_leasejobs import chain, group, protocol
from django_leasejobs.models import DeadLetter, Job, Status, WorkflowStep
from django_leasejobs.testing.running import drain

from ..conftest import race, shifted
from .helpers import counters, job_of, received, states, step

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_batch_costs_the_same_statements_whatever_its_size() -> None:
    run = group(w.square.s(i) for i in range(30)).then(w.total.s()).enqueue()
    claimed = protocol.claim("w1", batch=30)
    assert len(claimed) == 30
    statements = []
    for part in (claimed[:2], claimed[2:22]):
        with CaptureQueriesContext(connection) as captured:
            outcomes = protocol.complete_many([(j.pk, j.attempt, None) for j in part])
        assert set(outcomes.values()) == {protocol.Outcome.SUCCEEDED}
        statements.append(len(captured.captured_queries))
    # Twenty members cost what two cost: no statement per member.
    assert statements[0] == statements[1]
    assert step(run, "total").pending_parents == 8
    assert counters(run) == ("running", 31, 22, 22, 0, 0)
    rest = claimed[22:]
    protocol.complete_many([(j.pk, j.attempt, j.args[0] ** 2) for j in rest])
    assert states(run)["total"] == "released"
    squares = [i * i for i in range(22, 30)]
    assert job_of(run, "total").args == [[None] * 22 + squares]
    assert counters(run) == ("running", 31, 30, 30, 0, 0)


def test_a_mixed_batch_completes_only_what_its_tokens_own(expire_lease) -> None:
    run = group(w.square.s(i) for i in range(3)).then(w.total.s()).enqueue()
    plain = jobs.noop.enqueue()
    claimed = {j.pk: j for j in protocol.claim("w1", batch=10)}
    assert set(claimed) == {
        *(job_of(run, n).pk for n in ("square", "square-2", "square-3")),
        plain.pk,
    }
    first, second, third = (job_of(run, n) for n in ("square", "square-2", "square-3"))
    # The second member's lease expired and another worker took it: its old token is stale.
    expire_lease(second)
    protocol.recover_expired()
    Job.objects.filter(pk=second.pk).update(run_at=shifted(-1))
    (retaken,) = protocol.claim("w2", batch=1)
    assert (retaken.pk, retaken.attempt) == (second.pk, 2)
    outcomes = protocol.complete_many(
        [
            (first.pk, 1, 10),
            (second.pk, 1, 20),  # stale
            (third.pk, 1, 30),
            (plain.pk, claimed[plain.pk].attempt, None),
        ]
    )
    assert outcomes == {
        first.pk: protocol.Outcome.SUCCEEDED,
        second.pk: protocol.Outcome.STALE,
        third.pk: protocol.Outcome.SUCCEEDED,
        plain.pk: protocol.Outcome.SUCCEEDED,
    }
    assert Job.objects.get(pk=second.pk).status == Status.RUNNING
    assert states(run) == {
        "square": "succeeded",
        "square-2": "released",
        "square-3": "succeeded",
        "total": "waiting",
    }
    assert step(run, "total").pending_parents == 1
    assert protocol.complete_many([(second.pk, 2, 21)])[second.pk] is protocol.Outcome.SUCCEEDED
    assert job_of(run, "total").args == [[10, 21, 30]]


def test_a_mixed_batch_is_written_all_or_nothing() -> None:
    """The connection fails at the workflow write, after the plain jobs' statement: neither
    is kept, so trying the batch again completes every job (none reported stale)."""
    group(w.square.s(i) for i in range(2)).then(w.total.s()).enqueue()
    jobs.noop.enqueue()
    claimed = protocol.claim("w1", batch=10)
    assert len(claimed) == 3
    batch = [(j.pk, j.attempt, None) for j in claimed]
    steps = WorkflowStep._meta.db_table

    def fail_the_steps(execute, sql, params, many, context):
        if steps in sql:
            raise OperationalError("server closed the connection (injected)")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(fail_the_steps), pytest.raises(OperationalError):
        protocol.complete_many(batch)
    assert set(Job.objects.values_list("status", flat=True)) == {Status.RUNNING}
    outcomes = protocol.complete_many(batch)
    assert set(outcomes.values()) == {protocol.Outcome.SUCCEEDED}


def test_a_batch_of_workflow_jobs_is_told_apart_by_the_protocol() -> None:
    """The caller does not say which jobs are a workflow's: the plain jobs' statement, sent
    once, writes nothing for a batch holding one, and the batch is written with its steps; a
    stale token among them is reported stale."""
    run = group(w.square.s(i) for i in range(2)).then(w.total.s()).enqueue()
    first, second = sorted(protocol.claim("w1", batch=2), key=lambda j: j.pk)
    with CaptureQueriesContext(connection) as seen:
        outcomes = protocol.complete_many([(first.pk, 1, None), (second.pk, 2, None)])
    assert outcomes == {first.pk: protocol.Outcome.SUCCEEDED, second.pk: protocol.Outcome.STALE}
    # The plain jobs' write is the one that keeps to rows without a step.
    plain_writes = [
        q["sql"]
        for q in seen.captured_queries
        if 'workflow_step_id" IS NULL' in q["sql"] or "workflow_step_id IS NULL" in q["sql"]
    ]
    assert len(plain_writes) <= 1
    assert states(run)["square"] == "succeeded"
    assert Job.objects.get(pk=second.pk).status == Status.RUNNING


def test_a_replayed_steps_old_job_does_not_move_the_step() -> None:
    run = chain(w.boom.si("b"), w.tick.si("after")).enqueue()
    (dead,) = protocol.claim("w1", batch=1)
    protocol.fail(dead.pk, dead.attempt, protocol.Failure("x"), retryable=False)
    assert states(run) == {"boom": "failed", "tick": "cancelled"}
    new = protocol.replay(DeadLetter.objects.get(job_id=dead.pk).pk)
    assert states(run) == {"boom": "released", "tick": "waiting"}
    # The old job is dead: its token completes nothing, in a batch or alone.
    assert protocol.complete_many([(dead.pk, dead.attempt, None)]) == {
        dead.pk: protocol.Outcome.STALE
    }
    (again,) = protocol.claim("w1", batch=1)
    assert again.pk == new.pk
    assert protocol.complete_many([(again.pk, again.attempt, None)])[again.pk] is (
        protocol.Outcome.SUCCEEDED
    )
    assert states(run) == {"boom": "succeeded", "tick": "released"}
    assert counters(run) == ("running", 2, 1, 1, 0, 0)


def test_a_chain_step_in_a_batch_passes_its_result_on() -> None:
    run = chain(w.square.s(3), w.total.s()).enqueue()
    (first,) = protocol.claim("w1", batch=1)
    protocol.complete_many([(first.pk, first.attempt, 9)])
    assert job_of(run, "total").args == [9]
    assert Job.objects.get(pk=first.pk).result == 9


@pytest.mark.parametrize("batches", [2, 4])
def test_batches_racing_release_the_callback_once(batches: int) -> None:
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has one writer: concurrent batches are serialised by it")
    members = 24
    for _ in range(3):  # several rounds: each one a fresh race
        run = group(w.square.s(i) for i in range(members)).then(w.total.s()).enqueue()
        claimed = sorted(protocol.claim("w1", batch=members), key=lambda j: j.pk)
        assert len(claimed) == members
        # Interleaved, so each batch holds members from the whole range of ids.
        parts = [claimed[i::batches] for i in range(batches)]

        def finish(part: list[Job]):
            return lambda: protocol.complete_many([(j.pk, j.attempt, j.args[0]) for j in part])

        results = race(*(finish(part) for part in parts))
        assert {o for r in results for o in r.values()} == {protocol.Outcome.SUCCEEDED}
        callback = Job.objects.filter(workflow_step__run=run, name=w.total.name)
        assert callback.count() == 1
        assert callback.get().args == [list(range(members))]
        assert counters(run) == ("running", members + 1, members, members, 0, 0)
        Job.objects.filter(status=Status.PENDING).update(status=Status.CANCELLED)


def test_a_group_drained_in_process_finishes_with_every_result() -> None:
    run = group(w.square.s(i) for i in range(30)).then(w.total.s()).enqueue()
    drain()
    assert received("total") == [[i * i for i in range(30)]]
    assert counters(run) == ("succeeded", 31, 31, 31, 0, 0)
