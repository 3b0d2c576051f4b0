"""``django_leasejobs.stats.collect()``: the public name for the queue numbers, kept working.

The module lives in :mod:`django_leasejobs.reports.stats`; monitoring code written against this
name (the README and older docs showed it) goes on importing from here.
"""

from .reports.stats import QueueStats, Stats, collect

__all__ = ["QueueStats", "Stats", "collect"]
