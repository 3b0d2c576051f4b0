"""Jobs that choose their own retries (``Retry``, ``Snooze``, ``retry_on``), sync and async.

Each records a ``Hit`` per run, so tests count runs; the label says which branch ran.
"""

from __future__ import annotations

import datetime as dt
import importlib
import importlib.util
from typing import Any

from django_leasejobs import Backoff, Retry, Snooze, job
from django_leasejobs.runtime.context import JobContext

from .models import Hit

NO_WAIT = Backoff(base=0, cap=0, jitter="none")


def _runs(ctx: JobContext, label: str) -> int:
    """Record this run; the number of runs so far, this one included."""
    Hit.objects.create(job_id=ctx.job_id, attempt=ctx.attempt, label=label)
    return Hit.objects.filter(job_id=ctx.job_id).count()


@job(takes_context=True, max_attempts=3)
def retry_once(ctx: JobContext, seconds: float = 3600) -> str:
    """Asks to be retried ``seconds`` later on its first run, then succeeds."""
    if _runs(ctx, "retry_once") == 1:
        raise Retry("the partner API said later", after=seconds)
    return f"done on attempt {ctx.attempt}"


@job(takes_context=True, max_attempts=2)
def retry_always(ctx: JobContext) -> None:
    _runs(ctx, "retry_always")
    raise Retry(after=dt.timedelta(minutes=5))


@job(takes_context=True)
def retry_at(ctx: JobContext, moment: str) -> None:
    """Asks to be retried at ``moment`` (an ISO datetime), every time."""
    _runs(ctx, "retry_at")
    raise Retry(at=dt.datetime.fromisoformat(moment))


@job(takes_context=True, max_attempts=1)
def snooze_once(ctx: JobContext, seconds: float = 3600) -> str:
    """Snoozes on its first run, then succeeds: one attempt in its budget is enough."""
    if _runs(ctx, "snooze_once") == 1:
        raise Snooze(after=seconds)
    return f"done on attempt {ctx.attempt}"


@job(takes_context=True, max_attempts=1)
def snooze_always(ctx: JobContext) -> None:
    _runs(ctx, "snooze_always")
    raise Snooze(after=0)


@job(takes_context=True)
def snooze_until(ctx: JobContext, moment: str) -> None:
    _runs(ctx, "snooze_until")
    raise Snooze(at=dt.datetime.fromisoformat(moment))


@job(takes_context=True, retry_on=(TimeoutError, ConnectionError), max_attempts=3, backoff=NO_WAIT)
def only_network(ctx: JobContext, kind: str) -> None:
    """Raises ``kind``: ``timeout`` and ``reset`` (a ConnectionError) are retried, not ``value``."""
    _runs(ctx, kind)
    if kind == "timeout":
        raise TimeoutError("the partner API timed out")
    if kind == "reset":
        raise ConnectionResetError("connection reset by peer")
    raise ValueError("bad input: retrying cannot help")


@job(
    takes_context=True,
    retry_on={ConnectionError: Backoff(base=500, cap=500, jitter="none"), TimeoutError: None},
    backoff=Backoff(base=7, cap=7, jitter="none"),
)
def own_backoffs(ctx: JobContext, kind: str) -> None:
    _runs(ctx, kind)
    raise (ConnectionRefusedError if kind == "refused" else TimeoutError)(kind)


# async def: the worker awaits them on its event loop (runtime/async_runner.py).


async def _arun(ctx: JobContext, label: str) -> int:
    await Hit.objects.acreate(job_id=ctx.job_id, attempt=ctx.attempt, label=label)
    return await Hit.objects.filter(job_id=ctx.job_id).acount()


@job(takes_context=True, max_attempts=3)
async def async_retry_once(ctx: JobContext, seconds: float = 3600) -> str:
    if await _arun(ctx, "async_retry_once") == 1:
        raise Retry(after=seconds)
    return f"done on attempt {ctx.attempt}"


@job(takes_context=True, max_attempts=1)
async def async_snooze_once(ctx: JobContext, seconds: float = 3600) -> str:
    if await _arun(ctx, "async_snooze_once") == 1:
        raise Snooze(after=seconds)
    return f"done on attempt {ctx.attempt}"


@job(takes_context=True, retry_on=(TimeoutError,), max_attempts=3, backoff=NO_WAIT)
async def async_only_timeouts(ctx: JobContext, kind: str) -> None:
    await _arun(ctx, kind)
    if kind == "timeout":
        raise TimeoutError("slow")
    raise KeyError(kind)


# django.tasks tasks (Django 6, or the django-tasks backport on 5.2) raise them the same way.
_FRAMEWORK = "django.tasks" if importlib.util.find_spec("django.tasks") else "django_tasks"
task: Any = (
    importlib.import_module(_FRAMEWORK).task if importlib.util.find_spec(_FRAMEWORK) else None
)

if task is not None:

    @task(takes_context=True)
    def task_retry_once(context: Any, seconds: float = 3600) -> str:
        if context.attempt == 1:
            raise Retry(after=seconds)
        return f"done on attempt {context.attempt}"

    @task(takes_context=True)
    def task_snooze_once(context: Any, seconds: float = 3600) -> str:
        if context.attempt == 1:
            raise Snooze(after=seconds)
        return f"done on attempt {context.attempt}"
