"""The handler's say in its retries: ``Retry`` and ``Snooze``, and ``@job(retry_on=...)``.

A handler raises ``Retry(after=30)`` to be run again then, spending an attempt, or
``Snooze(after=30)`` to be run again then without spending one (Oban's snooze): the handler
knows the moment better than the backoff does (a rate limit's reset, a resource not ready yet).
Both check their input when they are made, so a bad value fails where it was written, in the
handler's traceback, rather than as a puzzling error recorded later by the worker.

``retry_on`` turns ``permanent=`` around: only the listed exceptions (and their subclasses) are
retried, each with the job's backoff or its own; anything else dead-letters the job at once.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Mapping
from typing import Any

from django.conf import settings as django_settings
from django.utils import timezone

from .core.backoff import Backoff
from .errors import LeaseJobsError, PermanentError

MAX_AFTER_SECONDS = 100 * 366 * 86400
"""A longer wait is a mistake (and a much longer one overflows the date arithmetic)."""
YEARS = (1000, 9999)
"""What every database stores: MariaDB's DATETIME starts at year 1000."""

When = float | dt.datetime
"""When the next attempt may start: seconds from the database's now, or a moment."""


def _after(name: str, after: Any) -> float:
    if isinstance(after, dt.timedelta):
        seconds = after.total_seconds()
    elif isinstance(after, int | float) and not isinstance(after, bool):
        try:
            seconds = float(after)
        except OverflowError:  # an int past a float's range
            seconds = math.inf
    else:
        raise TypeError(
            f"{name}(after=...) takes seconds (a number) or a timedelta, not {after!r}."
        )
    if not math.isfinite(seconds) or not 0 <= seconds <= MAX_AFTER_SECONDS:
        raise ValueError(
            f"{name}(after=...) must be between 0 seconds and 100 years, not {after!r}."
        )
    return seconds


def _at(name: str, at: Any) -> dt.datetime:
    if not isinstance(at, dt.datetime):
        raise TypeError(f"{name}(at=...) takes a datetime, not {at!r}.")
    if timezone.is_naive(at):
        if django_settings.USE_TZ:
            raise ValueError(
                f"{name}(at=...) got a naive datetime while USE_TZ = True; pass an aware one "
                "(django.utils.timezone.now() + ...)."
            )
        value = at
    else:
        try:
            value = at.astimezone(dt.timezone.utc)
        except OverflowError:
            value = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
        if not django_settings.USE_TZ:  # stored naive, in TIME_ZONE (UTC: leasejobs.E009)
            value = value.replace(tzinfo=None)
    if not YEARS[0] <= value.year <= YEARS[1]:
        raise ValueError(
            f"{name}(at=...) must fall in the years {YEARS[0]} to {YEARS[1]} (UTC), "
            f"not {at.isoformat()}."
        )
    return value


class Reschedule(LeaseJobsError):
    """What ``Retry`` and ``Snooze`` share: when, and an optional message for the history."""

    in_words = ("run again in {after:g} s", "run again at {at}")
    """How ``describe`` says it, given ``after`` or given ``at``."""

    def __init__(
        self, message: str = "", *, after: float | dt.timedelta | None = None, at: Any = None
    ) -> None:
        name = type(self).__name__
        if after is not None and at is not None:
            raise TypeError(f"{name} takes after= or at=, not both.")
        if after is None and at is None:
            raise TypeError(
                f"{name} needs after= (seconds or a timedelta) or at= (a datetime), "
                f"e.g. {name}(after=30)."
            )
        if not isinstance(message, str):
            raise TypeError(f"{name}'s message must be a string, not {message!r}.")
        self.message = message
        self.after: float | None = None if after is None else _after(name, after)
        """Seconds from the database's now, when given as ``after``."""
        self.at: dt.datetime | None = None if at is None else _at(name, at)
        """The moment, when given as ``at`` (in UTC when aware)."""
        super().__init__(self.describe())

    @property
    def when(self) -> When:
        """``after`` or ``at``, whichever was given."""
        return self.after if self.after is not None else self.at  # type: ignore[return-value]

    def describe(self) -> str:
        """``the handler asked to retry in 30 s``, after the message if there is one."""
        if self.after is not None:
            asked = self.in_words[0].format(after=self.after)
        else:
            assert self.at is not None
            asked = self.in_words[1].format(at=self.at.isoformat())
        return f"{self.message} ({asked})" if self.message else asked

    def __reduce__(self) -> Any:
        """Pickle by keywords (the default would call the class without ``after``/``at``)."""
        keywords = {"after": self.after} if self.after is not None else {"at": self.at}
        return (functools.partial(type(self), self.message, **keywords), ())


class Retry(Reschedule):
    """Raise from a handler to run the job again ``after`` seconds (a number or a
    ``timedelta``) or ``at`` an aware datetime, instead of after its backoff.

    It counts as an attempt: raised on the last one, the job is dead-lettered (attempts
    exhausted), its error history saying the handler asked to retry. An optional first
    argument is a message for that history: ``raise Retry("quota reached", after=60)``.
    """

    in_words = ("the handler asked to retry in {after:g} s", "the handler asked to retry at {at}")


class Snooze(Reschedule):
    """Raise from a handler to run the job again ``after`` seconds or ``at`` a datetime,
    without spending an attempt (nothing is added to its error history).

    At most ``LEASEJOBS_MAX_SNOOZES`` snoozes per job: past them it is dead-lettered with
    reason ``snoozed too often``.
    """

    in_words = ("the handler snoozed for {after:g} s", "the handler snoozed until {at}")


class RetryOn:
    """``@job(retry_on=...)`` checked: the exception classes that are retried, each with its
    own ``Backoff`` or ``None`` (the job's)."""

    def __init__(self, value: Any) -> None:
        if isinstance(value, type):
            value = (value,)
        if isinstance(value, Mapping):
            items = list(value.items())
        elif isinstance(value, list | tuple | set | frozenset):
            items = [(kind, None) for kind in value]
        else:
            raise TypeError(
                "retry_on takes a tuple of exception classes, or a dict of exception class to "
                f"Backoff (or None: the job's backoff), not {value!r}."
            )
        if not items:
            raise ValueError(
                "retry_on is empty: nothing would be retried. Give the exceptions to retry, or "
                "max_attempts=1 for none."
            )
        self.backoffs: dict[type[BaseException], Backoff | None] = {}
        for kind, backoff in items:
            if not isinstance(kind, type) or not issubclass(kind, BaseException):
                raise TypeError(f"retry_on takes exception classes, not {kind!r}.")
            if issubclass(kind, PermanentError | Reschedule):
                raise TypeError(
                    f"retry_on cannot list {kind.__name__}: a PermanentError always "
                    "dead-letters the job, a Retry or a Snooze always reschedules it."
                )
            if backoff is not None and not isinstance(backoff, Backoff):
                raise TypeError(
                    f"retry_on[{kind.__name__}] must be a Backoff or None (the job's backoff), "
                    f"not {backoff!r}."
                )
            self.backoffs[kind] = backoff

    def match(self, exc: BaseException) -> tuple[bool, Backoff | None]:
        """Whether ``exc`` is retried, and with which backoff (``None``: the job's).

        The most specific listed class wins: with ``{OSError: a, ConnectionError: b}`` a
        ``ConnectionResetError`` gets ``b``.
        """
        for kind in type(exc).__mro__:
            if kind in self.backoffs:
                return True, self.backoffs[kind]
        for kind, backoff in self.backoffs.items():  # an ABC that registered the class
            if isinstance(exc, kind):
                return True, backoff
        return False, None

    def __repr__(self) -> str:
        names = ", ".join(kind.__name__ for kind in self.backoffs)
        return f"RetryOn({names})"
