"""The job list's search and name choices, each read through an index at any table size.

Django searches a ``name`` field with ``UPPER(name) LIKE UPPER('%term%')``, which no b-tree
index serves: a word few jobs carry reads the whole table. A job table holds few distinct
names (the registry's, and those of rows whose job is gone), so the names present are
listed first, one probe of ``leasejobs_name`` each (a skip scan), matched here, and searched
as ``name IN (...)``. The other terms are exact matches through an index of their own: the
primary key, ``leasejobs_dedupe_key`` and ``leasejobs_concurrency_key``.
"""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils.text import unescape_string_literal

from ..core import registry
from ..core.row_ids import row_id
from ..models import Job
from .base import first_words

MAX_NAMES = 1000
"""Past this many distinct names the skip scan costs more than it saves: the search then
matches the name with ``icontains`` (a read of the table, correct at any size)."""


def names_present(alias: str, limit: int | None = None) -> list[str] | None:
    """The distinct job names in the table, in order; None past ``limit`` (``MAX_NAMES``).

    ``name > previous ORDER BY name LIMIT 1`` per name, where ``SELECT DISTINCT`` would read
    every row."""
    limit = MAX_NAMES if limit is None else limit
    names: list[str] = []
    jobs = Job.objects.using(alias).order_by("name")
    while len(names) <= limit:
        after = jobs.filter(name__gt=names[-1]) if names else jobs
        name = after.values_list("name", flat=True).first()
        if name is None:
            return names
        names.append(name)
    return None


def names_for(request: HttpRequest, alias: str) -> list[str] | None:
    """``names_present``, read once per request: a list page's name filter and its search
    both need them."""
    read: dict[str, list[str] | None] = request.__dict__.setdefault("_leasejobs_job_names", {})
    if alias not in read:
        read[alias] = names_present(alias)
    return read[alias]


def known_names(request: HttpRequest, alias: str) -> list[str] | None:
    """The registered names and those present in the table, in order; None past the cap."""
    present = names_for(request, alias)
    if present is None:
        return None
    return sorted(set(present) | set(registry.registered()))


def _term_matches(term: str, names: list[str] | None) -> Q:
    """Jobs one search word finds: by exact id, dedupe key or concurrency key, or part of
    the name, ignoring case."""
    found = Q(dedupe_key=term) | Q(concurrency_key=term)
    pk = row_id(term)
    if pk is not None:
        found |= Q(pk=pk)
    if names is None:
        return found | Q(name__icontains=term)
    folded = term.casefold()
    named = [name for name in names if folded in name.casefold()]
    return found | Q(name__in=named) if named else found


def search(request: HttpRequest, queryset: QuerySet[Job], text: str) -> QuerySet[Job]:
    """The jobs every word of ``text`` finds (quoted phrases are one word), as Django's admin
    search splits it; the first ``base.MAX_WORDS`` distinct words only (``base.first_words``). A
    job has one id, one dedupe key, one concurrency key and one name, so past a few words only
    more parts of the name could narrow the list."""
    words = [
        unescape_string_literal(word) if word[0] in "\"'" and word[-1] == word[0] else word
        for word in first_words(request, text)
    ]
    if not words:
        return queryset
    # Only the names rows carry: a registered name no row has would cost the planner an
    # estimate (SQLite's is a name's average share of the table) and find nothing.
    names = names_for(request, queryset.db)
    for word in words:
        queryset = queryset.filter(_term_matches(word, names))
    return queryset
