"""A model-based test of the lease protocol: random sequences of every protocol operation.

Hypothesis drives enqueue, claim, heartbeat, complete and fail (with current or stale tokens),
a handler's ``Retry`` and ``Snooze``, lease expiry plus recovery, release, cancel and replay
against the real database, and checks
these invariants after every step (see docs/guarantees.md):

* no two overlapping valid leases: a running row's (id, attempt) was handed out exactly once,
  to its lease owner, and every other token of that job is stale;
* a stale token never changes a row (every refused write leaves every column as it was);
* ``attempt - released <= max_attempts``, and ``snoozes <= released``;
* every finished job is final exactly once (it never leaves its final state, and its
  ``finished_at`` never moves);
* dead jobs have exactly one dead letter, and other jobs none.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from django.db.models import Count
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.errors import InvalidTransitionError
from django_leasejobs.models import CLAIMABLE, FINAL, DeadLetter, Job, Status
from django_leasejobs.protocol import Failure, Outcome

from ..conftest import examples, shifted

WORKERS = ("w1", "w2")
MAX_SNOOZES = 2
Token = tuple[int, int, str]  # job id, attempt, worker


def row(job_id: int) -> dict[str, Any]:
    return Job.objects.filter(pk=job_id).values().get()


def owns(state: dict[str, Any], token: Token) -> bool:
    """Whether ``token`` is the job's current lease, judged from the row before a write."""
    _, attempt, worker = token
    return (
        state["status"] == Status.RUNNING
        and state["attempt"] == attempt
        and state["lease_owner"] == worker
    )


class LifecycleMachine(RuleBasedStateMachine):
    """Every rule calls one protocol function and checks its outcome against the row before."""

    def __init__(self) -> None:
        super().__init__()
        DeadLetter.objects.all().delete()
        Job.objects.all().delete()
        self.tokens: list[Token] = []
        self.finals: dict[int, tuple[str, Any]] = {}
        self.enqueued = 0
        self.dead_seen = False

    # ------------------------------------------------------------------ helpers

    def draw_token(self, data: st.DataObject) -> Token | None:
        """Any token handed out so far, often an old token of a job that is running again."""
        if not self.tokens:
            return None
        running = dict(Job.objects.filter(status=Status.RUNNING).values_list("pk", "attempt"))
        superseded = [t for t in self.tokens if running.get(t[0], t[1]) != t[1]]
        pools = [self.tokens, superseded] if superseded else [self.tokens]
        return data.draw(st.sampled_from(data.draw(st.sampled_from(pools))))

    def refused_unchanged(self, before: dict[str, Any], outcome: Any) -> None:
        assert outcome is Outcome.STALE
        assert row(before["id"]) == before, "a stale token changed a row"

    def fail_outcome(self, state: dict[str, Any], retryable: bool) -> Outcome:
        if state["cancel_requested_at"] is not None:
            return Outcome.CANCELLED  # an operator asked: the attempt's end is the job's end
        charged = state["attempt"] - state["released"]
        spent = not retryable or charged >= state["max_attempts"]
        return Outcome.DEAD if spent else Outcome.RETRIED

    # ------------------------------------------------------------------ rules

    @initialize(max_attempts=st.integers(1, 3))
    def first_job(self, max_attempts: int) -> None:
        self.enqueue(max_attempts, None)

    @rule(max_attempts=st.integers(1, 3), dedupe_key=st.sampled_from([None, None, "k"]))
    def enqueue(self, max_attempts: int, dedupe_key: str | None) -> None:
        self.enqueued += 1
        holder = Job.objects.filter(live_dedupe_key=dedupe_key).first() if dedupe_key else None
        job = jobs.noop.enqueue(max_attempts=max_attempts, dedupe_key=dedupe_key)
        if holder is not None:
            assert job.pk == holder.pk
        else:
            assert (job.status, job.attempt) == (Status.PENDING, 0)

    @rule(worker=st.sampled_from(WORKERS), batch=st.integers(1, 3))
    def claim(self, worker: str, batch: int) -> None:
        # Time passes: every retry's backoff is over (run_at checks have their own tests), so
        # jobs go round quickly and old tokens meet newer attempts of the same job.
        Job.objects.filter(status__in=CLAIMABLE).update(run_at=shifted(-1))
        claimed = protocol.claim(worker, batch=batch)
        assert len(claimed) <= batch
        handed_out = {(job_id, attempt) for job_id, attempt, _ in self.tokens}
        for job in claimed:
            assert (job.pk, job.attempt) not in handed_out, "one token handed out twice"
            assert (job.status, job.lease_owner) == (Status.RUNNING, worker)
            self.tokens.append((job.pk, job.attempt, worker))

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        token = self.draw_token(data)
        if token is None:
            return
        before = row(token[0])
        outcome = protocol.complete(token[0], token[1], result=token[1])
        if owns(before, token):
            assert outcome is Outcome.SUCCEEDED
            assert row(token[0])["status"] == Status.SUCCEEDED
        else:
            self.refused_unchanged(before, outcome)

    @precondition(lambda self: self.tokens)
    @rule(data=st.data(), retryable=st.booleans())
    def fail(self, data: st.DataObject, retryable: bool) -> None:
        token = self.draw_token(data)
        if token is None:
            return
        before = row(token[0])
        outcome = protocol.fail(token[0], token[1], Failure("boom"), retryable=retryable)
        if owns(before, token):
            assert outcome is self.fail_outcome(before, retryable)
        else:
            self.refused_unchanged(before, outcome)

    @precondition(lambda self: self.tokens)
    @rule(data=st.data(), when=st.sampled_from([0.0, 30.0]))
    def retry(self, data: st.DataObject, when: float) -> None:
        """The handler raised ``Retry(after=when)``: charged like any failure."""
        token = self.draw_token(data)
        if token is None:
            return
        before = row(token[0])
        asked = Failure("Retry: asked", kind="retry requested")
        outcome = protocol.fail(token[0], token[1], asked, when=when)
        if owns(before, token):
            assert outcome is self.fail_outcome(before, retryable=True)
        else:
            self.refused_unchanged(before, outcome)

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def snooze(self, data: st.DataObject) -> None:
        """The handler raised ``Snooze``: uncharged, up to the cap, unless cancel was asked."""
        token = self.draw_token(data)
        if token is None:
            return
        before = row(token[0])
        outcome = protocol.snooze(token[0], token[1], 0.0, max_snoozes=MAX_SNOOZES)
        after = row(token[0])
        if not owns(before, token):
            self.refused_unchanged(before, outcome)
        elif before["cancel_requested_at"] is not None:
            assert (outcome, after["status"]) == (Outcome.CANCELLED, Status.CANCELLED)
        elif before["snoozes"] >= MAX_SNOOZES:
            assert (outcome, after["status"]) == (Outcome.DEAD, Status.DEAD)
            assert DeadLetter.objects.get(job_id=token[0]).reason == "snoozed too often"
        else:
            assert outcome is Outcome.SNOOZED
            assert (after["status"], after["attempt"]) == (Status.PENDING, before["attempt"])
            assert (after["released"], after["snoozes"]) == (
                before["released"] + 1,
                before["snoozes"] + 1,
            )
        if outcome is not Outcome.SNOOZED:
            assert after["snoozes"] == before["snoozes"]

    @precondition(lambda self: self.tokens)
    @rule(data=st.data(), worker=st.sampled_from((None, *WORKERS)))
    def heartbeat(self, data: st.DataObject, worker: str | None) -> None:
        """A worker (the token's own, or any) renews a token and maybe more of its own."""
        token = self.draw_token(data)
        assert token is not None
        worker = worker or token[2]
        own = [t for t in self.tokens if t[2] == worker]
        extra = data.draw(st.lists(st.sampled_from(own), max_size=2)) if own else []
        sent = list(dict.fromkeys([(token[0], token[1]), *((t[0], t[1]) for t in extra)]))
        before = {job_id: row(job_id) for job_id, _ in sent}
        lost = protocol.heartbeat(worker, sent)
        # The result is per job: a job is kept when any of the tokens sent for it is current.
        for job_id, state in before.items():
            current = any(owns(state, (j, a, worker)) for j, a in sent if j == job_id)
            assert (job_id in lost) is not current
            if not current:
                assert row(job_id) == state, "a stale heartbeat changed a row"

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        token = self.draw_token(data)
        if token is None:
            return
        before = row(token[0])
        outcome = protocol.release(token[0], token[1])
        if owns(before, token) and before["cancel_requested_at"] is not None:
            assert outcome is Outcome.CANCELLED
            assert row(token[0])["released"] == before["released"]
        elif owns(before, token):
            assert outcome is Outcome.RELEASED
            after = row(token[0])
            assert (after["status"], after["released"]) == (Status.PENDING, before["released"] + 1)
        else:
            self.refused_unchanged(before, outcome)

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def expire_and_recover(self, data: st.DataObject) -> None:
        running = list(Job.objects.filter(status=Status.RUNNING).values_list("pk", flat=True))
        if not running:
            return
        job_id = data.draw(st.sampled_from(sorted(running)))
        Job.objects.filter(pk=job_id).update(lease_expires_at=shifted(-1))
        before = row(job_id)
        outcomes = protocol.recover_expired()
        assert outcomes[job_id] is self.fail_outcome(before, retryable=True)
        after = row(job_id)
        assert after["attempt"] == before["attempt"], "a reclaim must not move the token"
        assert after["errors"][-1]["kind"] == "lease expired"

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def cancel_attempt(self, data: st.DataObject) -> None:
        """The worker ends an attempt an operator asked to cancel (or, refused, any other)."""
        token = self.draw_token(data)
        if token is None:
            return
        before = row(token[0])
        outcome = protocol.cancel_attempt(token[0], token[1])
        if owns(before, token) and before["cancel_requested_at"] is not None:
            assert outcome is Outcome.CANCELLED
            assert row(token[0])["status"] == Status.CANCELLED
        else:
            self.refused_unchanged(before, outcome)

    @precondition(lambda self: self.enqueued)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        ids = list(Job.objects.values_list("pk", flat=True))
        if not ids:
            return
        job_id = data.draw(st.sampled_from(sorted(ids)))
        before = row(job_id)
        asked = protocol.request_cancel(job_id)
        after = row(job_id)
        if before["status"] in CLAIMABLE:
            assert asked is protocol.Cancel.CANCELLED
            assert after["status"] == Status.CANCELLED
        elif before["status"] == Status.RUNNING:
            assert asked is protocol.Cancel.REQUESTED
            assert after["cancel_requested_at"] is not None
            requested_at = before["cancel_requested_at"] or after["cancel_requested_at"]
            assert after == {**before, "cancel_requested_at": requested_at}
        else:
            assert asked is protocol.Cancel.REFUSED
            assert after == before

    @precondition(lambda self: self.dead_seen)
    @rule(data=st.data())
    def replay(self, data: st.DataObject) -> None:
        letters = list(DeadLetter.objects.values_list("pk", "replayed_job_id"))
        if not letters:
            return
        letter_id, replayed = data.draw(st.sampled_from(sorted(letters)))
        try:
            new = protocol.replay(letter_id)
        except InvalidTransitionError:
            # Only when a live job holds the dead job's dedupe key.
            key = DeadLetter.objects.get(pk=letter_id).job.dedupe_key
            assert replayed is None
            assert key is not None
            assert Job.objects.filter(live_dedupe_key=key).exists()
            return
        if replayed is not None:
            assert new.pk == replayed, "a second replay created another job"
        else:
            assert (new.status, new.attempt, new.released) == (Status.PENDING, 0, 0)
        assert protocol.replay(letter_id).pk == new.pk

    # ------------------------------------------------------------------ invariants

    @invariant()
    def spec_invariants(self) -> None:
        letters = Counter(DeadLetter.objects.values_list("job_id", flat=True))
        tokens = Counter((job_id, attempt) for job_id, attempt, _ in self.tokens)
        owners = {(job_id, attempt): worker for job_id, attempt, worker in self.tokens}
        for state in Job.objects.values():
            job_id, status = state["id"], state["status"]
            assert state["attempt"] - state["released"] <= state["max_attempts"]
            assert state["snoozes"] <= min(state["released"], MAX_SNOOZES)
            running = status == Status.RUNNING
            assert running == (state["lease_expires_at"] is not None) == bool(state["lease_owner"])
            if running:
                current = (job_id, state["attempt"])
                assert tokens[current] == 1, "a running job's lease was handed out twice"
                assert owners[current] == state["lease_owner"]
            final = status in FINAL
            assert final == (state["finished_at"] is not None)
            if job_id in self.finals:
                assert (status, state["finished_at"]) == self.finals[job_id], "left a final state"
            elif final:
                self.finals[job_id] = (status, state["finished_at"])
            assert letters[job_id] == (1 if status == Status.DEAD else 0)
            self.dead_seen = self.dead_seen or status == Status.DEAD
            expected_key = None if final else state["dedupe_key"]
            assert state["live_dedupe_key"] == expected_key
        live_keys = (
            Job.objects.exclude(live_dedupe_key=None)
            .values("live_dedupe_key")
            .annotate(n=Count("id"))
            .filter(n__gt=1)
        )
        assert not live_keys.exists()


@pytest.mark.fuzz
@pytest.mark.django_db(transaction=True)
def test_lifecycle_state_machine() -> None:
    run_state_machine_as_test(
        LifecycleMachine,
        settings=settings(
            max_examples=examples(60),
            stateful_step_count=25,
            # No shrinking: on a real database it takes minutes; the failing steps are printed.
            phases=(Phase.explicit, Phase.reuse, Phase.generate),
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
