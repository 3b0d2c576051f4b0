"""Which queue database an admin page shows and acts on: ``?database=ALIAS``, home by default.

With shards (``LEASEJOBS_QUEUE_DATABASES``) the same ids repeat in each queue database, so a
page must say which one it means, and every link and form on it must keep saying so. The
choice is a value of the request: :func:`database_view` reads it (an unknown alias is refused
with a 404 naming the databases there are), and runs the view inside
:func:`~django_leasejobs.models.databases.using_database`, so the library's calls (cancel,
replay, stats, pause...) work on that database. The page is rendered inside the block too:
Django renders a ``TemplateResponse`` after the view returns, when the block is left, and a
list's lazy rows and the related rows its columns read must come from the chosen database.

A detail page reached from a list carries the choice inside Django's ``_changelist_filters``
(the list's query string), which is read too; the links and forms a page builds itself go
through :func:`with_database`, and a redirect to another page of the app gets it added.
Admin log entries stay where Django writes them (``LogEntry`` in its own database).

With one queue database nothing changes: no switch is shown, and a page without
``?database=`` runs exactly as before.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponse, QueryDict
from django.template.response import SimpleTemplateResponse
from django.urls import Resolver404, URLPattern, resolve

from ..models.databases import home_database, queue_databases, using_database

PARAM = "database"
"""The query parameter naming the queue database a page shows."""
PRESERVED = "_changelist_filters"
"""Django's parameter carrying a list's query string to the pages reached from it."""
APP_URLS = "django_leasejobs_"
"""The prefix of every URL name of the app's admin: the redirects that keep the database."""

_page: ContextVar[str | None] = ContextVar("leasejobs_admin_database", default=None)
"""The database the page being built was asked for (``None``: none named, the home one)."""


class UnknownDatabase(ValueError):
    """``?database=`` names no queue database; the message lists those there are."""


def requested(request: HttpRequest) -> str | None:
    """The alias the request names, directly or in the list's query string it carries;
    ``None`` when it names none. Raises :class:`UnknownDatabase` for an alias that is not a
    queue database (a database of the project that holds no jobs is not one either)."""
    value = request.GET.get(PARAM)
    if value is None and PRESERVED in request.GET:
        value = QueryDict(request.GET[PRESERVED]).get(PARAM)
    if value is None:
        return None
    known = queue_databases()
    if value not in known:
        names = ", ".join(repr(alias) for alias in known)
        raise UnknownDatabase(f"No queue database {value!r}: the queue databases are {names}.")
    return value


def chosen() -> str | None:
    """The database named for the page being built, if any (inside :func:`database_view`)."""
    return _page.get()


def with_database(url: str, alias: str | None = None) -> str:
    """``url`` naming the chosen database (``alias``, else the page's): unchanged when none
    was named or the url already names one."""
    alias = alias or chosen()
    if alias is None:
        return url
    parts = urlsplit(url)
    query = QueryDict(parts.query, mutable=True)
    if PARAM in query:
        return url
    query[PARAM] = alias
    return urlunsplit(parts._replace(query=query.urlencode()))


def preserved_with_database(preserved: str) -> str:
    """Django's preserved filters (``_changelist_filters=...``) with the chosen database in
    the list's query string, so the way back to the list keeps to that database."""
    alias = chosen()
    if alias is None:
        return preserved
    inner = QueryDict(QueryDict(preserved).get(PRESERVED, ""), mutable=True)
    if PARAM in inner:
        return preserved
    inner[PARAM] = alias
    return urlencode({PRESERVED: inner.urlencode()})


def switch(request: HttpRequest) -> list[dict[str, Any]]:
    """The links to this page in each queue database, the shown one marked; none (no switch)
    with one queue database. Each keeps the query string of the page, not its paging."""
    aliases = queue_databases()
    if len(aliases) < 2:
        return []
    current = chosen() or home_database()
    links = []
    for alias in aliases:
        query = request.GET.copy()
        for dropped in (PARAM, PRESERVED, "p", "e"):
            query.pop(dropped, None)
        query[PARAM] = alias
        links.append(
            {
                "alias": alias,
                "url": f"{request.path}?{query.urlencode()}",
                "current": alias == current,
                "home": alias == home_database(),
            }
        )
    return links


def _app_page(location: str) -> bool:
    """Whether a redirect goes to a page of the app's admin (not the login page, say)."""
    try:
        match = resolve(urlsplit(location).path)
    except Resolver404:
        return False
    return bool(match.url_name and match.url_name.startswith(APP_URLS))


@contextmanager
def on_page(alias: str | None) -> Iterator[None]:
    """The page's database, for :func:`chosen` and the library (``using_database``)."""
    token = _page.set(alias)
    try:
        with using_database(alias):
            yield
    finally:
        _page.reset(token)


def database_view(
    view: Callable[..., HttpResponse], site: AdminSite
) -> Callable[..., HttpResponse]:
    """``view`` on the database the request names: see the module's docstring."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            alias = requested(request)
        except UnknownDatabase as exc:
            if not site.has_permission(request):  # the login page, saying nothing more
                return view(request, *args, **kwargs)
            return HttpResponse(str(exc), status=404, content_type="text/plain; charset=utf-8")
        with on_page(alias):
            response = view(request, *args, **kwargs)
            if isinstance(response, SimpleTemplateResponse):
                if response.context_data is not None:
                    response.context_data.setdefault("leasejobs_database", alias)
                    query = urlencode({PARAM: alias}) if alias is not None else ""
                    response.context_data.setdefault("leasejobs_database_query", query)
                    response.context_data.setdefault("leasejobs_switch", switch(request))
                if alias is not None:
                    response.render()  # here, not after the block: see the docstring
            location = response.get("Location") if alias is not None else None
            redirect = response.status_code in (301, 302, 303, 307, 308)
            if location and redirect and _app_page(location):
                response["Location"] = with_database(location)
        return response

    return wrapped


def on_databases(patterns: list[Any], site: AdminSite) -> list[Any]:
    """The app's URL patterns, each view wrapped in :func:`database_view`."""
    return [
        URLPattern(p.pattern, database_view(p.callback, site), p.default_args, p.name)
        if isinstance(p, URLPattern)
        else p
        for p in patterns
    ]


class DatabasePages:
    """For the ModelAdmins of the queue databases' tables: every page of the model (Django's
    and the app's own) on the chosen database, and the way back to its list keeping it."""

    @property
    def urls(self) -> list[Any]:
        """Every URL of the model's admin, the subclasses' own pages included."""
        return on_databases(self.get_urls(), self.admin_site)  # type: ignore[attr-defined]

    def get_preserved_filters(self, request: HttpRequest) -> str:
        preserved: str = super().get_preserved_filters(request)  # type: ignore[misc]
        if not getattr(self, "preserve_filters", True):
            return preserved
        return preserved_with_database(preserved)
