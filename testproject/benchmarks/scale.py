"""Section ``scale``: what an operator's pages and probes cost on a table of millions of jobs.

Runs in a ``benchmark_part`` subprocess pointed at a database ``scale_fill`` filled. Each face
an operator or a probe opens (``stats.collect()``, the health view, ``checkjobs``, the admin
pages) is timed ``runs`` times after one warm-up, and its median kept: the machine the figures
come from is shared, so single runs are noisy. Every SQL statement a face sends is recorded
(count, and the slowest), and with ``explain`` the slow ones are run again under
``EXPLAIN (ANALYZE, BUFFERS)`` so docs/benchmarks.md can show why a figure is what it is.
"""

from __future__ import annotations

import io
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from typing import Any

from django.core.management import call_command
from django.db import connection, transaction
from django.test import Client

from django_leasejobs import protocol
from django_leasejobs.models import DeadLetter, Job, Schedule
from django_leasejobs.reports import stats

ADMIN_USER = "scale-benchmark"
EXPLAIN_OVER_MS = 20.0
"""A statement slower than this gets its plan shown (with ``explain``)."""


class Recorder:
    """Every statement a face sends while recording: its SQL, parameters and duration."""

    def __init__(self) -> None:
        self.statements: list[tuple[float, str, Any]] = []

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, ctx: Any
    ) -> Any:
        start = time.perf_counter()
        try:
            return execute(sql, params, many, ctx)
        finally:
            self.statements.append(((time.perf_counter() - start) * 1000, sql, params))


@contextmanager
def recording() -> Iterator[Recorder]:
    recorder = Recorder()
    with connection.execute_wrapper(recorder):
        yield recorder


def _client() -> Client:
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(
        username=ADMIN_USER, defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    return client


def _page(client: Client, url: str, ok: tuple[int, ...] = (200,)) -> Callable[[], None]:
    def get() -> None:
        response = client.get(url)
        if response.status_code not in ok:
            raise RuntimeError(f"GET {url} answered {response.status_code}")

    return get


def _checkjobs() -> None:
    """The probe as cron runs it; exit 1 (unhealthy) is a result, not a failure."""
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        try:
            call_command("checkjobs", "--max-due-age", "100d")
        except SystemExit as exit_:
            if exit_.code not in (0, 1, None):
                raise


def _schedule() -> Schedule:
    """One schedule with jobs, so the schedule pages have something to show."""
    schedule = Schedule.objects.order_by("pk").first()
    if schedule is None:
        schedule = Schedule.objects.create(
            name="scale-report", cron="*/5 * * * *", job="testapp.jobs.noop"
        )
    return schedule


def faces() -> dict[str, Callable[[], Any]]:
    """What is timed, in the order of the table."""
    client = _client()
    job = Job.objects.order_by("-pk").only("pk").first()
    letter = DeadLetter.objects.order_by("-pk").only("pk").first()
    schedule = _schedule()
    admin = "/admin/django_leasejobs"
    faces: dict[str, Callable[[], Any]] = {
        "stats.collect()": stats.collect,
        # 503 is a full answer too: the filled table has due jobs and no worker serves them.
        "health view": _page(client, "/jobs/health/", ok=(200, 503)),
        "checkjobs": _checkjobs,
        "admin job list": _page(client, f"{admin}/job/"),
        "admin job list, pending": _page(client, f"{admin}/job/?status__exact=pending"),
        "admin job list, queue": _page(client, f"{admin}/job/?queue=emails"),
        "admin job list, search": _page(client, f"{admin}/job/?q=scale_3"),
        # A registered name no row carries, and a word no job has: without an index on the
        # name either reads the whole table.
        "admin job list, rare name": _page(client, f"{admin}/job/?name=testapp.jobs.record"),
        "admin job list, rare word": _page(client, f"{admin}/job/?q=nosuchword"),
        "admin job detail": _page(client, f"{admin}/job/{job.pk if job else 1}/change/"),
        "admin dashboard": _page(client, f"{admin}/job/dashboard/"),
        "admin dead letters": _page(client, f"{admin}/deadletter/"),
        "admin dead-letter groups": _page(client, f"{admin}/deadletter/groups/"),
        "admin schedules": _page(client, f"{admin}/schedule/"),
        "admin schedule detail": _page(client, f"{admin}/schedule/{schedule.pk}/change/"),
        "admin schedule occurrences": _page(client, f"{admin}/schedule/{schedule.pk}/occurrences/"),
    }
    if letter is not None:
        faces["admin dead-letter detail"] = _page(client, f"{admin}/deadletter/{letter.pk}/change/")
    faces["claim of 100"] = claim_and_complete
    return faces


def claim_and_complete() -> float:
    """One claim of 100 (timed, in ms), then their completion (not timed), as a worker does."""
    start = time.perf_counter()
    jobs = protocol.claim("scale-benchmark", batch=100)
    took = (time.perf_counter() - start) * 1000
    protocol.complete_many([(job.pk, job.attempt) for job in jobs], finished_by="scale")
    return took


def time_faces(runs: int, explain: bool) -> dict[str, Any]:
    """Per face: the median ms, every run's ms, statements sent, the slowest; plans if asked."""
    figures: dict[str, Any] = {}
    for label, face in faces().items():
        face()  # warm-up: caches, the first connection, template compilation
        times, recorder = [], Recorder()
        for _ in range(runs):
            recorder = Recorder()
            with connection.execute_wrapper(recorder):
                start = time.perf_counter()
                own = face()
                took = (time.perf_counter() - start) * 1000
            times.append(own if isinstance(own, float) else took)
        slowest = max(recorder.statements, default=(0.0, "", None))
        figures[label] = {
            "median_ms": statistics.median(times),
            "runs_ms": times,
            "statements": len(recorder.statements),
            "slowest_ms": slowest[0],
            "slowest_sql": slowest[1],
        }
        if explain:
            figures[label]["plans"] = plans(recorder)
    return figures


def plans(recorder: Recorder) -> list[dict[str, Any]]:
    """EXPLAIN (ANALYZE, BUFFERS) of each slow SELECT, in a transaction rolled back."""
    out = []
    for took, sql, params in recorder.statements:
        if took < EXPLAIN_OVER_MS or not sql.lstrip().upper().startswith(("SELECT", "WITH")):
            continue
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
            text = "\n".join(row[0] for row in cursor.fetchall())
            transaction.set_rollback(True)
        out.append({"ms": took, "sql": sql, "params": repr(params), "plan": text})
    return out


def contents() -> dict[str, int]:
    """Rows per status (and due pending), counted once per run: what the figures were taken on."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT status, count(*), count(*) FILTER (WHERE run_at <= STATEMENT_TIMESTAMP()) "
            "FROM django_leasejobs_job GROUP BY status"
        )
        rows = cursor.fetchall()
    found = {f"rows_{status}": count for status, count, _ in rows}
    found["rows_due"] = sum(due for status, _, due in rows if status in ("pending", "failed"))
    return found


def run(target: Any, o: dict[str, Any]) -> dict[str, Any]:
    """The section: contents, every face's timings and (if asked) pruning under claims."""
    from . import scale_prune

    figures: dict[str, Any] = {"contents": contents()}
    if o["faces"]:
        figures["faces"] = time_faces(o["runs"], o["explain"])
    if o["prune_rows"]:
        figures["prune"] = scale_prune.prune_under_claims(target, o["prune_rows"])
    return figures
