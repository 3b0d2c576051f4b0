"""Jobs the test suite enqueues. They live in an installed app so worker subprocesses have them."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

from django.db import transaction

from django_leasejobs import Backoff, PermanentError, job
from django_leasejobs.runtime.context import JobContext

from .models import Hit


@job(api=True)
def noop() -> None:
    """Does nothing: throughput and protocol tests."""


@job
def takes_anything(*args: object, **kwargs: object) -> None:
    """Takes any arguments: tests of how arguments are stored."""


@job
def add(a: int, b: int) -> int:
    return a + b


@job(takes_context=True)
def record(ctx: JobContext, label: str = "") -> None:
    Hit.objects.create(job_id=ctx.job_id, attempt=ctx.attempt, label=label)


@job(takes_context=True, max_attempts=3, backoff=Backoff(base=0, cap=0, jitter="none"))
def always_fails(ctx: JobContext) -> None:
    raise RuntimeError(f"boom on attempt {ctx.attempt}")


@job(takes_context=True, max_attempts=5, backoff=Backoff(base=0, cap=0, jitter="none"))
def flaky(ctx: JobContext, succeed_on: int = 3) -> str:
    if ctx.attempt < succeed_on:
        raise RuntimeError(f"flaky failure on attempt {ctx.attempt}")
    return f"ok on attempt {ctx.attempt}"


@job
def permanent() -> None:
    raise PermanentError("this input can never work")


@job(permanent=(KeyError,))
def missing_key() -> None:
    raise KeyError("nope")


@job(takes_context=True)
def sleep(ctx: JobContext, seconds: float, label: str = "") -> None:
    """Sleeps in small steps, stops early when the lease is lost; records its run at the end."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not ctx.lease_lost:
        time.sleep(0.02)
    Hit.objects.create(job_id=ctx.job_id, attempt=ctx.attempt, label=label or "slept")


@job(takes_context=True)
def effect_once(ctx: JobContext, key: str) -> None:
    with transaction.atomic():
        if ctx.first_time(key):
            Hit.objects.create(job_id=ctx.job_id, attempt=ctx.attempt, label=key)


@job(takes_context=True)
def exactly_once(ctx: JobContext, label: str) -> None:
    with transaction.atomic():
        Hit.objects.create(job_id=ctx.job_id, attempt=ctx.attempt, label=label)
        ctx.complete("done")


@job
def small_result() -> dict[str, bool]:
    """The benchmark's job that returns a value: a completion that stores a result."""
    return {"ok": True}


@job
def returns_object() -> object:
    return object()


@job
def returns_undecodable_name() -> str:
    """A file name in a foreign encoding, as ``os.fsdecode`` gives it: a lone surrogate."""
    return os.fsdecode(b"caf\xe9.txt")


@job(queue="other", priority=5)
def other_queue() -> None:
    pass


@job(lease=5)
def short_lease() -> None:
    pass


@job(takes_context=True)
def observe_transaction(ctx: JobContext) -> None:
    """Records whether the worker left a transaction open around the handler."""
    connection = transaction.get_connection()
    Hit.objects.create(
        job_id=ctx.job_id,
        attempt=ctx.attempt,
        label=f"atomic={connection.in_atomic_block} autocommit={connection.get_autocommit()}",
    )


@job(takes_context=True)
def slow_fail_first(ctx: JobContext, seconds: float, label: str = "") -> str:
    """Sleeps without watching the lease, records its run, then fails on attempt 1 only.

    A paused worker running it wakes up and tries to report a failure with a stale token.
    """
    time.sleep(seconds)
    Hit.objects.create(job_id=ctx.job_id, attempt=ctx.attempt, label=label or "slow")
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails")
    return f"ok on attempt {ctx.attempt}"


@job
def exits() -> None:
    """Calls sys.exit() in a handler: its attempt fails like any error; the thread survives."""
    raise SystemExit(3)


@job
def interrupts() -> None:
    """Raises KeyboardInterrupt: let through in the main thread (as Django's backends do), an
    ordinary failure in a worker's pool thread."""
    raise KeyboardInterrupt("handler interrupted")


@job
def terminate_worker() -> None:
    """Sends SIGTERM to its own process, as an orchestrator stopping the worker would."""
    os.kill(os.getpid(), signal.SIGTERM)


@job
def wait_until_final(job_ids: list[int], timeout: float = 60.0) -> None:
    """Stays in flight until the given jobs are finished (keeps a --burst worker busy)."""
    from django_leasejobs.models import FINAL, Job

    deadline = time.monotonic() + timeout
    while Job.objects.filter(pk__in=job_ids).exclude(status__in=FINAL).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"jobs {job_ids} did not finish within {timeout} s")
        time.sleep(0.02)


# async def handlers: the worker runs them on its event loop (runtime/async_runner.py).

NO_WAIT = Backoff(base=0, cap=0, jitter="none")


@job
async def async_add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


@job
async def nap(seconds: float = 1.0) -> None:
    """Awaits ``seconds`` and does nothing else: the async benchmark's job."""
    await asyncio.sleep(seconds)


@job(takes_context=True)
async def async_record(ctx: JobContext, label: str = "") -> None:
    """Records its run through the async ORM."""
    await Hit.objects.acreate(job_id=ctx.job_id, attempt=ctx.attempt, label=label)


@job(takes_context=True, max_attempts=5, backoff=NO_WAIT)
async def async_flaky(ctx: JobContext, succeed_on: int = 2) -> str:
    if ctx.attempt < succeed_on:
        raise RuntimeError(f"async failure on attempt {ctx.attempt}")
    return f"async ok on attempt {ctx.attempt}"


@job(takes_context=True)
async def async_sleep(ctx: JobContext, seconds: float, label: str = "") -> None:
    """Awaits in small steps, stops early when the lease is lost; records its run at the end."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not ctx.lease_lost:
        await asyncio.sleep(0.02)
    await Hit.objects.acreate(job_id=ctx.job_id, attempt=ctx.attempt, label=label or "slept")


@job(takes_context=True, max_attempts=3, backoff=NO_WAIT)
async def async_raises(ctx: JobContext, kind: str) -> None:
    """Raises what a handler must never get past the event loop with."""
    errors: dict[str, BaseException] = {
        "keyboard": KeyboardInterrupt("handler interrupted"),
        "exit": SystemExit(3),
        "value": ValueError("bad value"),
    }
    raise errors[kind]


@job
async def async_thread_name() -> str:
    """Returns the name of the thread it ran on (the worker's event loop, for a worker)."""
    return threading.current_thread().name


# Timeouts and cancelling running jobs (runtime/watchdog.py).


@job(takes_context=True, timeout=0.5, max_attempts=2, backoff=NO_WAIT)
def times_out(ctx: JobContext, seconds: float = 30.0, label: str = "") -> str:
    """On its first attempt ignores ``ctx.cancelled`` and sleeps past its timeout (a stuck
    handler), then records its run and returns; later attempts return at once."""
    if ctx.attempt == 1:
        time.sleep(seconds)
    Hit.objects.create(job_id=ctx.job_id, attempt=ctx.attempt, label=label or "ran")
    return f"attempt {ctx.attempt}"


@job(takes_context=True, timeout=0.3, max_attempts=1)
def stops_at_timeout(ctx: JobContext) -> None:
    """Watches ``ctx.cancelled``, as a long loop should, and records why it stopped."""
    ctx.wait_cancelled(30)
    Hit.objects.create(job_id=ctx.job_id, attempt=ctx.attempt, label=f"{ctx.cancel_reason}")


@job(takes_context=True)
def until_cancelled(ctx: JobContext, seconds: float = 30.0) -> str:
    """Runs until cancelled (or ``seconds``), checking the flag, and records why it stopped."""
    ctx.wait_cancelled(seconds)
    Hit.objects.create(job_id=ctx.job_id, attempt=ctx.attempt, label=f"{ctx.cancel_reason}")
    return "finished"


@job(takes_context=True)
def ignores_cancel(ctx: JobContext, seconds: float = 1.0) -> str:
    """Sleeps ``seconds`` whatever happens, then records its run and returns."""
    time.sleep(seconds)
    Hit.objects.create(job_id=ctx.job_id, attempt=ctx.attempt, label=f"{ctx.cancel_reason}")
    return "finished"


@job(takes_context=True, timeout=0.3, max_attempts=1)
async def async_times_out(ctx: JobContext, seconds: float = 30.0) -> str:
    """Awaits past its timeout: the worker cancels its task at the deadline."""
    await asyncio.sleep(seconds)
    return "finished"


@job(takes_context=True)
async def async_until_cancelled(ctx: JobContext, seconds: float = 30.0) -> str:
    """Awaits until the worker cancels its task (or ``seconds``)."""
    await asyncio.sleep(seconds)
    return "finished"


@job(dedupe_key=True)
def sync_user(user_id: int, full: bool = False) -> None:
    """Dedupe on the whole call: sync_user(1) and sync_user(user_id=1) are one job."""


@job(dedupe_key="user:{user_id}", dedupe_period=3600, on_conflict="replace")
def debounced(user_id: int, note: str = "") -> None:
    """Debounce: one pending job per user and hour; a later call moves it and its arguments."""


@job(dedupe_key="report:{day}", dedupe_states=["pending", "running", "failed", "succeeded"])
def daily_report(day: str) -> None:
    """Once per day, even after it succeeded."""


# Flow limits (docs/flow-control.md): the claim enforces them from keys stored at enqueue.


@job(concurrency_key="customer:{customer_id}", concurrency_limit=2)
def per_customer(customer_id: int, seconds: float = 0.0) -> None:
    """At most two at once per customer; sleeps so that runs overlap under a worker."""
    time.sleep(seconds)


@job(concurrency_limit=1)
def one_at_a_time(seconds: float = 0.0) -> None:
    """At most one at once of this job name, whatever its arguments."""
    time.sleep(seconds)


@job(concurrency_key=lambda tenant, **_: f"tenant:{tenant}", concurrency_limit=1)
def per_tenant(tenant: str, seconds: float = 0.0) -> None:
    """The key computed by a callable at enqueue."""
    time.sleep(seconds)


@job(rate_limit="5/m")
def throttled(n: int = 0) -> None:
    """At most five starts a minute, over all workers."""


@job(rate_limit="3/h", rate_key="account:{account}")
def throttled_per_account(account: str) -> None:
    """At most three starts an hour per account."""


@job(concurrency_key="customer:{customer_id}", concurrency_limit=1, rate_limit="4/m")
def limited_both(customer_id: int) -> None:
    """One at once per customer, and four starts a minute for the job name."""


# Fair ordering (docs/fairness.md): jobs of different accounts interleave in the claim order.


@job(fair_key="account:{account}")
def per_account(account: str, n: int = 0) -> None:
    """One account's backlog does not hold the others' jobs behind it."""


@job
def account_work(account: str, n: int = 0) -> None:
    """``per_account`` without a fair key: the benchmark's reference (benchmarks/fairness.py)."""


@job(fair_key="account:{account}", concurrency_key="account:{account}", concurrency_limit=1)
def per_account_one_at_a_time(account: str, n: int = 0) -> None:
    """Fair, and at most one at once per account."""


@job(fair_key="account:{account}", rate_limit="2/m", rate_key="account:{account}")
def per_account_throttled(account: str, n: int = 0) -> None:
    """Fair, and at most two starts a minute per account."""


@job(
    concurrency_key="first:{items[0]}",
    concurrency_limit=1,
    rate_limit="100/m",
    rate_key="n:{n:d}",
)
def keyed_by_shape(items: list[int], n: int = 0) -> None:
    """Keys that only some argument types can fill (the refusal tests)."""


@job(rate_limit="120/m")
def rate_120(n: int = 0) -> None:
    """120 starts a minute over all workers (the rate accuracy test)."""


# Progress reports (docs/progress.md): ``steps`` reports, the last one ``done == total``.
@job(takes_context=True)
def report_progress(ctx: JobContext, steps: int = 3, atomic: bool = False) -> int:
    for done in range(1, steps + 1):
        if atomic:
            with transaction.atomic():
                ctx.progress(done, steps, f"step {done}")
        else:
            ctx.progress(done, steps, f"step {done}")
    return steps


@job(takes_context=True)
async def async_report_progress(ctx: JobContext, steps: int = 3) -> int:
    for done in range(1, steps + 1):
        ctx.progress(done, steps, f"step {done}")
        await asyncio.sleep(0)
    return steps


@job(takes_context=True, max_attempts=1)
def progress_then_fail(ctx: JobContext) -> None:
    ctx.progress(1, 2, "half way")
    ctx.progress(2, 2, "failing")
    raise RuntimeError("broke after reporting")


# Each job's own logs (docs/observability.md): its records, a library's, at every level.
def library_call(n: int) -> None:
    import logging

    logging.getLogger("testlib.client").info("library call %s", n)


@job(takes_context=True, max_attempts=3, backoff=NO_WAIT)
def logs_lines(ctx: JobContext, lines: int = 1, fail_attempts: int = 0, size: int = 0) -> int:
    import logging

    log = logging.getLogger("testapp.work")
    log.debug("debug line")
    for n in range(lines):
        log.info("line %s of attempt %s%s", n, ctx.attempt, "x" * size)
    library_call(ctx.attempt)
    if ctx.attempt <= fail_attempts:
        log.error("failing attempt %s", ctx.attempt)
        raise RuntimeError(f"attempt {ctx.attempt} broke")
    return lines


@job(takes_context=True)
async def async_logs_lines(ctx: JobContext, lines: int = 1) -> int:
    import logging

    log = logging.getLogger("testapp.work")
    for n in range(lines):
        log.info("async line %s", n)
        await asyncio.sleep(0)

    async def child() -> None:
        log.warning("from a child task")

    await asyncio.gather(child())
    return lines


@job(takes_context=True, timeout=0.3, max_attempts=1)
def logs_until_timeout(ctx: JobContext) -> None:
    import logging

    logging.getLogger("testapp.work").warning("waiting")
    ctx.wait_cancelled(30)
    logging.getLogger("testapp.work").warning("stopped: %s", ctx.cancel_reason)


@job(takes_context=True, timeout=0.3, max_attempts=1)
async def async_logs_until_timeout(ctx: JobContext) -> None:
    import logging

    logging.getLogger("testapp.work").warning("awaiting")
    await asyncio.sleep(30)


@job
def reconfigures_logging() -> None:
    """A job that sets the project's logging up again while the worker runs, as
    ``dictConfig`` with a root does: the root's handlers are replaced."""
    import logging.config

    logging.config.dictConfig(
        {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}
    )


@job
def log_line() -> None:
    """The observability benchmark's job: one INFO line, which each job's own logs keep."""
    import logging

    logging.getLogger("testapp.bench").info("one line")


@job(takes_context=True, max_attempts=3, backoff=NO_WAIT)
def import_customers(ctx: JobContext, rows: int) -> int:
    """The admin's screenshot of a job page with its logs and progress (tests/admin)."""
    import logging

    log = logging.getLogger("testapp.imports")
    log.info("reading %s rows from customers.csv", rows)
    for done in range(0, rows + 1, rows // 4):
        ctx.progress(done, rows, f"row {done}")
    if ctx.attempt == 1:
        log.warning("row %s: the CRM answered 503, giving up on this attempt", rows)
        raise ConnectionError("CRM unavailable (503)")
    log.info("imported %s customers", rows)
    return rows


@job
def enqueues_child(target: str) -> int:
    """Enqueues ``noop`` to queue ``target`` from its handler; returns the child's id (shards)."""
    return noop.using(queue=target).enqueue().pk


_GIVEN_LOGS: list[object] = []


@job(takes_context=True)
def log_row_given(ctx: JobContext) -> None:
    """The observability benchmark's ceiling for kept logs: no record is made or captured, the
    attempt's log buffer is handed over already holding the row ``log_line`` keeps, so the
    worker writes the same rows with its completions and nothing else of the logs' cost."""
    if not _GIVEN_LOGS:
        import logging

        from django_leasejobs.runtime.job_logs import Buffer

        buffer = Buffer(logging.INFO)
        record = logging.LogRecord("testapp.bench", logging.INFO, __file__, 0, "one line", (), None)
        buffer.add(record)
        _GIVEN_LOGS.append(buffer)
    ctx.logs = _GIVEN_LOGS[0]
