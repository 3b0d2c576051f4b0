"""Steps for the workflow tests: each records a ``Hit`` labelled with what it received."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

from django.db import transaction

from django_leasejobs import Backoff, PermanentError, job
from django_leasejobs.runtime.context import JobContext

from .models import Hit

NO_WAIT = Backoff(base=0, cap=0, jitter="none")


def _hit(label: str, *values: Any) -> None:
    Hit.objects.create(label=label + (":" + json.dumps(list(values)) if values else ""))


@job
def fetch(url: str) -> str:
    _hit("fetch", url)
    return f"page of {url}"


@job
def parse(page: str) -> int:
    _hit("parse", page)
    return len(page)


@job
def store(size: int, where: str = "db") -> str:
    _hit("store", size, where)
    return f"{size} stored in {where}"


@job
def square(n: int) -> int:
    _hit("square", n)
    return n * n


@job
def total(squares: list[int], label: str = "total") -> int:
    _hit(label, squares)
    return sum(squares)


@job
def tick(label: str) -> str:
    """A step ignoring what came before (``tick.si(...)``)."""
    _hit(label)
    return label


@job(max_attempts=1)
def boom(label: str = "boom") -> None:
    """Ends dead at once."""
    _hit(label)
    raise PermanentError(f"{label} failed")


@job(takes_context=True)
def report(ctx: JobContext, *results: Any) -> dict[str, Any]:
    """Records what its parents returned, by step name."""
    _hit("report", ctx.parent_results, list(results))
    return dict(ctx.parent_results)


@job(takes_context=True)
def spawner(ctx: JobContext, n: int) -> int:
    """Adds a step after itself to its own run."""
    ctx.workflow.add(square.s(), after=[ctx.step])
    _hit("spawner", n)
    return n + 1


@job
def cleanup(label: str = "cleanup") -> None:
    _hit(label)


@job(max_attempts=1)
def fails_until_allowed(label: str) -> str:
    """Ends dead until a ``Hit`` labelled ``allow:<label>`` exists (a replay then succeeds)."""
    _hit(label)
    if not Hit.objects.filter(label=f"allow:{label}").exists():
        raise PermanentError(f"{label} not allowed yet")
    return label


CRASH_POINTS = ("handler", "before_commit", "after_commit")


@job(takes_context=True, max_attempts=10, backoff=NO_WAIT)
def crashing_square(ctx: JobContext, n: int, crash_at: str) -> int:
    """On its first attempt, kills its own worker (SIGKILL) at ``crash_at``: ``handler``
    (mid-run), ``before_commit`` (its completion, the step's move and the callback's release
    written, not committed) or ``after_commit`` (committed, the worker killed before it
    learns). Later attempts return ``n * n``."""
    _hit("crashing", n, ctx.attempt)
    if ctx.attempt > 1:
        return n * n
    if crash_at == "handler":
        os.kill(os.getpid(), signal.SIGKILL)
    with transaction.atomic():
        ctx.complete(n * n)
        if crash_at == "before_commit":
            os.kill(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
    return n * n
