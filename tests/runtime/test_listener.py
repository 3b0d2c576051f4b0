"""The LISTEN connection's failures (``runtime/listener.py``, ``runtime/wakeup.py``): a session
the server ends (a failover, an administrator, a restart) is reopened at the next wait, and
the LISTEN thread outlives any error, so a worker goes back to waking on NOTIFY by itself.

PostgreSQL only: the session is ended with ``pg_terminate_backend``, as a failover ends it.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from django.db import connection, connections
from testapp import jobs

from django_leasejobs.core import notify
from django_leasejobs.runtime.listener import Listener
from django_leasejobs.runtime.wakeup import Wakeup

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="LISTEN/NOTIFY is PostgreSQL's"),
    pytest.mark.django_db(transaction=True),
]

LISTENS = [f"LISTEN {notify.CHANNEL}", f"LISTEN {notify.CANCEL_CHANNEL}"]
"""The listener session's last statement: it listens to the queue and the cancel channels."""


def end_listening_sessions() -> None:
    """Terminate every LISTEN session of this database and wait until each is gone."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
            "WHERE query = ANY(%s) AND pid <> pg_backend_pid() AND datname = current_database()",
            [LISTENS],
        )
        assert cursor.fetchall(), "no listening session was found"


@pytest.fixture
def listener() -> Iterator[Listener]:
    listener = Listener()
    listener.start()
    assert listener.connected()
    yield listener
    listener.close()


def test_a_session_ended_between_waits_is_reopened(listener: Listener) -> None:
    end_listening_sessions()
    for _ in range(3):  # the LISTEN thread's next waits: none may raise
        assert listener.wait(0.2) == set()
    assert listener.connected()
    jobs.noop.enqueue()
    assert listener.wait(5) == {"default"}


def test_a_goodbye_read_by_the_last_wait_leaves_the_next_one_reopening(
    listener: Listener,
) -> None:
    """The LISTEN thread died here after a failover ("'NoneType' object has no attribute
    'pgconn'"): the last wait read the server's goodbye (its FATAL message) and returned; the
    next found the socket closed, dropped the connection, then asked it for its socket."""
    end_listening_sessions()
    listener._conn.pgconn.consume_input()  # the goodbye, read as the last wait's read reads it
    for _ in range(3):
        assert listener.wait(0.2) == set()
    assert listener.connected()
    jobs.noop.enqueue()
    assert listener.wait(5) == {"default"}


def test_the_listen_thread_survives_its_session_ending_and_wakes_the_loop_again() -> None:
    wake, stopping = threading.Event(), threading.Event()
    wakeup = Wakeup(
        queues=None, poll=0.1, wake=wake, stopping=stopping, request_cancel=lambda ids: None
    )
    wakeup.start()
    try:
        end_listening_sessions()
        deadline = time.monotonic() + 10
        # Reopened: a new session listens (the old one ended), and the thread is still alive.
        while time.monotonic() < deadline and not (wakeup.listener and wakeup.listener.connected()):
            time.sleep(0.05)
        time.sleep(0.5)  # several of the thread's waits on the reopened session
        assert wakeup._thread is not None
        assert wakeup._thread.is_alive()
        wake.clear()
        jobs.noop.enqueue()
        assert wake.wait(5), "the reopened LISTEN did not wake the loop"
    finally:
        stopping.set()
        wakeup.stop()


@pytest.fixture
def nowhere(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An alias of this database on a port where no server listens (a server down)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setitem(
        connections.settings,
        "nowhere",
        {**connection.settings_dict, "HOST": "127.0.0.1", "PORT": str(port)},
    )
    yield "nowhere"
    del connections["nowhere"]


def test_a_server_that_cannot_be_reached_is_tried_again_with_backoff_not_at_every_wait(
    nowhere: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Through a failover the worker polls every --poll seconds: the listener used to try a
    connection (and log its error, several lines for libpq's multi-host string) at each
    wait, ten a second at --poll 0.1, while every other thread backed off."""
    listener = Listener(nowhere)
    caplog.set_level(logging.INFO, logger="django_leasejobs")
    try:
        for _ in range(20):  # microseconds apart: well inside the first backoff
            assert listener.wait(0) == set()
        failed = [r.getMessage() for r in caplog.records if "notify.listen_failed" in r.msg]
        assert len(failed) == 1, failed
        assert failed[0].startswith("notify.listen_failed errors=1 retry_in=0.25 error=")
        assert "\n" not in failed[0]

        assert listener.wait(0.3) == set()  # the backoff passes; the next wait tries again
        assert listener.wait(0) == set()
        failed = [r.getMessage() for r in caplog.records if "notify.listen_failed" in r.msg]
        assert [m.split(" error=")[0] for m in failed] == [
            "notify.listen_failed errors=1 retry_in=0.25",
            "notify.listen_failed errors=2 retry_in=0.50",
        ]

        # The server is back (here: the alias points at it again): listening resumes after
        # the backoff, and the count starts over.
        connections[nowhere].settings_dict.update(
            HOST=connection.settings_dict["HOST"], PORT=connection.settings_dict["PORT"]
        )
        assert listener.wait(0.6) == set()
        assert listener.wait(0) == set()
        assert listener.connected()
        assert "notify.listen_restored errors=2" in caplog.text
        jobs.noop.enqueue()
        assert listener.wait(5) == {"default"}
    finally:
        listener.close()
