"""Text reaches PostgreSQL exactly as given, or is refused, whatever the session's encoding.

A session may set ``client_encoding`` to a multibyte encoding whose Python codec maps ``¥`` to
the byte of a backslash (SJIS, EUC_JP), and turn ``standard_conforming_strings`` off, so that
a backslash escapes. Every value travels as a driver parameter: no text can end a literal and
run as SQL, and text the encoding cannot carry exactly is refused before anything is written.
Each entry point is tried: ``enqueue``, ``enqueue_many``, the tasks backend and replay.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import DataError, connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import DeadLetter, Job
from django_leasejobs.protocol import Failure

from ..conftest import examples

pytestmark = [
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="client_encoding is a PostgreSQL session's"
    ),
    pytest.mark.django_db,
]

ENCODINGS = ["UTF8", "EUC_JP", "SJIS", "GBK", "BIG5", "LATIN1"]
INJECTION = "¥', NULL, NULL); CREATE TABLE pwned(); SELECT $$--"
PIECES = ["¥", "‾", "'", "\\", "$$", "--", "%s", "%", "😀", "ぁ", "é", "\\'", "''", ";", " "]
TEXT = st.one_of(
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=6).map("".join),
    # Every character class but lone surrogates and NUL (refused for every database).
    st.text(
        st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
        min_size=1,
        max_size=6,
    ),
).filter(lambda text: text not in protocol.ENQUEUE_OPTIONS)
"""Also used as a keyword argument's name: an enqueue option's name ("queue") is not one."""


@contextlib.contextmanager
def session(encoding: str, conforming: str) -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute(f"SET client_encoding TO '{encoding}'")
        cursor.execute(f"SET standard_conforming_strings TO {conforming}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET client_encoding TO 'UTF8'")
            cursor.execute("RESET standard_conforming_strings")


def _no_pwned_table() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('pwned')")
        return cursor.fetchone()[0] is None


def no_jobs() -> None:
    """Hypothesis runs every example in the test's one transaction: start each from no jobs,
    so a dedupe key an earlier example used cannot return that example's job."""
    DeadLetter.objects.all().delete()
    Job.objects.all().delete()


def exactly_or_refused(
    encoding: str, conforming: str, send: Callable[[], list[int]], expected: list[Any]
) -> None:
    """``send`` (run in the session) writes rows whose ``(args, kwargs, dedupe_key)`` read
    back, over UTF-8, as ``expected``; or it raises and writes none: ``JobValidationError``,
    or the server's own refusal to send a stored value that the encoding has no form for."""
    before = set(Job.objects.values_list("pk", flat=True))
    with session(encoding, conforming):
        refusal = ""
        try:
            pks = send()
        except JobValidationError as exc:
            pks, refusal, expected_words = None, str(exc), "client_encoding"
        except DataError as exc:
            pks, refusal = None, str(exc)
            expected_words = f'has no equivalent in encoding "{encoding}"'
    if pks is None:
        assert expected_words in refusal
    assert _no_pwned_table()
    new = Job.objects.exclude(pk__in=before)
    if pks is None:
        assert not new.exists(), refusal
        return
    stored = {job.pk: (job.args, job.kwargs, job.dedupe_key) for job in new}
    assert sorted(stored) == sorted(pks)
    assert [stored[pk] for pk in pks] == expected


CONFIGURATIONS = pytest.mark.parametrize(
    ("encoding", "conforming"), [(e, c) for e in ENCODINGS for c in ("on", "off")]
)
EXAMPLES = settings(
    max_examples=examples(15),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.mark.fuzz
@CONFIGURATIONS
@EXAMPLES
@given(text=TEXT)
def test_enqueue(encoding: str, conforming: str, text: str) -> None:
    no_jobs()

    def send() -> list[int]:
        keyed = jobs.takes_anything.enqueue(text, dedupe_key=text + "-k")
        plain = jobs.takes_anything.enqueue(**{text: [text]})
        return [keyed.pk, plain.pk]

    exactly_or_refused(
        encoding, conforming, send, [([text], {}, text + "-k"), ([], {text: [text]}, None)]
    )


@pytest.mark.fuzz
@CONFIGURATIONS
@EXAMPLES
@given(text=TEXT)
def test_enqueue_many(encoding: str, conforming: str, text: str) -> None:
    no_jobs()

    def send() -> list[int]:
        items = [{"args": [text], "dedupe_key": text + "-m"}, ((text,), {text: text})]
        return [job.pk for job in jobs.takes_anything.enqueue_many(items)]

    exactly_or_refused(
        encoding, conforming, send, [([text], {}, text + "-m"), ([text], {text: text}, None)]
    )


@pytest.mark.fuzz
@CONFIGURATIONS
@EXAMPLES
@given(text=TEXT)
def test_tasks_backend(encoding: str, conforming: str, text: str) -> None:
    """A task's arguments are its only text: JSON, sent escaped to ASCII, so always exact."""
    from testapp import tasks

    no_jobs()

    def send() -> list[int]:
        try:
            return [int(tasks.record.enqueue(label=text).id)]
        except JobValidationError:
            raise
        except Exception as exc:  # the framework's InvalidTask: re-raised as ours if it is
            raise AssertionError(f"unexpected {exc!r}") from exc

    exactly_or_refused(encoding, conforming, send, [([], {"label": text}, None)])


@pytest.mark.fuzz
@CONFIGURATIONS
@EXAMPLES
@given(text=TEXT)
def test_replay(encoding: str, conforming: str, text: str) -> None:
    no_jobs()
    # Keyed over UTF-8; the replay, in the session, sends that key again.
    original = jobs.takes_anything.enqueue(dedupe_key=text, max_attempts=1)
    (claimed,) = protocol.claim("w1", batch=1)
    assert claimed.pk == original.pk
    protocol.fail(claimed.pk, claimed.attempt, Failure("poison"))
    letter = DeadLetter.objects.get(job_id=original.pk)

    def send() -> list[int]:
        return [protocol.replay(letter.pk, args=[text], kwargs={text: 1}).pk]

    exactly_or_refused(encoding, conforming, send, [([text], {text: 1}, original.dedupe_key)])


@pytest.mark.parametrize("encoding", ["SJIS", "EUC_JP"])
def test_the_yen_sign_neither_injects_nor_matches_a_backslash(encoding: str) -> None:
    """``¥`` becomes the byte of ``\\`` in these codecs: it must not close a literal, and a
    dedupe key ``¥`` must not find the job keyed ``\\``."""
    backslashed = jobs.noop.enqueue(dedupe_key="\\")
    with session(encoding, "off"):
        for key in (INJECTION, "¥"):
            with pytest.raises(JobValidationError, match="client_encoding"):
                jobs.noop.enqueue(dedupe_key=key)
        assert jobs.noop.enqueue(dedupe_key="\\").pk == backslashed.pk
    assert _no_pwned_table()
    assert list(Job.objects.values_list("dedupe_key", flat=True)) == ["\\"]


def test_utf8_sessions_carry_the_yen_sign_and_the_injection_text_as_given() -> None:
    first = jobs.noop.enqueue(dedupe_key=INJECTION)
    yen = jobs.noop.enqueue(dedupe_key="¥")
    backslash = jobs.noop.enqueue(dedupe_key="\\")
    assert len({first.pk, yen.pk, backslash.pk}) == 3
    assert _no_pwned_table()
    assert sorted(Job.objects.values_list("dedupe_key", flat=True)) == sorted(
        [INJECTION, "¥", "\\"]
    )
