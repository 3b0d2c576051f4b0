"""Steps for the workflow tests: each records a ``Hit`` labelled with what it received."""

from __future__ import annotations

import json
from typing import Any

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
