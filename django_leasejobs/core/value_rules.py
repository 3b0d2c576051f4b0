"""What a queue name, an attempt budget, a timeout and a bearer token may be.

The rules a setting's value and an enqueue's option both follow, in one place, so that
``LEASEJOBS_QUEUES`` and ``@job(queue=...)`` refuse the same names and ``LEASEJOBS_MAX_ATTEMPTS``
the same budgets as ``max_attempts``: :mod:`.conf` reads the settings by them, :mod:`.validation`
checks enqueue input by them.
"""

from __future__ import annotations

import math
import re
from typing import Any

MAX_ATTEMPTS_LIMIT = 2**31 - 1
"""The ``max_attempts`` column is a 32-bit integer on every database."""

JITTER_MODES = ("full", "equal", "none")
SPAN_RELATIONSHIPS = ("link", "child", "none")
"""``LEASEJOBS_OTEL_SPAN_RELATIONSHIP``: how a process span relates to its send span."""

DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
"""A dotted module name (``fullmatch``)."""

QUEUE_NAME = re.compile(r"(?!.*:[0-9]+\Z)[A-Za-z0-9_.:-]{1,100}")
"""A queue name, matched whole (``fullmatch``: ``$`` would let a final newline through).

A trailing ``:<digits>`` is refused: ``runjobworker --queues mail:10`` reads it as a thread
budget (:data:`BUDGET_LIKE` finds such names made before that rule)."""
QUEUE_NAME_RULE = "1-100 of letters, digits, _ . : -, not ending in ':' and digits"
BUDGET_LIKE = re.compile(r".*:[0-9]+")
"""A name that ``--queues`` would read as a queue and its threads (``fullmatch``)."""

TOKEN_PATTERN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
"""RFC 6750's ``b64token``: what an ``Authorization: Bearer`` header can carry unquoted."""
TOKEN_MIN_LENGTH = 32
"""``secrets.token_urlsafe(32)`` gives 43 characters; a short token can be guessed."""


def is_timeout(value: Any) -> bool:
    """A handler timeout: ``None`` (none) or a positive, finite number of seconds."""
    if value is None:
        return True
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and value > 0
    )
