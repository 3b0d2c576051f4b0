"""A fixed log-spaced histogram of handler runtimes: counts that add, percentiles that merge.

Each worker counts its runs in these buckets and adds the counts to one row per job name and
hour; any set of rows (every worker, every hour of a window) merges by adding counts, which
exact percentiles cannot do. Bucket ``i`` (1 to ``BUCKETS - 2``) holds runtimes from
``FIRST * RATIO ** (i - 1)`` up to ``FIRST * RATIO ** i``; bucket 0 holds runs shorter than
``FIRST``, the last one runs of a day or more. A percentile read back is the geometric middle
of its bucket (never above the largest run seen), so it is within a factor ``sqrt(RATIO)``
(about 19 %) of the exact one: plenty to choose a lease, at a fixed 48 counters a row.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

BUCKETS = 48
FIRST = 0.01
"""Seconds: runs shorter than this share bucket 0 (their lease advice is the same)."""
RATIO = math.sqrt(2.0)
LAST_START = FIRST * RATIO ** (BUCKETS - 2)
"""Where the overflow bucket starts: about 23 hours."""


def field_names() -> list[str]:
    """The model's counter columns, in bucket order: ``h00`` to ``h47``."""
    return [f"h{index:02d}" for index in range(BUCKETS)]


def index(seconds: float) -> int:
    """The bucket a runtime falls in."""
    if not seconds >= FIRST:  # NaN too
        return 0
    position = math.floor(2.0 * math.log2(seconds / FIRST)) + 1
    return min(max(position, 1), BUCKETS - 1)


def bounds(bucket: int) -> tuple[float, float]:
    """The runtimes bucket ``bucket`` holds: ``[low, high)`` (high is inf for the last)."""
    if bucket == 0:
        return 0.0, FIRST
    high = math.inf if bucket == BUCKETS - 1 else FIRST * RATIO**bucket
    return FIRST * RATIO ** (bucket - 1), high


def counts(durations: Iterable[float]) -> list[int]:
    """Count runtimes into a fresh histogram."""
    result = [0] * BUCKETS
    for seconds in durations:
        result[index(seconds)] += 1
    return result


def merge(into: list[int], other: Sequence[int]) -> None:
    """Add another histogram's counts into ``into``."""
    for position, count in enumerate(other):
        into[position] += count


def percentile(histogram: Sequence[int], fraction: float, largest: float) -> float | None:
    """The nearest-rank ``fraction`` percentile (0.99 for p99) read from bucket counts.

    ``largest`` is the longest run seen: it bounds the estimate (the last bucket has no upper
    edge) and is returned for any percentile that falls in the overflow bucket. ``None`` when
    nothing was counted.
    """
    total = sum(histogram)
    if total == 0:
        return None
    rank = max(1, math.ceil(fraction * total))
    seen = 0
    for bucket, count in enumerate(histogram):
        seen += count
        if seen >= rank:
            return min(_middle(bucket, largest), largest)
    return largest  # unreachable: the ranks add up to total


def _middle(bucket: int, largest: float) -> float:
    low, high = bounds(bucket)
    if bucket == 0:
        return FIRST / 2
    if math.isinf(high):
        return largest
    return math.sqrt(low * high)
