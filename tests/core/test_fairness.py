"""Fair keys as decorated and the places they hand out (the claim's order is in
tests/protocol/test_fairness.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_leasejobs.core.fairness import STEP, Place
from django_leasejobs.errors import JobValidationError

from ..conftest import examples

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def handler(account: str, n: int = 0) -> None:
    """A module-level function to decorate (``job`` is applied without registering twice)."""


def decorate(**options: Any) -> Any:
    from django_leasejobs.jobs import JobFunction

    return JobFunction(handler, name="tests.fairness.handler", **options)


def test_a_template_a_callable_and_a_weight() -> None:
    assert decorate(fair_key="acct:{account}").fairness.values(["a"], {}) == {
        "fair_key": "acct:a",
        "fair_weight": 1,
        "fair_at": None,
    }
    keyed = decorate(fair_key=lambda account, **_: account.upper(), fair_weight=3)
    assert keyed.fairness.values([], {"account": "b"})["fair_key"] == "B"
    # The call's own key and weight win over the decorated ones.
    assert keyed.fairness.values(["b"], {}, key="x", weight=2) == {
        "fair_key": "x",
        "fair_weight": 2,
        "fair_at": None,
    }
    none = {"fair_key": None, "fair_weight": None, "fair_at": None}
    assert decorate().fairness.values(["a"], {}) == none


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fair_weight": 2}, "fair_weight needs fair_key"),
        ({"fair_key": "{nope}"}, "names 'nope', which is not an argument"),
        ({"fair_key": "{}"}, "fields must name arguments"),
        ({"fair_key": "a", "fair_weight": 0}, "from 1 to 100"),
        ({"fair_key": "a", "fair_weight": 2.0}, "from 1 to 100"),
    ],
)
def test_bad_options_are_refused_at_decoration(options: dict[str, Any], message: str) -> None:
    with pytest.raises(JobValidationError, match=message):
        decorate(**options)


def test_a_key_is_a_template_or_a_callable() -> None:
    with pytest.raises(TypeError, match="fair_key must be a template string or a callable"):
        decorate(fair_key=7)


@pytest.mark.parametrize("key", [lambda account, **_: "", lambda account, **_: 7])
def test_a_key_that_is_not_a_string_refuses_the_enqueue(key: Any) -> None:
    with pytest.raises(JobValidationError, match="fair_key must give a non-empty string"):
        decorate(fair_key=key).fairness.values(["a"], {})


def test_a_newcomer_goes_to_the_head_and_a_key_goes_on_from_its_last() -> None:
    head, now = T0, T0 + dt.timedelta(seconds=5)
    assert Place.first(now, head, None, 0) == Place(head, 0)
    assert Place.first(now, None, None, 0) == Place(now, 0)
    # A head ahead of the clock (places handed out faster than jobs are due): the clock.
    assert Place.first(head, now, None, 0) == Place(head, 0)
    assert Place.first(now, head, head + 3 * STEP, 2) == Place(head + 3 * STEP, 2)
    # A last place behind the head (its jobs retried since): the head.
    assert Place.first(now, head, head - STEP, 1) == Place(head, 0)


def test_weight_jobs_share_each_microsecond() -> None:
    place = Place(T0, 0)
    assert [place.take(3) for _ in range(7)] == [T0] * 3 + [T0 + STEP] * 3 + [T0 + 2 * STEP]
    place = Place(T0, 2)  # two of the key's jobs already there
    assert [place.take(2) for _ in range(3)] == [T0 + STEP, T0 + STEP, T0 + 2 * STEP]


Job = tuple[dt.datetime, int, str]  # place, id, key: the claim's order


class Queue:
    """One queue's waiting fair jobs, enqueued and claimed the way the database does."""

    def __init__(self) -> None:
        self.waiting: list[Job] = []
        self.next_id = 0
        self.now = T0

    def enqueue(self, key: str, weight: int, count: int) -> None:
        head = min((job[0] for job in self.waiting), default=None)
        own = [job[0] for job in self.waiting if job[2] == key]
        last = max(own, default=None)
        place = Place.first(self.now, head, last, own.count(last) if last else 0)
        for _ in range(count):
            self.next_id += 1
            self.waiting.append((place.take(weight), self.next_id, key))

    def claim(self, count: int) -> None:
        self.waiting.sort()
        del self.waiting[:count]


steps = st.lists(
    st.one_of(
        st.tuples(st.just("enqueue"), st.sampled_from("abcde"), st.integers(1, 40)),
        st.tuples(st.just("claim"), st.just(""), st.integers(1, 30)),
    ),
    max_size=40,
)


@pytest.mark.fuzz
@settings(max_examples=examples(300), deadline=None)
@given(steps=steps, weights=st.lists(st.integers(1, 4), min_size=5, max_size=5))
def test_no_key_waits_behind_more_than_the_others_shares(
    steps: list[tuple[str, str, int]], weights: list[int]
) -> None:
    """Whatever came before, a key's first waiting job has at most two places' worth of each
    other key's jobs ahead of it (its weight's jobs per place): its own place and the one
    before, where a key that went on from its last may have begun. The clock moves 10 ms a
    step, more than a step hands out, so no place is ahead of it."""
    weight = dict(zip("abcde", weights, strict=True))
    queue = Queue()
    for action, key, count in steps:
        if action == "enqueue":
            queue.enqueue(key, weight[key], count)
        else:
            queue.claim(count)
        queue.now += dt.timedelta(milliseconds=10)
        order = sorted(queue.waiting)
        for key in {job[2] for job in order}:
            first = next(i for i, job in enumerate(order) if job[2] == key)
            for other in {job[2] for job in order[:first]}:
                ahead = sum(1 for job in order[:first] if job[2] == other)
                assert ahead <= 2 * weight[other], (key, other, ahead)
