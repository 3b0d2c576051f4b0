"""A changelist paginator that never counts millions of rows.

Django's paginator runs ``COUNT(*)`` over the filtered queryset on every list page: on a job
table of ten million rows that is most of a second, filtered or not (issue #19). This one
counts through :func:`django_leasejobs.dialects.dialects.count`: exact up to ``CAP`` rows,
then PostgreSQL's planner's estimate (shown as ``~12,345,678 jobs``) or, elsewhere, ``CAP``
as a lower bound (``10,000+ jobs``, and pages only as far as that). The rows shown are always
the real ones: only the number of pages is estimated.
"""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.utils.functional import cached_property

from .. import dialects


class CountingPaginator(Paginator):
    """``count`` from :func:`dialects.count`; ``counted`` says whether it is exact."""

    @cached_property
    def counted(self) -> dialects.Count:
        objects = self.object_list
        if isinstance(objects, QuerySet):
            return dialects.count(objects)
        return dialects.Count(len(objects))

    @cached_property
    def count(self) -> int:
        return self.counted.value
