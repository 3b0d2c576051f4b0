"""The code under test: placing an order enqueues its jobs in the order's transaction."""

from __future__ import annotations

from django.db import transaction

from .jobs import charge, send_receipt


def place_order(order_id: int, email: str, cents: int) -> None:
    with transaction.atomic():
        send_receipt.enqueue(order_id, email=email, lines=[("tea", cents)], queue="mail")
        charge.enqueue(order_id, cents, delay=300)
