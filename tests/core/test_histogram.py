"""The runtime histogram: percentiles read from bucket counts stay within one bucket's error."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_leasejobs.core import histogram

RUNTIMES = st.lists(
    st.one_of(
        st.floats(min_value=0, max_value=0.02),  # around the first bucket's edge
        st.floats(min_value=0, max_value=600),
        st.floats(min_value=0, max_value=200_000),  # into the overflow bucket
    ),
    min_size=1,
    max_size=300,
)
FRACTIONS = (0.5, 0.95, 0.99, 1.0)


def exact(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


@pytest.mark.fuzz
@given(RUNTIMES)
def test_a_percentile_is_in_the_exact_ones_bucket_and_within_its_error(values) -> None:
    counts = histogram.counts(values)
    largest = max(values)
    for fraction in FRACTIONS:
        true = exact(values, fraction)
        estimate = histogram.percentile(counts, fraction, largest)
        assert estimate is not None
        bucket = histogram.index(true)
        assert histogram.index(estimate) == bucket, (fraction, true, estimate)
        assert estimate <= largest
        if 0 < bucket < histogram.BUCKETS - 1:
            error = max(estimate / true, true / estimate)
            assert error <= math.sqrt(histogram.RATIO) * (1 + 1e-9), (fraction, true, estimate)
        elif bucket == 0:
            assert estimate < histogram.FIRST
        else:
            assert estimate == largest


@pytest.mark.fuzz
@given(RUNTIMES, RUNTIMES)
def test_counts_merge_by_adding(first, second) -> None:
    merged = histogram.counts(first)
    histogram.merge(merged, histogram.counts(second))
    assert merged == histogram.counts(first + second)
    assert sum(merged) == len(first) + len(second)


def test_buckets_tile_the_line_without_gaps() -> None:
    assert histogram.bounds(0) == (0.0, histogram.FIRST)
    for bucket in range(1, histogram.BUCKETS):
        assert histogram.bounds(bucket)[0] == histogram.bounds(bucket - 1)[1]
    assert histogram.bounds(histogram.BUCKETS - 1)[1] == math.inf
    assert histogram.LAST_START > 23 * 3600
    assert histogram.index(41.0) == histogram.index(57.0) == histogram.index(40.95) + 1
    assert histogram.index(float("nan")) == 0
    assert histogram.index(10**9) == histogram.BUCKETS - 1
    assert len(histogram.field_names()) == histogram.BUCKETS


def test_nothing_counted_has_no_percentile() -> None:
    assert histogram.percentile([0] * histogram.BUCKETS, 0.99, 0.0) is None


def test_a_single_run_reads_back_within_its_bucket() -> None:
    counts = histogram.counts([41.0])
    p99 = histogram.percentile(counts, 0.99, 41.0)
    assert p99 == 41.0  # the bucket's middle (about 43 s) is above the largest run: capped
    counts = histogram.counts([41.0, 30.0])
    assert histogram.percentile(counts, 0.5, 41.0) == math.sqrt(
        histogram.bounds(histogram.index(30.0))[0] * histogram.bounds(histogram.index(30.0))[1]
    )
