"""``runtime.flags.Flag``: what a handler reads of its lease and its cancellation, as
``threading.Event`` behaves, with its event made only by a ``wait``."""

from __future__ import annotations

import threading

from django_leasejobs.runtime.context import Cancellation
from django_leasejobs.runtime.flags import Flag


def test_set_once_first_caller_wins() -> None:
    flag = Flag()
    assert not flag.is_set()
    assert flag.set() is True
    assert flag.is_set()
    assert flag.set() is False
    assert flag.is_set()


def test_wait_times_out_while_unset_and_returns_at_once_when_set() -> None:
    flag = Flag()
    assert flag.wait(0.01) is False
    flag.set()
    assert flag.wait(0) is True
    assert flag.wait() is True


def test_no_event_is_made_until_someone_waits() -> None:
    flag = Flag()
    flag.set()
    flag.wait(0)
    assert flag._event is None  # set before the wait: nothing to sleep on
    waited = Flag()
    waited.wait(0)
    assert isinstance(waited._event, threading.Event)


def test_waiters_in_other_threads_wake_when_it_is_set() -> None:
    flag = Flag()
    waiting = threading.Barrier(9)
    woke: list[bool] = []

    def wait() -> None:
        waiting.wait()
        woke.append(flag.wait(30))

    threads = [threading.Thread(target=wait) for _ in range(8)]
    for thread in threads:
        thread.start()
    waiting.wait()
    while flag._event is None:  # at least one waiter made the event
        threading.Event().wait(0.001)
    flag.set()
    for thread in threads:
        thread.join(30)
    assert woke == [True] * 8


def test_set_and_wait_racing_never_lose_the_wake_up() -> None:
    for _ in range(200):
        flag = Flag()
        result: list[bool] = []
        waiter = threading.Thread(target=lambda f=flag, r=result: r.append(f.wait(30)))
        waiter.start()
        flag.set()
        waiter.join(30)
        assert result == [True]


def test_cancellation_keeps_its_first_reason() -> None:
    cancellation = Cancellation()
    assert cancellation.reason is None
    assert not cancellation.is_set()
    assert cancellation.set("timeout") is True
    assert cancellation.set("cancelled") is False
    assert cancellation.reason == "timeout"
    assert cancellation.wait(0) is True
