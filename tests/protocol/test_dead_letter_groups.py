"""Dead letters grouped by fingerprint: written at burial, counted, replayed and discarded."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.core import fingerprints
from django_leasejobs.models import DeadLetter, Effect, Job, Status
from django_leasejobs.protocol import Failure
from django_leasejobs.runtime import execution

from ..conftest import shifted

pytestmark = pytest.mark.django_db


def killed(job_function, *args, **options) -> DeadLetter:
    """Run ``job_function`` once in-process, as a worker would, until it is dead."""
    job = job_function.enqueue(*args, max_attempts=1, **options)
    Job.objects.filter(pk=job.pk).update(run_at=shifted(-1))
    (claimed,) = protocol.claim("groups-worker", batch=1)
    assert claimed.pk == job.pk
    execution.run(claimed, "groups-worker")
    return DeadLetter.objects.get(job_id=job.pk)


def buried(name: str = "testapp.jobs.add", error: str = "OSError: down", **fields) -> DeadLetter:
    """A dead letter of ``name`` failed with ``error`` (no traceback)."""
    job = jobs.add.enqueue(1, 2, max_attempts=1, **fields)
    Job.objects.filter(pk=job.pk).update(run_at=shifted(-1))
    (claimed,) = protocol.claim("groups-worker", batch=1)
    protocol.fail(claimed.pk, claimed.attempt, Failure(error))
    if name != job.name:
        Job.objects.filter(pk=job.pk).update(name=name)
        DeadLetter.objects.filter(job_id=job.pk).update(name=name)
    return DeadLetter.objects.get(job_id=job.pk)


class TestBurial:
    def test_one_bug_one_fingerprint_whatever_the_attempt_said(self) -> None:
        first, second = killed(jobs.always_fails), killed(jobs.always_fails)
        messages = {letter.errors[-1]["error"] for letter in (first, second)}
        assert messages == {"RuntimeError: boom on attempt 1"}  # each its own job, attempt 1
        assert len(first.fingerprint) == fingerprints.LENGTH
        assert first.fingerprint == second.fingerprint
        signature = fingerprints.of_errors(first.errors)
        assert signature.digest == first.fingerprint
        assert signature.label == "RuntimeError in testapp.jobs.always_fails"

    def test_another_class_or_function_is_another_fingerprint(self) -> None:
        keys = {
            killed(jobs.always_fails).fingerprint,
            killed(jobs.permanent).fingerprint,
            killed(jobs.missing_key).fingerprint,
        }
        assert len(keys) == 3

    def test_a_lease_that_expired_is_keyed_by_its_kind(self, expire_lease) -> None:
        job = jobs.noop.enqueue(max_attempts=1)
        Job.objects.filter(pk=job.pk).update(run_at=shifted(-1))
        protocol.claim("gone-worker", batch=1)
        expire_lease(job)
        protocol.recover_expired()
        letter = DeadLetter.objects.get(job_id=job.pk)
        assert letter.fingerprint == fingerprints.of_error("", "", "lease expired").digest


class TestGroups:
    def test_counts_names_and_first_and_last_seen(self) -> None:
        a1, a2 = buried(error="OSError: a"), buried(error="OSError: b")
        a3 = buried(name="testapp.jobs.noop", error="OSError: c")
        other = buried(error="KeyError: 'x'")
        DeadLetter.objects.filter(pk=a1.pk).update(created_at=shifted(-7200))
        DeadLetter.objects.filter(pk=a3.pk).update(created_at=shifted(-60))
        DeadLetter.objects.filter(pk=other.pk).update(created_at=shifted(-3600))
        protocol.replay(a2.pk)
        found = {g.fingerprint: g for g in protocol.groups()}
        assert set(found) == {a1.fingerprint, other.fingerprint}
        group = found[a1.fingerprint]
        assert (group.count, group.not_replayed) == (3, 2)
        assert group.names == (("testapp.jobs.add", 2), ("testapp.jobs.noop", 1))
        rows = {r.pk: r.created_at for r in DeadLetter.objects.filter(pk__in=[a1.pk, a2.pk])}
        assert group.first_seen == rows[a1.pk]
        assert group.last_seen == rows[a2.pk]
        assert group.latest_id == a3.pk
        assert [g.fingerprint for g in protocol.groups()] == [a1.fingerprint, other.fingerprint]
        assert protocol.groups(other.fingerprint) == [found[other.fingerprint]]
        assert protocol.latest_errors([group]) == {
            a1.fingerprint: ("OSError (error)", "OSError: c")
        }

    def test_no_dead_letters_no_groups(self) -> None:
        assert protocol.groups() == []


class TestReplayGroup:
    def test_replays_each_letter_and_reports_the_refused_one(self) -> None:
        ok1, ok2 = buried(), buried()
        gone = buried(name="testapp.jobs.removed_since")
        held = buried(dedupe_key="daily-report")
        holder = jobs.add.enqueue(5, 5, dedupe_key="daily-report")
        result = protocol.replay_group(ok1.fingerprint, batch=2)
        assert [letter for letter, _ in result.replayed] == [ok1.pk, ok2.pk]
        refused = dict(result.refused)
        assert set(refused) == {gone.pk, held.pk}
        assert "testapp.jobs.removed_since" in refused[gone.pk]
        assert f"Job {holder.pk} already holds dedupe key" in refused[held.pk]
        for letter_id, job_id in result.replayed:
            letter = DeadLetter.objects.get(pk=letter_id)
            assert letter.replayed_job_id == job_id
            assert Job.objects.get(pk=job_id).status == Status.PENDING
        assert DeadLetter.objects.get(pk=gone.pk).replayed_job_id is None
        again = protocol.replay_group(ok1.fingerprint)
        assert again.replayed == []
        assert {letter for letter, _ in again.refused} == {gone.pk, held.pk}

    def test_stops_at_the_last_letter_shown(self) -> None:
        shown, later = buried(), buried()
        result = protocol.replay_group(shown.fingerprint, through_id=shown.pk)
        assert [letter for letter, _ in result.replayed] == [shown.pk]
        assert DeadLetter.objects.get(pk=later.pk).replayed_job_id is None

    def test_each_batch_is_reported(self) -> None:
        letters = [buried() for _ in range(5)]
        heard: list[list[tuple[int, int]]] = []
        protocol.replay_group(letters[0].fingerprint, batch=2, on_batch=heard.append)
        assert [[pair[0] for pair in batch] for batch in heard] == [
            [letters[0].pk, letters[1].pk],
            [letters[2].pk, letters[3].pk],
            [letters[4].pk],
        ]

    @pytest.mark.skipif(
        connection.vendor != "postgresql", reason="client_encoding is a PostgreSQL session's"
    )
    def test_a_session_not_in_utf8_refuses_every_letter(self) -> None:
        letter = buried()
        with connection.cursor() as cursor:
            cursor.execute("SET client_encoding TO 'SJIS'")
        try:
            result = protocol.replay_group(letter.fingerprint)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SET client_encoding TO 'UTF8'")
        assert result.replayed == []
        assert [pk for pk, _ in result.refused] == [letter.pk]
        assert "client_encoding" in result.refused[0][1]

    @pytest.mark.parametrize("bad", ["", "XYZ", "0123456789abcdeF", "0" * 15, None, 12])
    def test_a_fingerprint_that_is_not_one_is_refused(self, bad) -> None:
        with pytest.raises(ValueError, match="16 hex digits"):
            protocol.replay_group(bad)
        with pytest.raises(ValueError, match="16 hex digits"):
            protocol.discard_group(bad)

    @pytest.mark.parametrize("bad", [0, -1, True, "10"])
    def test_a_batch_that_is_not_one_is_refused(self, bad) -> None:
        with pytest.raises(ValueError, match="batch must be a positive integer"):
            protocol.replay_group("0" * 16, batch=bad)


class TestDiscardGroup:
    def test_deletes_letters_with_their_dead_jobs_and_keeps_effects(self) -> None:
        first, second = buried(), buried()
        other = buried(error="KeyError: 'x'")
        Effect.objects.create(key="sent-mail-1", job_id=first.job_id)
        heard: list[list[int]] = []
        result = protocol.discard_group(
            first.fingerprint, batch=1, on_batch=lambda rows: heard.append([r.pk for r in rows])
        )
        assert (result.discarded, result.kept) == (2, [])
        assert heard == [[first.pk], [second.pk]]
        assert not DeadLetter.objects.filter(pk__in=[first.pk, second.pk]).exists()
        assert not Job.objects.filter(pk__in=[first.job_id, second.job_id]).exists()
        assert Effect.objects.get(key="sent-mail-1").job_id is None
        assert DeadLetter.objects.filter(pk=other.pk).exists()

    def test_stops_at_the_last_letter_shown(self) -> None:
        shown, later = buried(), buried()
        result = protocol.discard_group(shown.fingerprint, through_id=shown.pk)
        assert result.discarded == 1
        assert list(DeadLetter.objects.values_list("pk", flat=True)) == [later.pk]

    def test_keeps_a_replays_letter_while_the_replayed_letter_stays(self) -> None:
        """Deleting the replay's job would clear the first letter's link: replayable twice."""
        first = buried(error="KeyError: 'x'")
        replayed_as = protocol.replay(first.pk)
        Job.objects.filter(pk=replayed_as.pk).update(run_at=shifted(-1))
        (claimed,) = protocol.claim("groups-worker", batch=1)
        protocol.fail(claimed.pk, claimed.attempt, Failure("OSError: down"), retryable=False)
        second = DeadLetter.objects.get(job_id=replayed_as.pk)
        assert second.fingerprint != first.fingerprint
        result = protocol.discard_group(second.fingerprint)
        assert result.discarded == 0
        assert [pk for pk, _ in result.kept] == [second.pk]
        assert f"the replay of dead letter #{first.pk}" in result.kept[0][1]
        assert DeadLetter.objects.get(pk=first.pk).replayed_job_id == replayed_as.pk

    def test_a_replay_chain_in_one_group_goes_together(self) -> None:
        first = buried()
        replayed_as = protocol.replay(first.pk)
        Job.objects.filter(pk=replayed_as.pk).update(run_at=shifted(-1))
        (claimed,) = protocol.claim("groups-worker", batch=1)
        protocol.fail(claimed.pk, claimed.attempt, Failure("OSError: down"), retryable=False)
        result = protocol.discard_group(first.fingerprint, batch=1)
        assert (result.discarded, result.kept) == (2, [])
        assert not DeadLetter.objects.exists()
        assert list(Job.objects.values_list("status", flat=True)) == []


class TestBackfill:
    def test_fills_empty_fingerprints_in_batches_from_the_stored_text(self) -> None:
        letters = [killed(jobs.always_fails), killed(jobs.permanent)]
        letters += [buried(error=f"OSError: {n}") for n in range(3)]
        expected = {letter.pk: letter.fingerprint for letter in letters}
        DeadLetter.objects.update(fingerprint="")
        after_id, rounds, changed = 0, 0, 0
        while True:
            count, last_id = protocol.fingerprint_letters(after_id=after_id, batch=2)
            if last_id == after_id:
                break
            after_id, rounds, changed = last_id, rounds + 1, changed + count
        assert (rounds, changed) == (3, 5)
        assert dict(DeadLetter.objects.values_list("pk", "fingerprint")) == expected

    def test_everything_recomputes_only_what_differs(self) -> None:
        letter = buried()
        DeadLetter.objects.filter(pk=letter.pk).update(fingerprint="0" * 16)
        assert protocol.fingerprint_letters(batch=10) == (0, 0)  # none empty
        assert protocol.fingerprint_letters(batch=10, everything=True) == (1, letter.pk)
        assert protocol.fingerprint_letters(batch=10, everything=True) == (0, letter.pk)
        assert DeadLetter.objects.get(pk=letter.pk).fingerprint == letter.fingerprint


def test_group_times_are_database_times() -> None:
    letter = buried()
    (group,) = protocol.groups()
    assert group.last_seen == DeadLetter.objects.get(pk=letter.pk).created_at
    assert isinstance(group.last_seen, dt.datetime)
