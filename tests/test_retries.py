"""``Retry``, ``Snooze`` and ``@job(retry_on=...)`` refuse bad input where it is written."""

from __future__ import annotations

import datetime as dt
import pickle
from typing import Any

import pytest
from django.test import override_settings

from django_leasejobs import Backoff, PermanentError, Retry, Snooze, job
from django_leasejobs.retries import RetryOn

AWARE = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)


def handler() -> None:
    """A module-level function to decorate (never registered under its own name)."""


@pytest.mark.parametrize("kind", [Retry, Snooze])
class TestWhen:
    def test_after_in_seconds_or_a_timedelta(self, kind: type[Retry]) -> None:
        assert kind(after=30).when == 30.0
        assert kind(after=2.5).after == 2.5
        assert kind(after=dt.timedelta(minutes=2)).when == 120.0
        assert kind(after=0).when == 0.0

    def test_at_an_aware_datetime_is_kept_in_utc(self, kind: type[Retry]) -> None:
        paris = dt.timezone(dt.timedelta(hours=1))
        value = kind(at=dt.datetime(2030, 1, 2, 4, 4, 5, tzinfo=paris))
        assert value.when == AWARE
        assert value.at is not None
        assert value.at.utcoffset() == dt.timedelta(0)

    @pytest.mark.parametrize(
        ("options", "error", "words"),
        [
            ({}, TypeError, "needs after= (seconds or a timedelta) or at= (a datetime)"),
            ({"after": 30, "at": AWARE}, TypeError, "after= or at=, not both"),
            ({"after": -1}, ValueError, "between 0 seconds and 100 years"),
            ({"after": dt.timedelta(seconds=-1)}, ValueError, "between 0 seconds"),
            ({"after": float("nan")}, ValueError, "between 0 seconds"),
            ({"after": float("inf")}, ValueError, "between 0 seconds"),
            ({"after": 10**400}, ValueError, "between 0 seconds"),
            ({"after": 200 * 366 * 86400}, ValueError, "100 years"),
            ({"after": "30"}, TypeError, "takes seconds (a number) or a timedelta, not '30'"),
            ({"after": True}, TypeError, "takes seconds"),
            ({"at": "2030-01-01"}, TypeError, "takes a datetime, not '2030-01-01'"),
            ({"at": dt.date(2030, 1, 1)}, TypeError, "takes a datetime"),
            ({"at": dt.datetime(2030, 1, 1)}, ValueError, "naive datetime while USE_TZ = True"),
            ({"at": dt.datetime(1, 1, 2, tzinfo=dt.timezone.utc)}, ValueError, "years 1000"),
        ],
    )
    def test_bad_input_raises_where_it_is_written(
        self, kind: type[Retry], options: dict[str, Any], error: type[Exception], words: str
    ) -> None:
        with pytest.raises(error) as info:
            kind(**options)
        assert words in str(info.value)
        assert str(info.value).startswith(kind.__name__)

    def test_a_message_that_is_not_text(self, kind: type[Retry]) -> None:
        with pytest.raises(TypeError, match="message must be a string"):
            kind(42, after=1)  # type: ignore[arg-type]

    @override_settings(USE_TZ=False)
    def test_without_time_zones_a_naive_moment_is_kept_and_an_aware_one_made_naive(
        self, kind: type[Retry]
    ) -> None:
        assert kind(at=dt.datetime(2030, 1, 2, 3, 4, 5)).when == dt.datetime(2030, 1, 2, 3, 4, 5)
        assert kind(at=AWARE).when == dt.datetime(2030, 1, 2, 3, 4, 5)

    def test_survives_pickling(self, kind: type[Retry]) -> None:
        for value in (kind("busy", after=30), kind(at=AWARE)):
            copy = pickle.loads(pickle.dumps(value))
            assert type(copy) is kind
            assert (copy.message, copy.when, str(copy)) == (value.message, value.when, str(value))


def test_the_message_says_what_the_handler_asked() -> None:
    assert str(Retry(after=30)) == "the handler asked to retry in 30 s"
    assert str(Retry("quota", after=1.5)) == "quota (the handler asked to retry in 1.5 s)"
    assert str(Snooze(at=AWARE)) == "the handler snoozed until 2030-01-02T03:04:05+00:00"
    assert not isinstance(Snooze(after=1), Retry)
    assert not isinstance(Retry(after=1), Snooze)


class TestRetryOn:
    def test_a_tuple_a_single_class_or_a_dict(self) -> None:
        policy = RetryOn((TimeoutError, ConnectionError))
        assert policy.match(ConnectionResetError()) == (True, None)
        assert policy.match(ValueError()) == (False, None)
        assert RetryOn(TimeoutError).match(TimeoutError()) == (True, None)
        slow = Backoff(base=5)
        assert RetryOn({ConnectionError: slow, TimeoutError: None}).match(
            ConnectionRefusedError()
        ) == (True, slow)

    def test_the_most_specific_class_wins(self) -> None:
        broad, narrow = Backoff(base=1), Backoff(base=9)
        policy = RetryOn({OSError: broad, ConnectionError: narrow})
        assert policy.match(ConnectionResetError()) == (True, narrow)
        assert policy.match(FileNotFoundError()) == (True, broad)

    @pytest.mark.parametrize(
        ("value", "error", "words"),
        [
            ("TimeoutError", TypeError, "takes a tuple of exception classes, or a dict"),
            (42, TypeError, "takes a tuple of exception classes"),
            ((), ValueError, "retry_on is empty: nothing would be retried"),
            ({}, ValueError, "retry_on is empty"),
            ((TimeoutError(),), TypeError, "takes exception classes, not TimeoutError()"),
            ((int,), TypeError, "takes exception classes, not <class 'int'>"),
            ((PermanentError,), TypeError, "cannot list PermanentError"),
            ((Retry,), TypeError, "cannot list Retry"),
            ({Snooze: None}, TypeError, "cannot list Snooze"),
            ({TimeoutError: 5}, TypeError, "retry_on[TimeoutError] must be a Backoff or None"),
            ({TimeoutError: {"base": 5}}, TypeError, "must be a Backoff or None"),
        ],
    )
    def test_bad_input_at_decoration(self, value: Any, error: type[Exception], words: str) -> None:
        with pytest.raises(error) as info:
            job(name="tests.bad_retry_on", retry_on=value)(handler)
        assert words in str(info.value)

    def test_retry_on_with_permanent_is_a_type_error(self) -> None:
        with pytest.raises(TypeError, match=r"permanent= .* or retry_on= .*, not both"):
            job(name="tests.both", retry_on=(TimeoutError,), permanent=(KeyError,))(handler)
