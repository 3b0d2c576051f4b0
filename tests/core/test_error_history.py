"""The error history stays bounded: the first and last attempts, a count of the others, and
each text cut to its bound with a marker, on every write that appends to it."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from testapp import jobs

from django_leasejobs import job, protocol
from django_leasejobs.core import error_history, fingerprints, registry
from django_leasejobs.core.backoff import Backoff
from django_leasejobs.core.error_history import ERROR_BYTES, TRACEBACK_BYTES, stored
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Failure, Outcome
from django_leasejobs.runtime import attempt_ends, execution

NO_WAIT = Backoff(base=0, cap=0, jitter="none")
MARKER = re.compile(r" \[\.\.\. (\d+) bytes cut \.\.\.\] |\n  \[\.\.\. (\d+) bytes cut \.\.\.\]\n")
"""A cut inside a line, or a line of its own where whole lines were cut."""


def size(text: str) -> int:
    return len(text.encode())


def assert_cut_from(original: str, clipped: str, limit: int) -> list[str]:
    """``clipped`` fits, uses most of its room, keeps both ends of ``original``, and its markers
    count exactly the bytes they replace. Returns the kept pieces."""
    assert size(original) > limit
    assert limit * 0.9 < size(clipped) <= limit
    markers = list(MARKER.finditer(clipped))
    assert markers
    replaced = sum(int(m.group(1) or m.group(2)) for m in markers)
    assert size(clipped) - sum(size(m.group()) for m in markers) + replaced == size(original)
    kept = MARKER.split(clipped)[::3]
    assert original.startswith(kept[0])
    assert original.endswith(kept[-1])
    return kept


class TestStored:
    def test_a_text_within_the_bound_is_kept_whole(self) -> None:
        text = "é" * (ERROR_BYTES // 2)
        assert size(text) == ERROR_BYTES
        assert stored(text, ERROR_BYTES) is text

    @pytest.mark.parametrize(
        "text",
        [
            "ValueError: " + "x" * 100 * 1024,
            "ValueError: " + "é€😀" * 20_000,  # 2-, 3- and 4-byte characters: never split
            "\n".join(f"  line {n} " + "y" * 50 for n in range(3000)),
        ],
        ids=["one-line", "multibyte", "many-lines"],
    )
    def test_a_longer_text_keeps_its_ends_around_a_marker(self, text: str) -> None:
        assert_cut_from(text, stored(text, ERROR_BYTES), ERROR_BYTES)

    def test_whole_lines_are_cut_from_the_middle_of_many(self) -> None:
        text = "\n".join(f"  line {n} " + "y" * 50 for n in range(3000))
        kept = assert_cut_from(text, stored(text, TRACEBACK_BYTES), TRACEBACK_BYTES)
        assert len(kept) == 2
        lines = set(text.split("\n"))
        assert set(kept[0].split("\n")) <= lines
        assert set(kept[1].split("\n")) <= lines

    def test_a_huge_line_is_cut_alone_and_the_lines_above_are_kept(self) -> None:
        above = "Traceback (most recent call last):\n  frame\n"
        text = above + "ValueError: " + "v" * 100 * 1024
        clipped = stored(text, TRACEBACK_BYTES)
        assert clipped.startswith(above + "ValueError: vvv")
        (marker,) = MARKER.finditer(clipped)
        assert marker.group(1) is not None  # inside the line
        assert size(clipped) - size(marker.group()) + int(marker.group(1)) == size(text)
        assert size(clipped) <= size(above) + TRACEBACK_BYTES // 4


class TestAppended:
    @staticmethod
    def entry(attempt: int) -> dict[str, object]:
        return {"attempt": attempt, "error": f"E{attempt}"}

    def test_the_first_three_the_last_twenty_and_a_count_between(self) -> None:
        history: list[object] = []
        for attempt in range(1, 31):
            history = error_history.appended(history, self.entry(attempt))
        numbers = [1, 2, 3, *range(11, 31)]
        assert history == [
            *map(self.entry, numbers[:3]),
            {"dropped": 7},
            *map(self.entry, numbers[3:]),
        ]
        assert [e["attempt"] for e in error_history.attempts(history)] == numbers
        assert error_history.dropped(history) == 7

    def test_no_count_until_something_is_dropped(self) -> None:
        history: list[object] = []
        for attempt in range(1, 24):
            history = error_history.appended(history, self.entry(attempt))
        assert history == [self.entry(n) for n in range(1, 24)]


def fail_times(
    job_id: int, times: int, failure: Callable[[int], Failure] = lambda n: Failure(f"E: {n}")
) -> list[Outcome]:
    """Claim and fail the job ``times`` times; its next try is due at once."""
    outcomes = []
    for _ in range(times):
        claimed = protocol.claim("w1", batch=1)
        assert [c.pk for c in claimed] == [job_id]
        attempt = claimed[0].attempt
        outcomes.append(protocol.fail(job_id, attempt, failure(attempt), backoff=NO_WAIT))
    return outcomes


def attempt_numbers(history: list[dict[str, object]]) -> list[object]:
    return [e.get("attempt", e) for e in history]


@pytest.mark.django_db
class TestEveryWrite:
    def test_thirty_failures_keep_twenty_three_entries_and_count_seven(self) -> None:
        job_id = jobs.noop.enqueue(max_attempts=30).pk
        outcomes = fail_times(job_id, 30)
        assert outcomes == [Outcome.RETRIED] * 29 + [Outcome.DEAD]
        row = Job.objects.get(pk=job_id)
        expected = [1, 2, 3, {"dropped": 7}, *range(11, 31)]
        assert attempt_numbers(row.errors) == expected
        assert len(error_history.attempts(row.errors)) == 23
        assert [e["error"] for e in error_history.attempts(row.errors)] == [
            f"E: {n}" for n in (1, 2, 3, *range(11, 31))
        ]
        assert row.last_error == "E: 30"
        assert DeadLetter.objects.get(job_id=job_id).errors == row.errors

    @pytest.fixture
    def at_the_bound(self) -> Callable[..., Job]:
        """A running job whose history is already full: 28 failed attempts, 5 of them dropped."""

        def make(name: str = "testapp.jobs.noop") -> Job:
            full = error_history.appended([], {"attempt": 1, "error": "E: 1"})
            for attempt in range(2, 29):
                full = error_history.appended(full, {"attempt": attempt, "error": f"E: {attempt}"})
            row = Job.objects.create(name=name, max_attempts=100, attempt=28, errors=full)
            claimed = protocol.claim("w1", batch=1)
            assert [(c.pk, c.attempt) for c in claimed] == [(row.pk, 29)]
            return claimed[0]

        return make

    def assert_bounded(self, job_id: int, status: str) -> None:
        row = Job.objects.get(pk=job_id)
        assert row.status == status
        assert attempt_numbers(row.errors) == [1, 2, 3, {"dropped": 6}, *range(10, 30)]

    def test_a_retry(self, at_the_bound) -> None:
        running = at_the_bound()
        assert protocol.fail(running.pk, 29, Failure("E: 29")) is Outcome.RETRIED
        self.assert_bounded(running.pk, Status.FAILED)

    def test_an_expired_lease(self, at_the_bound, expire_lease) -> None:
        running = at_the_bound()
        expire_lease(running)
        assert protocol.recover_expired() == {running.pk: Outcome.RETRIED}
        self.assert_bounded(running.pk, Status.FAILED)

    def test_a_timeout(self, at_the_bound) -> None:
        running = at_the_bound()
        assert attempt_ends.end_attempt(running, "timeout", timeout=1) is Outcome.RETRIED
        self.assert_bounded(running.pk, Status.FAILED)

    def test_an_unregistered_job_is_dead_with_a_bounded_letter(
        self, at_the_bound, settings
    ) -> None:
        settings.LEASEJOBS_UNKNOWN_JOB_GRACE = "0s"  # dead at its first claim
        running = at_the_bound("nowhere.registered")
        assert execution.run(running, "w1") is Outcome.DEAD
        self.assert_bounded(running.pk, Status.DEAD)
        letter = DeadLetter.objects.get(job_id=running.pk)
        assert letter.errors == Job.objects.get(pk=running.pk).errors

    def test_an_attempt_that_ends_cancelled(self, at_the_bound) -> None:
        running = at_the_bound()
        protocol.request_cancel(running.pk)
        assert protocol.fail(running.pk, 29, Failure("E: 29")) is Outcome.CANCELLED
        self.assert_bounded(running.pk, Status.CANCELLED)


def explode() -> None:
    raise RuntimeError("x" * 100 * 1024)


@pytest.mark.django_db
class TestTextBounds:
    def test_a_100_kib_error_and_traceback_are_cut_to_their_bounds(self) -> None:
        error = "ValueError: " + "e" * 100 * 1024
        traceback = (
            "Traceback (most recent call last):\n"
            + "".join(
                f'  File "/srv/app/shop/jobs.py", line {n}, in step_{n}\n    step_{n + 1}()\n'
                for n in range(1000)
            )
            + error
        )
        assert size(traceback) > 100 * 1024
        job_id = jobs.noop.enqueue(max_attempts=1).pk
        assert fail_times(job_id, 1, lambda n: Failure(error, traceback)) == [Outcome.DEAD]
        row = Job.objects.get(pk=job_id)
        (entry,) = row.errors
        assert_cut_from(error, entry["error"], ERROR_BYTES)
        assert_cut_from(traceback, entry["traceback"], TRACEBACK_BYTES)
        assert row.last_error == entry["error"]
        letter = DeadLetter.objects.get(job_id=job_id)
        assert letter.errors == row.errors
        # Grouped by the stored text, as a backfill reads it: the exception and its innermost
        # frames survive the cut.
        assert letter.fingerprint == fingerprints.of_errors(letter.errors).digest
        assert fingerprints.of_errors(letter.errors).label == "ValueError in shop.jobs.step_999"

    @pytest.mark.parametrize(
        ("raw", "kept"),
        [
            ("E: a\x00b", "E: a\ufffdb"),  # PostgreSQL refuses NUL in text and jsonb
            ("E: a\udcffb", "E: a\ufffdb"),  # a lone surrogate: no driver encodes it
        ],
        ids=["nul", "surrogate"],
    )
    def test_characters_no_database_stores_are_replaced(self, raw: str, kept: str) -> None:
        """Else the write that records the failure fails: the worker retries it for ever (a
        database error) or loses the attempt's error (an encoding error)."""
        job_id = jobs.noop.enqueue(max_attempts=2).pk
        assert fail_times(job_id, 1, lambda n: Failure(raw, f"tb {raw}")) == [Outcome.RETRIED]
        row = Job.objects.get(pk=job_id)
        assert row.last_error == kept
        assert [(e["error"], e["traceback"]) for e in row.errors] == [(kept, f"tb {kept}")]

    def test_a_handlers_huge_exception_is_cut_where_it_is_stored(self, monkeypatch) -> None:
        monkeypatch.setattr(registry, "_registry", dict(registry._registry))

        @job(name="tests.error_history.huge", max_attempts=1)
        def huge() -> None:
            explode()

        job_id = huge.enqueue().pk
        claimed = protocol.claim("w1", batch=1)
        assert execution.run(claimed[0], "w1") is Outcome.DEAD
        row = Job.objects.get(pk=job_id)
        (entry,) = row.errors
        message = "RuntimeError: " + "x" * 100 * 1024
        assert_cut_from(message, entry["error"], ERROR_BYTES)
        assert row.last_error == entry["error"]
        assert size(entry["traceback"]) <= TRACEBACK_BYTES
        assert entry["traceback"].startswith("Traceback (most recent call last):")
        assert re.search(
            r"^RuntimeError: x+ \[\.\.\. \d+ bytes cut \.\.\.\] x+$", entry["traceback"], re.M
        )
        letter = DeadLetter.objects.get(job_id=job_id)
        assert fingerprints.of_errors(letter.errors).label == (
            "RuntimeError in core.test_error_history.explode"
        )
