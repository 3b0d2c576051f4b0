"""The admin's lists read the replica of ``LEASEJOBS_READ_DATABASES``; nothing that acts does.

A list page is the admin's heaviest read (a count, a page of rows, the filters' choices), so
with a replica configured a list shown by GET reads it, and says at the top which replica and
how far behind (:mod:`..reports.replica_lag`). Everything that acts stays on the primary: an
action or a bulk edit is a POST, whose rows are read from the primary; a job's page and the
bulk confirmation read the primary too, so an operator acts on current rows only.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from ..models.databases import job_database, read_database, replica_database
from ..reports import replica_lag
from .databases import chosen

READ_FROM = "_leasejobs_read_from"
"""The request's attribute holding the alias its change list reads, with a replica configured:
the replica for a list shown by GET, the primary for a POST (an action, a bulk edit)."""


def list_database(request: HttpRequest) -> str:
    """Where a change list's other reads (its filters' choices) go for this request."""
    return getattr(request, READ_FROM, None) or read_database()


def show_lag(request: HttpRequest, lag: replica_lag.ReplicaLag | None) -> None:
    """The replica's lag as a message on the page being rendered: a warning when it is too
    stale to trust or unknown."""
    if lag is None:
        return
    trusted = lag.seconds is not None and not lag.stale
    level = messages.INFO if trusted else messages.WARNING
    messages.add_message(request, level, lag.text(), fail_silently=True)


class ReplicaLists:
    """For the ModelAdmins of the queue database's tables (not API tokens, which live with
    the users): the list shown by GET reads the replica, when one is configured."""

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if replica_database() is not None:
            shown = request.method in ("GET", "HEAD")
            setattr(request, READ_FROM, read_database() if shown else job_database())
            if shown:
                show_lag(request, replica_lag.read())
        return super().changelist_view(request, extra_context)  # type: ignore[misc]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        """Bound to its database: the replica's or the primary's, as above, else the queue
        database ``?database=`` chose (a page renders after the view, when the choice is
        no longer in force for an unbound queryset: ``admin.databases``)."""
        queryset: QuerySet[Any] = super().get_queryset(request)  # type: ignore[misc]
        alias = getattr(request, READ_FROM, None)
        if alias is None and chosen() is not None:
            alias = job_database()
        return queryset if alias is None else queryset.using(alias)
