"""The shop's jobs, written as a user of the app writes them."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from django_leasejobs import Backoff, PermanentError, job

RETRY_AT_ONCE = Backoff(base=0, cap=0, jitter="none")
CHARGE_RETRY = Backoff(base=60, cap=60, jitter="none")


# No queue of its own: the registry is process-wide and the suite's system-check tests count
# the queues registered jobs use; checkout.place_order picks the queue at enqueue.
@job
def send_receipt(order_id: int, email: str, lines: list[Any] | None = None) -> str:
    return f"receipt {order_id} to {email} ({len(lines or [])} lines)"


@job(takes_context=True, backoff=CHARGE_RETRY, max_attempts=3)
def charge(ctx: Any, order_id: int, cents: int) -> dict[str, Any]:
    """Fails its first attempt (a flaky gateway); records the charge once."""
    if ctx.attempt == 1:
        raise ConnectionError("gateway timeout")
    with transaction.atomic():
        charged = ctx.first_time(f"charge:{order_id}")
    return {"order": order_id, "cents": cents, "charged": charged, "attempt": ctx.attempt}


@job(backoff=RETRY_AT_ONCE, max_attempts=2)
def broken(order_id: int) -> None:
    raise ValueError(f"order {order_id} is broken")


@job
def refuse(order_id: int) -> None:
    raise PermanentError(f"order {order_id} refused")


@job
def nightly_report() -> str:
    return "report"
