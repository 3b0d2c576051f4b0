"""A slot's life under concurrent callers: the transition table of :mod:`runtime.slots`.

Several threads call random transition methods on one slot at once, as the worker calls them
(``try_write`` under ``InFlight.gate``; the moves in and out of flight through
:class:`InFlight`), with the heartbeat's snapshot of renewable slots among them. Whatever the
interleaving: each won move is a row of the table, exactly one caller wins the move out of each
state (the won moves chain from ``queued`` to the slot's last state), and a slot that settled
left flight exactly once (one that did not is still in the right dictionary). No database: a
slot holds an unsaved job.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_leasejobs.models import Job
from django_leasejobs.runtime.slots import (
    ENDED_STATES,
    TRANSITIONS,
    InFlight,
    Move,
    Slot,
    SlotState,
)

from ..conftest import examples


class CountingInFlight(InFlight):
    """Notes each slot it takes out of flight."""

    def __init__(self) -> None:
        super().__init__()
        self.left: list[Slot] = []

    def _leave(self, slots: Iterable[Slot]) -> None:
        slots = list(slots)
        with self.gate:  # the heaviest nesting a caller may add: gate before _lock
            self.left += slots
        super()._leave(slots)


def _report(flight: InFlight, slot: Slot) -> Move | None:
    with flight.gate:  # as a runner does
        return slot.try_write()


def _complete(flight: InFlight, slot: Slot) -> Move | None:
    return TRANSITIONS["try_complete"][SlotState.GROUPED] if flight.completed([slot]) else None


def _renew(flight: InFlight, slot: Slot) -> None:
    with flight.gate:  # as the heartbeat does
        flight.renewable()


CALLS: dict[str, Callable[[InFlight, Slot], Move | None]] = {
    "try_start": lambda flight, slot: slot.try_start(),
    "try_write": _report,
    "try_release": lambda flight, slot: flight.release(slot),
    "try_end": lambda flight, slot: flight.end(slot, "timeout"),
    "try_group": lambda flight, slot: slot.try_group(),
    "try_complete": _complete,
    "try_end_written": lambda flight, slot: flight.end_written(slot),
    "try_stick": lambda flight, slot: slot.try_stick(),
    "try_return": lambda flight, slot: flight.returned(slot),
    "renew": _renew,
}
"""Each transition (and the heartbeat's snapshot) as the worker calls it."""


def _race(flight: InFlight, slot: Slot, plans: list[list[str]]) -> list[tuple[str, Move]]:
    """Run each plan on its own thread, all let go at once; the won moves, by method."""
    won: list[tuple[str, Move]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(plans))

    def caller(plan: list[str]) -> None:
        barrier.wait()
        for name in plan:
            move = CALLS[name](flight, slot)
            if move is not None:
                with lock:
                    won.append((name, move))

    threads = [threading.Thread(target=caller, args=(plan,)) for plan in plans]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert not any(t.is_alive() for t in threads), "a caller hung: a lock order was broken"
    return won


def _check(flight: CountingInFlight, slot: Slot, won: list[tuple[str, Move]]) -> None:
    for name, move in won:
        assert TRANSITIONS[name].get(move.before) == move, f"{name} made {move}: not in the table"
    out_of: dict[SlotState, list[str]] = {}
    for name, move in won:
        out_of.setdefault(move.before, []).append(name)
    assert all(len(names) == 1 for names in out_of.values()), f"a move won twice: {out_of}"
    state, path = SlotState.QUEUED, [SlotState.QUEUED]
    moves = {move.before: move for _, move in won}
    while state in moves:
        state = moves.pop(state).after
        path.append(state)
    assert not moves, f"won moves off the path {path}: {moves}"
    assert slot.state is state, (path, slot.state)
    settled = state is SlotState.SETTLED
    assert flight.left.count(slot) == int(settled), "a settled slot leaves flight exactly once"
    if settled:
        assert (flight.total, flight.live(), flight.ended()) == (0, [], [])
    elif state in ENDED_STATES:
        assert (flight.live(), flight.ended()) == ([], [slot])
    else:
        assert (flight.live(), flight.ended()) == ([slot], [])


PLANS = st.lists(st.lists(st.sampled_from(sorted(CALLS)), max_size=8), min_size=2, max_size=4)


@pytest.mark.fuzz
@settings(max_examples=examples(200))
@given(PLANS)
def test_concurrent_callers_move_a_slot_along_the_table_and_it_leaves_flight_once(
    plans: list[list[str]],
) -> None:
    flight = CountingInFlight()
    slot = Slot(Job(pk=1, attempt=1, name="testapp.jobs.noop", queue="default"))
    flight.add(slot)
    _check(flight, slot, _race(flight, slot, plans))


@pytest.mark.parametrize(
    "plan",
    [
        ["try_start", "try_release", "try_end"],  # whichever comes first, alone
        ["try_start", "try_write", "try_group", "try_return", "try_complete"],
        ["try_end", "try_return", "try_end_written", "try_stick", "try_return"],
    ],
)
def test_many_callers_of_the_same_plan_win_each_move_once(plan: list[str]) -> None:
    """Eight threads run the same plan: every move is made by exactly one of them."""
    flight = CountingInFlight()
    slot = Slot(Job(pk=1, attempt=1, name="testapp.jobs.noop", queue="default"))
    flight.add(slot)
    _check(flight, slot, _race(flight, slot, [plan] * 8))


def test_the_table_has_no_cycle_and_every_state_but_settled_can_leave() -> None:
    """The life goes one way (so a state is left at most once) and always can end."""
    edges = {(move.before, move.after) for table in TRANSITIONS.values() for move in table.values()}
    froms = {before for before, _ in edges}
    assert froms == set(SlotState) - {SlotState.SETTLED}
    order: dict[SlotState, int] = {}

    def depth(state: SlotState, seen: frozenset[SlotState]) -> int:
        assert state not in seen, f"a cycle through {state}"
        if state not in order:
            nexts = [after for before, after in edges if before is state]
            order[state] = 1 + max((depth(n, seen | {state}) for n in nexts), default=0)
        return order[state]

    assert depth(SlotState.QUEUED, frozenset()) > 0
    assert set(order) == set(SlotState), "every state is reachable from queued"


@pytest.mark.parametrize(
    "call", [lambda flight, slot: flight.end(slot, "cancel"), lambda f, s: f.release(s)]
)
def test_an_attempt_is_not_ended_or_released_while_the_heartbeat_renews_it(
    call: Callable[[InFlight, Slot], Move | None],
) -> None:
    """The heartbeat holds ``gate`` across its renewal of the slots it read as renewable. An
    end or a release made meanwhile would write the attempt's end under that statement, which
    then finds the row gone and logs the lease lost: they wait for the gate instead."""
    flight = InFlight()
    slot = Slot(Job(pk=1, attempt=1, name="testapp.jobs.noop", queue="default"))
    flight.add(slot)
    slot.try_start()
    moved: list[Move | None] = []
    with flight.gate:  # as the heartbeat does, around its renewal
        assert flight.renewable() == [slot]
        mover = threading.Thread(target=lambda: moved.append(call(flight, slot)))
        mover.start()
        mover.join(timeout=0.3)
        assert mover.is_alive(), "it moved under the renewal"
        assert slot.state is SlotState.RUNNING
    mover.join(timeout=10)
    assert not mover.is_alive()
    assert moved[0] is not None
    assert moved[0].before is SlotState.RUNNING
    assert slot.state in (SlotState.ENDED, SlotState.RELEASED)
