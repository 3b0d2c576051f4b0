"""Argument checks: the quick walk over plain JSON must accept and refuse exactly what the
exact check (every value judged, the JSON encoded and measured) does."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from testapp import jobs

from django_leasejobs.core import json_values, validation
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import Job

# Valid JSON and, now and then, what the checks refuse: NaN and infinities, NUL characters,
# lone surrogates, integers too long to write, keys that are not strings, values that are not
# JSON, subclasses of the plain types.
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=6)
    | st.sampled_from(["\x00", "a\x00", "é", "😀", "\n", '"', "\\", "b\udcffad", "\ud83d"])
    | st.sampled_from([b"bytes", {1, 2}, math.nan, -math.inf, 10**3500, -(2**10_001)])
)
VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=4) | st.just("k\udcff"), children, max_size=4)
        | st.dictionaries(st.integers(0, 3), children, min_size=1, max_size=2)
    ),
    max_leaves=12,
)


def _exact(args: list[Any], kwargs: dict[str, Any], cap: int) -> str | None:
    """The check as it was before the quick walk: judge every value, then measure the JSON."""
    try:
        json_values._check_json(args, "args", 0)
        json_values._check_json(kwargs, "kwargs", 0)
    except JobValidationError as exc:
        return str(exc)
    if len(json_values.COMPACT_JSON.encode([args, kwargs])) > cap:
        return "over the cap"
    return None


def _outcome(args: list[Any], kwargs: dict[str, Any], cap: int) -> str | None:
    try:
        json_values.check_payload(args, kwargs, max_bytes=cap)
    except JobValidationError as exc:
        return "over the cap" if "LEASEJOBS_MAX_PAYLOAD_BYTES" in str(exc) else str(exc)
    return None


@pytest.mark.fuzz
@given(VALUES)
def test_the_quick_walk_passes_only_valid_json_and_never_under_measures_it(value: Any) -> None:
    size = json_values._json_size_bound(value, 0)
    if size < 0:
        return  # left to the exact check, which judges and explains it
    json_values._check_json(value, "args", 0)  # would raise for anything invalid
    assert size >= len(json_values.COMPACT_JSON.encode(value))


@pytest.mark.fuzz
@given(st.lists(VALUES, max_size=3), st.dictionaries(st.text(max_size=3), VALUES, max_size=2))
def test_check_payload_decides_as_the_exact_check(args: list[Any], kwargs: dict) -> None:
    for cap in (2, 40, 400, 256 * 1024):
        assert _outcome(args, kwargs, cap) == _exact(args, kwargs, cap), cap


@pytest.mark.parametrize("text", ["x" * 30, "é" * 30, "😀" * 30, "\n" * 30])
def test_a_payload_exactly_at_the_cap_is_accepted_and_one_byte_over_refused(text: str) -> None:
    size = len(json_values.COMPACT_JSON.encode([[text], {}]))
    assert json_values.check_payload([text], {}, max_bytes=size) == ([text], {})
    with pytest.raises(JobValidationError, match="over LEASEJOBS_MAX_PAYLOAD_BYTES"):
        json_values.check_payload([text], {}, max_bytes=size - 1)


def test_deep_and_self_containing_values_still_get_their_message() -> None:
    deep: list[Any] = []
    for _ in range(json_values.MAX_JSON_DEPTH + 1):
        deep = [deep]
    loop: list[Any] = []
    loop.append(loop)
    for value in (deep, loop):
        assert json_values._json_size_bound(value, 0) == -1
        with pytest.raises(JobValidationError, match="nests deeper than 31 levels"):
            json_values.check_json(value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("b\udcffad", r"a lone surrogate \('\\udcff'\)"),
        ({"k\ud800": 1}, "has a key with a lone surrogate"),
        ([10**3500], "integer of 11627 bits"),
    ],
)
def test_what_no_database_can_store_is_refused_with_its_reason(value: Any, message: str) -> None:
    with pytest.raises(JobValidationError, match=message):
        json_values.check_json([value])
    with pytest.raises(JobValidationError, match=message):
        json_values.check_payload([value], {})


@pytest.mark.parametrize("value", [0, -1, 2**31, 2**40, True, 1.0])
def test_max_attempts_fits_the_column_everywhere(value: Any) -> None:
    with pytest.raises(JobValidationError, match="from 1 to 2147483647"):
        validation.check_max_attempts(value)
    assert validation.check_max_attempts(2**31 - 1) == 2**31 - 1


# --------------------------------------------------------------------------- through enqueue

SURROGATE_KEYS = ["b\udcffad", "\ud800", "k" * 199 + "\udfff"]


@pytest.mark.django_db
@pytest.mark.parametrize("key", SURROGATE_KEYS)
def test_a_lone_surrogate_in_a_dedupe_key_is_refused_and_nothing_is_written(key: str) -> None:
    # Not valid UTF-8: every driver failed to encode it (UnicodeEncodeError) when writing.
    message = r"dedupe_key .*a lone surrogate"
    with pytest.raises(JobValidationError, match=message):
        jobs.noop.enqueue(dedupe_key=key)
    with pytest.raises(JobValidationError, match=message):
        jobs.noop.enqueue_many([((), {}), {"dedupe_key": "fine"}, {"dedupe_key": key}])
    with pytest.raises(JobValidationError, match=message):
        validation.check_dedupe_key(key)
    assert not Job.objects.exists()


REFUSED_FLOATS = [-0.0, 1e16, -1e16, 1.5e16, 12345678901234567890.0, 1e308, -1.7976931348623157e308]
"""What PostgreSQL's jsonb does not give back as sent: -0.0 as 0.0, 1e16 and up as integers."""

KEPT_FLOATS = [
    0.0,
    0.1,
    -1.5,
    2.0,
    1e15,
    9999999999999998.0,
    -1e-7,
    5e-324,
    2.2250738585072014e-308,
]


def _exactly(value: Any) -> str:
    """The value with its types (``1e16 == 10**16`` and ``-0.0 == 0.0`` in Python, not in
    JSON text); keys sorted, as jsonb keeps its own order and dicts compare without one."""
    return json.dumps(value, sort_keys=True)


@pytest.mark.parametrize("value", REFUSED_FLOATS)
def test_floats_that_would_not_come_back_as_sent_are_refused(value: float) -> None:
    for args, kwargs in (([value], {}), ([], {"x": {"y": [1, value]}}), ([(value, 1)], {})):
        assert json_values._json_size_bound([args, kwargs], 0) == -1
        with pytest.raises(JobValidationError, match=re.escape(repr(value))):
            json_values.check_payload(args, kwargs)


def test_a_result_keeps_any_finite_float() -> None:
    # A handler's return value is not refused for its type coming back changed: the job's
    # work is done, and failing it for that would run it again or dead-letter it.
    for value in REFUSED_FLOATS:
        json_values.check_json([value], "result")
    with pytest.raises(JobValidationError, match="NaN or Infinity"):
        json_values.check_json([math.inf], "result")


@pytest.mark.django_db
@pytest.mark.parametrize("value", REFUSED_FLOATS)
def test_such_floats_are_refused_at_enqueue_and_nothing_is_written(value: float) -> None:
    with pytest.raises(JobValidationError, match=re.escape(f"args[1] contains {value!r}")):
        jobs.takes_anything.enqueue(1, value)
    with pytest.raises(JobValidationError, match=re.escape(f"kwargs['x'] contains {value!r}")):
        jobs.takes_anything.enqueue(x=value, priority=1)
    with pytest.raises(JobValidationError, match=re.escape(repr(value))):
        jobs.takes_anything.enqueue_many([((1,), {}), ((value,), {})])
    with pytest.raises(JobValidationError, match=re.escape(repr(value))):
        jobs.takes_anything.enqueue_many([((1,), {}), {"kwargs": {"x": [value]}, "priority": 2}])
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_the_returned_job_equals_a_fresh_read_of_its_row() -> None:
    kwargs = {"floats": KEPT_FLOATS, "big": 10**300, "nested": {"f": [-1e-300, 0.5]}}
    jobs_made = [
        jobs.takes_anything.enqueue(*KEPT_FLOATS, **kwargs),
        jobs.takes_anything.enqueue(*KEPT_FLOATS, dedupe_key="floats", **kwargs),
        *jobs.takes_anything.enqueue_many(
            [(KEPT_FLOATS, kwargs), {"args": KEPT_FLOATS, "priority": 3}]
        ),
    ]
    for job in jobs_made:
        fresh = Job.objects.get(pk=job.pk)
        assert _exactly(fresh.args) == _exactly(KEPT_FLOATS)
        assert _exactly(fresh.args) == _exactly(job.args)
        assert _exactly(fresh.kwargs) == _exactly(job.kwargs)


@pytest.mark.parametrize(
    "delay", [10**20, 1e300, validation.MAX_DELAY_SECONDS + 1, dt.timedelta(days=999_999_999)]
)
def test_a_delay_beyond_a_century_is_refused_not_overflowed(delay: Any) -> None:
    with pytest.raises(JobValidationError, match="at most 100 years"):
        validation.check_run_at(None, delay)
    assert validation.check_run_at(None, validation.MAX_DELAY_SECONDS) == (
        None,
        float(validation.MAX_DELAY_SECONDS),
    )


@pytest.mark.parametrize(
    "run_at",
    [
        dt.datetime(999, 12, 31, tzinfo=dt.timezone.utc),
        dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5))),
        dt.datetime(9999, 12, 31, 23, tzinfo=dt.timezone(dt.timedelta(hours=-5))),
    ],
)
def test_run_at_outside_what_every_database_stores_is_refused(run_at: dt.datetime) -> None:
    with pytest.raises(JobValidationError, match="years 1000 to 9999"):
        validation.check_run_at(run_at, None)


@pytest.mark.django_db
def test_run_at_with_any_offset_python_allows_is_stored_as_its_instant() -> None:
    far = dt.timezone(dt.timedelta(hours=-20, minutes=-48))
    run_at = dt.datetime(2030, 8, 5, 2, 47, 39, 322777, tzinfo=far)
    job = jobs.add.enqueue(1, 2, run_at=run_at)
    assert Job.objects.get(pk=job.pk).run_at == run_at
    assert validation.check_run_at(run_at, None)[0].utcoffset() == dt.timedelta(0)
