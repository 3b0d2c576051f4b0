"""Workflows run: results passed along, policies applied, runs finishing, cancel, replay,
steps added by a running step, pruning kept off an unfinished run's jobs."""

from __future__ import annotations

import datetime as dt

import pytest
from testapp import workflow_jobs as w
from testapp.models import Hit

from django_leasejobs import Workflow, chain, group, protocol, upkeep, workflows
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.testing.running import drain

from ..conftest import shifted
from .helpers import counters, hits, job_of, received, states, step

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_chain_passes_each_result_to_the_next_step() -> None:
    run = chain(w.fetch.s("u"), w.parse.s(), w.store.s(where="x")).enqueue()
    drain()
    assert received("parse") == ["page of u"]
    assert received("store") == [9, "x"]
    assert counters(run) == ("succeeded", 3, 3, 3, 0, 0)
    assert job_of(run, "store").result == "9 stored in x"


def test_si_ignores_the_previous_result() -> None:
    run = chain(w.fetch.s("u"), w.tick.si("t")).enqueue()
    drain()
    assert hits("t") == ["t"]
    assert counters(run)[0] == "succeeded"


def test_a_group_callback_gets_the_results_in_member_order_whatever_order_they_end() -> None:
    run = group(w.square.s(i) for i in (1, 2, 3)).then(w.total.s()).enqueue()
    claimed = protocol.claim("w1", batch=10)
    assert len(claimed) == 3
    for job in sorted(claimed, key=lambda j: -j.pk):  # the last member ends first
        n = job.args[0]
        assert protocol.complete(job.pk, job.attempt, n * n) is protocol.Outcome.SUCCEEDED
    assert states(run)["total"] == "released"
    drain()
    assert received("total") == [[1, 4, 9]]
    assert counters(run) == ("succeeded", 4, 4, 4, 0, 0)


def test_parent_results_are_keyed_by_step_name() -> None:
    wf = Workflow()
    a = wf.add(w.fetch.s("a"), name="first")
    b = wf.add(w.square.s(4))
    wf.add(w.report.s(), after=[a, b])
    run = wf.enqueue()
    drain()
    assert received("report") == [{"first": "page of a", "square": 16}, [["page of a", 16]]]
    assert counters(run)[0] == "succeeded"


def test_the_grouped_completion_completes_workflow_jobs_with_their_step() -> None:
    run = group(w.square.s(i) for i in range(5)).then(w.total.s()).enqueue()
    claimed = protocol.claim("w1", batch=10)
    assert len(claimed) == 5
    outcomes = protocol.complete_many([(j.pk, j.attempt, j.args[0] ** 2) for j in claimed])
    assert set(outcomes.values()) == {protocol.Outcome.SUCCEEDED}
    assert Job.objects.filter(name=w.total.name).count() == 1
    drain()
    assert received("total") == [[0, 1, 4, 9, 16]]
    assert counters(run) == ("succeeded", 6, 6, 6, 0, 0)


def test_cancel_policy_propagates_to_every_descendant() -> None:
    wf = Workflow()
    a = wf.add(w.boom.s())
    b = wf.add(w.tick.si("b"), after=[a])
    c = wf.add(w.tick.si("c"), after=[b])
    wf.add(w.tick.si("d"), after=[c, wf.add(w.tick.si("side"))])
    run = wf.enqueue()
    drain()
    assert states(run) == {
        "boom": "failed",
        "tick": "cancelled",
        "tick-2": "cancelled",
        "tick-3": "succeeded",
        "tick-4": "cancelled",
    }
    assert sorted(hits()) == ["boom", "side"]
    assert counters(run) == ("failed", 5, 5, 1, 1, 3)
    assert Job.objects.count() == 2  # nothing was made for the cancelled steps


def test_run_policy_runs_the_step_anyway() -> None:
    wf = Workflow()
    a = wf.add(w.boom.s())
    wf.add(w.cleanup.si("cleaned"), after=[a], on_parent_failure="run")
    run = wf.enqueue()
    drain()
    assert hits("cleaned") == ["cleaned"]
    assert counters(run) == ("failed", 2, 2, 1, 1, 0)


def test_hold_policy_waits_for_an_operator() -> None:
    wf = Workflow()
    a = wf.add(w.boom.s())
    held = wf.add(w.tick.si("held"), after=[a], on_parent_failure="hold")
    wf.add(w.tick.si("after"), after=[held])
    run = wf.enqueue()
    drain()
    assert states(run) == {"boom": "failed", "tick": "held", "tick-2": "waiting"}
    assert counters(run) == ("running", 3, 1, 0, 1, 0)
    assert workflows.release(held.id)
    assert not workflows.release(held.id)  # not held any more
    drain()
    assert hits("held") == ["held"]
    assert hits("after") == ["after"]
    assert counters(run) == ("failed", 3, 3, 2, 1, 0)


def test_on_failure_runs_once_and_the_callback_is_cancelled() -> None:
    members = [w.boom.s("m1"), w.square.s(2), w.boom.s("m3")]
    run = group(members).then(w.total.s()).on_failure(w.cleanup.si("oops")).enqueue()
    drain()
    assert hits("oops") == ["oops"]
    assert not hits("total")
    assert states(run)["total"] == "cancelled"
    assert counters(run)[0] == "failed"


def test_on_failure_is_skipped_when_every_member_succeeds() -> None:
    run = group(w.square.s(1), w.square.s(2)).then(w.total.s()).on_failure(w.cleanup.si()).enqueue()
    drain()
    assert not hits("cleanup")
    assert states(run)["cleanup"] == "skipped"
    assert counters(run) == ("succeeded", 4, 4, 3, 0, 0)


def test_cancel_cancels_waiting_steps_and_requests_running_ones() -> None:
    run = chain(w.fetch.s("u"), w.parse.s(), w.store.s()).enqueue()
    (running,) = protocol.claim("w1")
    assert workflows.cancel(run.pk)
    assert states(run) == {"fetch": "released", "parse": "cancelled", "store": "cancelled"}
    assert Job.objects.get(pk=running.pk).cancel_requested_at is not None
    assert counters(run)[0] == "running"  # its running step has not ended yet
    # The worker learns of the request and ends the attempt.
    assert protocol.cancel_attempt(running.pk, running.attempt) is protocol.Outcome.CANCELLED
    assert counters(run) == ("cancelled", 3, 3, 0, 0, 3)
    assert not workflows.cancel(run.pk)  # finished


def test_cancel_of_a_run_not_started_ends_it_at_once() -> None:
    run = group(w.square.s(1), w.square.s(2)).then(w.total.s()).enqueue()
    assert workflows.cancel(run)
    assert counters(run) == ("cancelled", 3, 3, 0, 0, 3)
    assert set(Job.objects.values_list("status", flat=True)) == {Status.CANCELLED}
    assert drain().total == 0


def test_replaying_a_dead_step_rearms_its_dependants() -> None:
    wf = Workflow()
    a = wf.add(w.fails_until_allowed.s("flaky"))
    b = wf.add(w.store.s(), after=[a])
    wf.add(w.tick.si("last"), after=[b])
    run = wf.enqueue()
    drain()
    assert counters(run) == ("failed", 3, 3, 0, 1, 2)
    Hit.objects.create(label="allow:flaky")
    letter = DeadLetter.objects.get(job=job_of(run, "fails_until_allowed"))
    new = protocol.replay(letter.pk)
    assert new.workflow_step_id == a.id
    assert states(run) == {"fails_until_allowed": "released", "store": "waiting", "tick": "waiting"}
    assert counters(run) == ("running", 3, 0, 0, 0, 0)
    drain()
    assert received("store") == ["flaky", "db"]
    assert hits("last") == ["last"]
    assert counters(run) == ("succeeded", 3, 3, 3, 0, 0)


def test_a_stale_token_finishing_writes_nothing_and_releases_nothing(expire_lease) -> None:
    run = chain(w.fetch.s("u"), w.parse.s()).enqueue()
    (first,) = protocol.claim("w1")
    expire_lease(first)
    protocol.recover_expired()
    Job.objects.filter(pk=first.pk).update(run_at=shifted(-1))
    (second,) = protocol.claim("w2")
    assert second.attempt == first.attempt + 1
    assert protocol.complete(first.pk, first.attempt, "stale") is protocol.Outcome.STALE
    assert protocol.complete_many([(first.pk, first.attempt)]) == {first.pk: protocol.Outcome.STALE}
    assert states(run) == {"fetch": "released", "parse": "waiting"}
    assert Job.objects.count() == 1
    assert protocol.complete(second.pk, second.attempt, "fresh") is protocol.Outcome.SUCCEEDED
    assert states(run)["parse"] == "released"
    assert Job.objects.get(workflow_step_id=step(run, "parse").pk).args == ["fresh"]


def test_a_running_step_adds_steps_to_its_own_run() -> None:
    run = chain(w.spawner.s(3)).enqueue()
    drain()
    assert received("square") == [4]
    assert states(run) == {"spawner": "succeeded", "square": "succeeded"}
    assert counters(run) == ("succeeded", 2, 2, 2, 0, 0)


def test_pruning_keeps_the_jobs_of_a_run_that_has_not_finished() -> None:
    run = chain(w.fetch.s("u"), w.parse.s()).enqueue()
    alone = w.tick.enqueue("alone")
    (first,) = protocol.claim("w1", batch=1)
    if first.pk == alone.pk:
        protocol.complete(first.pk, first.attempt)
        (first,) = protocol.claim("w1", batch=1)
    else:
        (other,) = protocol.claim("w1", batch=1)
        protocol.complete(other.pk, other.attempt)
    protocol.complete(first.pk, first.attempt, "page")
    Job.objects.update(finished_at=shifted(-3600))
    assert upkeep.count_prunable("succeeded", dt.timedelta(minutes=1)) == 1
    assert upkeep.prune_finished("succeeded", dt.timedelta(minutes=1))[0] == 1
    assert Job.objects.filter(pk=first.pk).exists()  # its run still waits on parse
    drain()
    assert counters(run)[0] == "succeeded"
    Job.objects.update(finished_at=shifted(-3600))
    assert upkeep.prune_finished("succeeded", dt.timedelta(minutes=1))[0] == 2


def test_eager_mode_runs_the_whole_workflow_at_commit(settings) -> None:
    settings.LEASEJOBS_EAGER = True
    run = chain(w.fetch.s("u"), w.parse.s()).enqueue()
    assert received("parse") == ["page of u"]
    assert counters(run)[0] == "succeeded"
